"""What only the PostgreSQL store does: migrations under an advisory lock and the databases older
code wrote, connections (DSNs, passwords kept out of messages, the pool, a closed store), sessions
that die mid-transaction, NUL in text, values read back as SQLite's, and the engine on two replicas.
Everything both stores promise is in tests/test_store_contract.py, run on PostgreSQL there.

The server comes from tests/pg.py (scripts/pg-test-server.sh, or MINICACHE_TEST_PG_DSN); every test
gets a database of its own.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
from test_store_contract import PROGRAM, check_writes_and_reads_back, entry, example, run_threads

from minicache.store import SQLiteStore, StoreError, open_store
from minicache.store.schema import LATEST

psycopg = pytest.importorskip("psycopg")

from minicache.config.engine import VerifyConfig  # noqa: E402
from minicache.store.postgres import PostgresStore, redact_dsn  # noqa: E402

pytestmark = pytest.mark.postgres

# The PostgreSQL schema exactly as the store wrote it before the schema was defined once for both
# stores (minicache/store/schema.py): every database created until then has these tables.
OLD_MIGRATIONS: list[str] = [
    # 1: the initial schema (``seq`` keeps insertion order among rows created in the same instant)
    """
    CREATE TABLE groups (
        tenant TEXT NOT NULL, id TEXT NOT NULL, label TEXT, status TEXT NOT NULL DEFAULT 'open',
        build_failures INTEGER NOT NULL DEFAULT 0, uncacheable_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL, seq BIGINT GENERATED ALWAYS AS IDENTITY,
        PRIMARY KEY (tenant, id));
    CREATE TABLE examples (
        tenant TEXT NOT NULL, id TEXT NOT NULL, group_id TEXT NOT NULL, question TEXT NOT NULL,
        context TEXT, program TEXT NOT NULL, answer TEXT NOT NULL, variables TEXT NOT NULL,
        embedding BYTEA, created_at DOUBLE PRECISION NOT NULL, seq BIGINT GENERATED ALWAYS AS IDENTITY,
        PRIMARY KEY (tenant, id));
    CREATE INDEX examples_group ON examples (tenant, group_id);
    CREATE TABLE entries (
        tenant TEXT NOT NULL, id TEXT NOT NULL, group_id TEXT NOT NULL, version INTEGER NOT NULL,
        status TEXT NOT NULL, template TEXT NOT NULL, program TEXT NOT NULL, program_hash TEXT NOT NULL,
        validation TEXT NOT NULL, rules TEXT NOT NULL DEFAULT '{}', hits INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL, seq BIGINT GENERATED ALWAYS AS IDENTITY,
        PRIMARY KEY (tenant, id), UNIQUE (tenant, group_id, version));
    CREATE INDEX entries_group ON entries (tenant, group_id, status);
    CREATE TABLE counters (tenant TEXT NOT NULL, name TEXT NOT NULL, value BIGINT NOT NULL,
        PRIMARY KEY (tenant, name));
    """,
    # 2: build leases, so that replicas sharing a store never build one group at once
    """
    CREATE TABLE build_leases (tenant TEXT NOT NULL, group_id TEXT NOT NULL, owner TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (tenant, group_id));
    """,
    # 3: StepCache's verified structured outputs
    """
    CREATE TABLE step_records (tenant TEXT NOT NULL, id TEXT NOT NULL, task TEXT NOT NULL, frame TEXT NOT NULL,
        request TEXT NOT NULL, steps TEXT NOT NULL, embedding BYTEA, created_at DOUBLE PRECISION NOT NULL,
        seq BIGINT GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (tenant, id));
    CREATE INDEX step_records_task ON step_records (tenant, task);
    """,
    # 4: each entry's audit record (hits also answered by the miss path: agreed / disagreed)
    """
    ALTER TABLE entries ADD COLUMN audits_agreed INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE entries ADD COLUMN audits_disagreed INTEGER NOT NULL DEFAULT 0;
    """,
    # 5: replicas' routing indexes read only the examples after the last seq they saw; why each
    # group's last build failed or its entry was evicted (minicache.build.admission)
    """
    CREATE INDEX examples_seq ON examples (tenant, seq);
    ALTER TABLE groups ADD COLUMN failure TEXT;
    """,
    # 6: each entry's record of the small model's choices on hit attempts (minicache.hit.model_record)
    """
    ALTER TABLE entries ADD COLUMN model_served INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE entries ADD COLUMN model_refused INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE entries ADD COLUMN model_ms BIGINT NOT NULL DEFAULT 0;
    """,
]


@pytest.fixture
def store(pg_dsn):
    s = PostgresStore(pg_dsn)
    yield s
    s.close()


def raw(dsn: str):
    return psycopg.connect(dsn, autocommit=True)


def schema_of(dsn: str) -> dict[str, list[tuple]]:
    """Every column (type, nullability, default, identity), index and constraint of the database."""
    with raw(dsn) as conn:
        return {
            "columns": conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity "
                "FROM information_schema.columns WHERE table_schema='public' "
                "ORDER BY table_name, ordinal_position"
            ).fetchall(),
            "indexes": conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname='public' "
                "ORDER BY indexname"
            ).fetchall(),
            "constraints": conn.execute(
                "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
                "FROM pg_constraint WHERE connamespace='public'::regnamespace "
                "ORDER BY 1, 2"
            ).fetchall(),
        }


# -- migrations, connections and persistence -----------------------------------------------------


def test_migrations_bring_a_new_database_to_the_latest_schema(store, pg_dsn):
    # the versions after OLD_MIGRATIONS were born in schema.py: what they add is checked below
    assert store.schema_version() == LATEST == len(OLD_MIGRATIONS) + 1
    with raw(pg_dsn) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema='public'"
            )
        }
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name='examples'"
            ).fetchall()
        )
    assert {
        "groups",
        "examples",
        "entries",
        "counters",
        "schema_version",
        "build_leases",
        "step_records",
        "counter_history",
    } <= tables
    assert types["embedding"] == "bytea" and types["created_at"] == "double precision"


def test_a_database_the_previous_code_created_opens_and_has_the_schema_a_new_one_gets(pg_database):
    old_dsn, new_dsn = pg_database(), pg_database()
    with raw(old_dsn) as conn, conn.transaction():
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY)")
        for version, script in enumerate(OLD_MIGRATIONS, start=1):
            conn.execute(script)
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
    PostgresStore(new_dsn).close()
    old = PostgresStore(old_dsn)  # migrates what came after
    try:
        check_writes_and_reads_back(old)
    finally:
        old.close()
    assert schema_of(old_dsn) == schema_of(new_dsn)


def test_a_database_at_version_6_upgrades_in_place_keeps_its_data_and_records_history(
    pg_database,
):
    dsn = pg_database()
    with raw(dsn) as conn, conn.transaction():
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY)")
        for version, script in enumerate(OLD_MIGRATIONS[:6], start=1):
            conn.execute(script)
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        conn.execute("INSERT INTO counters (tenant, name, value) VALUES ('team-a', 'requests', 7)")
    store = PostgresStore(dsn)
    try:
        assert store.schema_version() == LATEST == 7
        assert store.counters("team-a") == {"requests": 7}
        assert store.tenants() == ["team-a"]
        store.record_history("team-a", "hour", 3600, {"requests": 7.0}, {})
        assert store.history("team-a", "hour", 0) == {3600: {"requests": (7.0, 7.0)}}
    finally:
        store.close()


def test_concurrent_first_opens_migrate_exactly_once(pg_dsn):
    barrier = threading.Barrier(4)
    stores: list[PostgresStore] = []
    lock = threading.Lock()

    def open_one():
        barrier.wait()
        s = PostgresStore(pg_dsn)
        with lock:
            stores.append(s)

    run_threads(open_one, [()] * 4)
    try:
        assert [s.schema_version() for s in stores] == [LATEST] * 4
        with raw(pg_dsn) as conn:
            versions = [
                r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")
            ]
        assert versions == list(range(1, LATEST + 1))
    finally:
        for s in stores:
            s.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("form", ["url", "keyvalue"])
def test_unreachable_server_is_a_store_error_without_the_password(form):
    port = _closed_port()
    dsn = (
        f"postgresql://mc:s3cr3t-pw@127.0.0.1:{port}/minicache?connect_timeout=3"
        if form == "url"
        else f"host=127.0.0.1 port={port} user=mc password=s3cr3t-pw dbname=minicache connect_timeout=3"
    )
    began = time.monotonic()
    with pytest.raises(StoreError) as info:
        PostgresStore(dsn)
    message = str(info.value)
    assert "s3cr3t-pw" not in message and "password" not in message
    assert "127.0.0.1" in message and str(port) in message and "cannot connect" in message
    assert time.monotonic() - began < 10


def test_redact_dsn_strips_passwords_only():
    assert (
        redact_dsn("postgresql://u:pw@h:5/db?sslmode=require&password=x")
        == "postgresql://u@h:5/db?sslmode=require"
    )
    assert redact_dsn("postgres://h/db") == "postgres://h/db"
    assert redact_dsn("host=h password='a b\\' c' user=u") == "host=h user=u"
    assert redact_dsn("host=h password=secret") == "host=h"


def test_invalid_dsn_is_a_store_error():
    with pytest.raises(StoreError, match="invalid PostgreSQL DSN"):
        PostgresStore("this is not a dsn")


def test_closed_store_raises_a_store_error(pg_dsn):
    s = PostgresStore(pg_dsn)
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.counters("default")


def test_values_read_back_exactly_as_from_sqlite(store, tmp_path):
    lite = SQLiteStore(tmp_path / "s.db")
    try:
        answers = [2.5, 7, "USD 1,200", {"a": [1, 2.0, None]}, None, True]
        validation = {
            "extraction": "choice",
            "passed": 2,
            "of": 3,
            "at": 1712345678.123456,
            "attempts": [{"source": "miss-program", "ok": True, "error": None}],
            "ünï": "ç",
        }
        for s in (store, lite):
            for i, answer in enumerate(answers):
                x = example("g", answer=answer, embedding=np.full(3, i, dtype=np.float32))
                x.id, x.created_at, x.context = f"ex_{i}", 1000.0 + i, None if i % 2 else "ctx ☃"
                s.add_example(x)
            e = entry("g", validation=validation, rules={"x": {"kind": "regex", "pattern": r"\d+"}})
            e.id = "ent_same"
            s.put_entry(e)
        pg_examples, lite_examples = store.examples("default", "g"), lite.examples("default", "g")
        for a, b in zip(pg_examples, lite_examples, strict=True):
            assert (a.id, a.question, a.context, a.answer, a.variables, a.created_at) == (
                b.id,
                b.question,
                b.context,
                b.answer,
                b.variables,
                b.created_at,
            )
            assert type(a.answer) is type(b.answer)
            np.testing.assert_array_equal(a.embedding, b.embedding)
        a, b = store.get_entry("default", "ent_same"), lite.get_entry("default", "ent_same")
        assert (a.template, a.validation, a.rules, a.program, a.version, a.status) == (
            b.template,
            b.validation,
            b.rules,
            b.program,
            b.version,
            b.status,
        )
        ids_pg, m_pg = store.routing_index("default")
        ids_lite, m_lite = lite.routing_index("default")
        assert ids_pg == ids_lite and m_pg.dtype == m_lite.dtype == np.float32
        np.testing.assert_array_equal(m_pg, m_lite)
    finally:
        lite.close()


def _as_url(dsn: str) -> str:
    if dsn.startswith(("postgres://", "postgresql://")):
        return dsn
    from urllib.parse import quote, urlencode

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    user = params.pop("user", "")
    password = params.pop("password", "")
    host = params.pop("host", "")
    port = params.pop("port", "")
    dbname = params.pop("dbname", "")
    userinfo = (
        quote(str(user)) + (":" + quote(str(password)) if password else "") + ("@" if user else "")
    )
    query = urlencode({"host": host, **params} if host.startswith("/") else params)
    netloc = userinfo + ("" if host.startswith("/") else str(host)) + (f":{port}" if port else "")
    return f"postgresql://{netloc}/{quote(str(dbname))}" + (f"?{query}" if query else "")


def test_open_store_returns_a_postgres_store_for_postgres_urls(pg_dsn):
    s = open_store(_as_url(pg_dsn))
    try:
        assert isinstance(s, PostgresStore) and s.schema_version() == LATEST
    finally:
        s.close()


# -- transactions and concurrency ------------------------------------------------------------------


def test_an_entry_in_a_transaction_that_dies_is_never_visible(store, pg_dsn):
    writer = psycopg.connect(pg_dsn)  # not autocommit: the INSERT opens a transaction
    writer.execute("INSERT INTO groups (tenant, id, created_at) VALUES ('default', 'grp_1', 0)")
    writer.execute(
        "INSERT INTO entries (tenant, id, group_id, version, status, template, program, program_hash, "
        "validation, created_at, updated_at) VALUES ('default', 'ent_half', 'grp_1', 1, 'active', '[]', "
        "'x', 'h', '{}', 0, 0)"
    )
    pid = writer.info.backend_pid
    assert (
        store.active_entry("default", "grp_1") is None
    )  # uncommitted: invisible to other sessions
    with raw(pg_dsn) as admin:  # the writer dies mid-transaction (as a crashed replica would)
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
    with pytest.raises(psycopg.OperationalError):
        writer.execute("SELECT 1")
    writer.close()
    assert store.active_entry("default", "grp_1") is None
    assert (
        store.get_entry("default", "ent_half") is None
        and store.get_group("default", "grp_1") is None
    )
    assert store.put_entry(entry()).version == 1  # and the group works normally afterwards

    quitter = psycopg.connect(pg_dsn)  # the same when the connection is just closed uncommitted
    quitter.execute("INSERT INTO counters (tenant, name, value) VALUES ('default', 'ghost', 1)")
    quitter.close()
    assert store.counters("default") == {}


def test_pool_is_shared_safely_by_more_threads_than_connections(pg_dsn):
    s = PostgresStore(pg_dsn, min_size=1, max_size=2)
    try:

        def work(k):
            for i in range(10):
                s.add_example(example(f"g{k}", question=f"{k}-{i}"))
                s.bump("default", "n")
                assert len(s.examples("default", f"g{k}")) == i + 1

        run_threads(work, [(k,) for k in range(8)])
        assert s.counters("default") == {"n": 80}
    finally:
        s.close()


# -- the engine on two replicas ----------------------------------------------------------------------


@pytest.fixture
def replicas(pg_dsn, sandbox):
    """Two MiniCache engines (replicas A and B), each with its own PostgresStore on one database."""
    from fakes import FakeSmall, FakeTarget, HashEmbedder
    from minicache.engine import EngineConfig, MiniCache

    # probation: test_probation.py; early builds: test_admission.py
    config = EngineConfig(background_builds=False, verify=VerifyConfig(probation=0), build_early=0)
    made = [
        MiniCache(
            FakeTarget(),
            FakeSmall(),
            store=PostgresStore(pg_dsn),
            embedder=HashEmbedder(),
            config=config,
            sandbox=sandbox,
        )
        for _ in range(2)
    ]
    yield made
    for mc in made:
        mc.close()


def _ask(mc, values, **kwargs):
    from fakes import CURRENT_RATIO

    result = mc.solve(CURRENT_RATIO.ask(*values), **kwargs)
    assert result.answer == pytest.approx(CURRENT_RATIO.answer(*values), rel=1e-9), result
    return result


def test_an_entry_built_by_one_replica_serves_hits_on_the_other(replicas):
    from fakes import CR_VALUES

    a, b = replicas
    misses = [_ask(a, v) for v in CR_VALUES[:3]]
    assert [r.route for r in misses] == ["miss"] * 3
    assert len({r.group for r in misses}) == 1
    built = a.store.active_entry("default", misses[0].group)
    assert built is not None
    hit = _ask(b, CR_VALUES[3])
    assert hit.route == "hit" and hit.entry_id == built.id and hit.group == misses[0].group
    assert b.target.calls == []  # replica B never asked its target
    assert a.store.get_entry("default", built.id).hits == 1
    for mc in (a, b):  # both replicas report the shared numbers
        stats = mc.stats()
        assert (stats["requests"], stats["misses"], stats["hits"], stats["builds_ok"]) == (
            4,
            3,
            1,
            1,
        )


def test_an_entry_of_one_tenant_is_not_a_hit_for_another(replicas):
    from fakes import CR_VALUES

    a, b = replicas
    for v in CR_VALUES[:3]:
        _ask(a, v, tenant="a")
    assert len(a.store.list_entries("a", "active")) == 1
    other = _ask(b, CR_VALUES[3], tenant="b")
    assert other.route == "miss" and other.entry_id is None
    assert b.store.list_entries("b") == [] and b.store.counters("b")["misses"] == 1
    assert _ask(b, CR_VALUES[4], tenant="a").route == "hit"


def test_a_replica_does_not_build_a_group_whose_lease_another_holds(replicas):
    from fakes import CR_VALUES

    a, b = replicas
    first = _ask(a, CR_VALUES[0])
    _ask(a, CR_VALUES[1])
    # Replica A is (say) building this group right now: it holds the lease.
    assert a.store.acquire_build_lease("default", first.group, "replica_a_builder", ttl_s=60)
    third = _ask(b, CR_VALUES[2])
    assert third.group == first.group and b.store.active_entry("default", first.group) is None
    assert b.events == [] and b.target.build_calls == 0  # B did not build (nor try to)
    a.store.release_build_lease("default", first.group, "replica_a_builder")
    _ask(b, CR_VALUES[3])  # the next miss builds (the group has enough examples)
    assert a.store.active_entry("default", first.group) is not None
    assert _ask(a, CR_VALUES[4]).route == "hit"


def test_text_with_nul_characters_is_a_store_error_and_stores_nothing(store):
    """PostgreSQL TEXT cannot hold NUL (SQLite can); the engine refuses NUL in requests, but imported
    examples and programs are not checked, so the store says so clearly instead of a driver error."""
    bad = example("g", question="what\x00is this")
    with pytest.raises(StoreError, match="NUL"):
        store.add_example(bad)
    with pytest.raises(StoreError, match="NUL"):
        store.put_entry(entry("g", program=PROGRAM + "\x00"))
    assert store.examples("default", "g") == [] and store.list_entries("default") == []
    assert store.get_group("default", "g") is None  # put_entry's group insert was rolled back too
