"""The PostgreSQL store against a real server: the SQLite store's behaviours, plus what several
replicas sharing one database need (visibility, build leases, concurrent writers and migrations,
atomic entries), and the engine end to end on two replicas.

The server comes from tests/pg.py (scripts/pg-test-server.sh, or MINICACHE_TEST_PG_DSN); every test
gets a database of its own.
"""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from pg import pg_database, pg_dsn, pg_server  # noqa: F401 - fixtures
from minicache.store import Entry, Example, SQLiteStore, StoreError, Variable, new_id, open_store

psycopg = pytest.importorskip("psycopg")

from minicache.store.postgres import MIGRATIONS, PostgresStore, redact_dsn  # noqa: E402

pytestmark = pytest.mark.postgres

PROGRAM = "def solve(x=1,  # a number\n):\n    return x * 2\n"


@pytest.fixture
def store(pg_dsn):
    s = PostgresStore(pg_dsn)
    yield s
    s.close()


def entry(group="grp_1", tenant="default", status="active", program=PROGRAM, **kw) -> Entry:
    return Entry(id=new_id("ent"), tenant=tenant, group_id=group, template=[Variable("x", "integer", "a number")],
                 program=program, status=status, **kw)


def example(group="grp_1", tenant="default", question="What is 2 x 1?", answer=2, embedding=None) -> Example:
    return Example(id=new_id("ex"), tenant=tenant, group_id=group, question=question, context=None,
                   program=PROGRAM, answer=answer, variables={"x": 1}, embedding=embedding)


def run_threads(target, args_list) -> None:
    """Run ``target(*args)`` for each args in threads; re-raise the first error in this thread."""
    errors: list[BaseException] = []

    def wrapped(*args):
        try:
            target(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def raw(dsn: str):
    return psycopg.connect(dsn, autocommit=True)


# -- migrations, connections and persistence -----------------------------------------------------


def test_migrations_bring_a_new_database_to_the_latest_schema(store, pg_dsn):
    assert store.schema_version() == len(MIGRATIONS) == 5
    with raw(pg_dsn) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema='public'")}
        types = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                                  "WHERE table_name='examples'").fetchall())
    assert {"groups", "examples", "entries", "counters", "schema_version", "build_leases", "step_records"} <= tables
    assert types["embedding"] == "bytea" and types["created_at"] == "double precision"


def test_reopening_does_not_rerun_migrations(pg_dsn):
    PostgresStore(pg_dsn).close()
    again = PostgresStore(pg_dsn)
    assert again.schema_version() == len(MIGRATIONS)
    again.close()
    with raw(pg_dsn) as conn:
        assert conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == len(MIGRATIONS)


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
        assert [s.schema_version() for s in stores] == [len(MIGRATIONS)] * 4
        with raw(pg_dsn) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]
        assert versions == list(range(1, len(MIGRATIONS) + 1))
    finally:
        for s in stores:
            s.close()


def test_database_from_a_newer_version_is_refused(pg_dsn):
    PostgresStore(pg_dsn).close()
    with raw(pg_dsn) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (999)")
    with pytest.raises(StoreError, match="schema version 999"):
        PostgresStore(pg_dsn)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("form", ["url", "keyvalue"])
def test_unreachable_server_is_a_store_error_without_the_password(form):
    port = _closed_port()
    dsn = (f"postgresql://mc:s3cr3t-pw@127.0.0.1:{port}/minicache?connect_timeout=3" if form == "url" else
           f"host=127.0.0.1 port={port} user=mc password=s3cr3t-pw dbname=minicache connect_timeout=3")
    began = time.monotonic()
    with pytest.raises(StoreError) as info:
        PostgresStore(dsn)
    message = str(info.value)
    assert "s3cr3t-pw" not in message and "password" not in message
    assert "127.0.0.1" in message and str(port) in message and "cannot connect" in message
    assert time.monotonic() - began < 10


def test_redact_dsn_strips_passwords_only():
    assert redact_dsn("postgresql://u:pw@h:5/db?sslmode=require&password=x") == "postgresql://u@h:5/db?sslmode=require"
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


def test_reopening_keeps_groups_examples_entries_and_counters(pg_dsn):
    first = PostgresStore(pg_dsn)
    first.ensure_group("default", "label:x", label="x")
    vector = np.arange(4, dtype=np.float32)
    ex_in = example("label:x", answer=2.5, embedding=vector)
    first.add_example(ex_in)
    stored = first.put_entry(entry("label:x", rules={"x": {"kind": "position", "index": 0, "count": 1}}))
    first.bump("default", "hits", 3)
    first.close()

    second = PostgresStore(pg_dsn)
    group = second.get_group("default", "label:x")
    assert (group.label, group.status, group.n_examples) == ("x", "cached", 1)
    [ex] = second.examples("default", "label:x")
    assert ex.answer == 2.5 and ex.variables == {"x": 1}
    assert ex.created_at == ex_in.created_at  # float64, not PostgreSQL's float4 REAL
    np.testing.assert_array_equal(ex.embedding, vector)
    assert ex.embedding.dtype == np.float32
    got = second.get_entry("default", stored.id)
    assert got.program == PROGRAM and got.template == stored.template and got.rules == stored.rules
    assert got.program_hash == stored.program_hash
    assert (got.created_at, got.updated_at, got.version) == (stored.created_at, stored.updated_at, 1)
    assert second.counters("default") == {"hits": 3}
    second.close()


def test_values_read_back_exactly_as_from_sqlite(store, tmp_path):
    lite = SQLiteStore(tmp_path / "s.db")
    try:
        answers = [2.5, 7, "USD 1,200", {"a": [1, 2.0, None]}, None, True]
        validation = {"extraction": "choice", "passed": 2, "of": 3, "at": 1712345678.123456,
                      "attempts": [{"source": "miss-program", "ok": True, "error": None}], "ünï": "ç"}
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
            assert (a.id, a.question, a.context, a.answer, a.variables, a.created_at) == \
                   (b.id, b.question, b.context, b.answer, b.variables, b.created_at)
            assert type(a.answer) is type(b.answer)
            np.testing.assert_array_equal(a.embedding, b.embedding)
        a, b = store.get_entry("default", "ent_same"), lite.get_entry("default", "ent_same")
        assert (a.template, a.validation, a.rules, a.program, a.version, a.status) == \
               (b.template, b.validation, b.rules, b.program, b.version, b.status)
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
    userinfo = quote(str(user)) + (":" + quote(str(password)) if password else "") + ("@" if user else "")
    query = urlencode({"host": host, **params} if host.startswith("/") else params)
    netloc = userinfo + ("" if host.startswith("/") else str(host)) + (f":{port}" if port else "")
    return f"postgresql://{netloc}/{quote(str(dbname))}" + (f"?{query}" if query else "")


def test_open_store_returns_a_postgres_store_for_postgres_urls(pg_dsn):
    s = open_store(_as_url(pg_dsn))
    try:
        assert isinstance(s, PostgresStore) and s.schema_version() == len(MIGRATIONS)
    finally:
        s.close()


# -- groups and examples ---------------------------------------------------------------------------


def test_ensure_group_is_idempotent_and_list_groups_counts_examples(store):
    g = store.ensure_group("default", "g1", label="one")
    assert (g.id, g.tenant, g.label, g.status, g.n_examples) == ("g1", "default", "one", "open", 0)
    assert store.ensure_group("default", "g1", label="other").label == "one"  # as SQLite: first label stays
    store.ensure_group("default", "g2")
    store.add_example(example("g2"))
    store.add_example(example("g2"))
    assert [(g.id, g.n_examples) for g in store.list_groups("default")] == [("g1", 0), ("g2", 2)]
    assert store.get_group("default", "nope") is None


def test_update_group_persists_failures_and_status(store):
    group = store.ensure_group("default", "grp_1")
    group.build_failures, group.status, group.uncacheable_until = 2, "uncacheable", 123.0
    store.update_group(group)
    again = store.get_group("default", "grp_1")
    assert (again.build_failures, again.status, again.uncacheable_until) == (2, "uncacheable", 123.0)


def test_clear_examples_forgets_them_and_reopens_the_group(store):
    group = store.ensure_group("default", "grp_1")
    for _ in range(3):
        store.add_example(example(embedding=np.ones(4, dtype=np.float32)))
    group.build_failures, group.status = 2, "uncacheable"
    store.update_group(group)
    assert store.clear_examples("default", "grp_1") == 3
    again = store.get_group("default", "grp_1")
    assert (again.build_failures, again.status, again.n_examples) == (0, "open", 0)
    assert store.examples("default", "grp_1") == [] and store.routing_index("default")[0] == []


def test_examples_and_routing_index_keep_insertion_order(store):
    vectors = [np.array([i, 1, 0], dtype=np.float32) for i in range(5)]
    same_instant = time.time()
    for i, v in enumerate(vectors):
        x = example(f"g{i % 2}", question=f"q{i}", embedding=v)
        x.created_at = same_instant  # ties are broken by insertion order
        store.add_example(x)
    store.add_example(example("g0", question="no embedding"))
    assert [x.question for x in store.examples("default", "g0")] == ["q0", "q2", "q4", "no embedding"]
    ids, matrix = store.routing_index("default")
    assert ids == ["g0", "g1", "g0", "g1", "g0"]
    assert matrix.shape == (5, 3) and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix, np.stack(vectors))
    assert store.routing_index("default")[1].flags.c_contiguous
    empty_ids, empty = store.routing_index("nobody")
    assert empty_ids == [] and empty.shape == (0, 0) and empty.dtype == np.float32


# -- entries --------------------------------------------------------------------------------------


def test_put_entry_supersedes_the_previous_active_version(store):
    first = store.put_entry(entry())
    second = store.put_entry(entry(program=PROGRAM.replace("* 2", "* 3")))
    assert (first.version, second.version) == (1, 2)
    assert store.get_entry("default", first.id).status == "superseded"
    assert store.active_entry("default", "grp_1").id == second.id
    assert [e.id for e in store.list_entries("default", "active")] == [second.id]
    assert [e.id for e in store.list_entries("default")] == [first.id, second.id]
    assert store.get_group("default", "grp_1").status == "cached"


def test_candidate_entry_does_not_supersede_the_active_one(store):
    active = store.put_entry(entry())
    candidate = store.put_entry(entry(status="candidate"))
    assert candidate.version == 2
    assert store.active_entry("default", "grp_1").id == active.id
    assert [e.id for e in store.list_entries("default", "candidate")] == [candidate.id]


def test_record_failure_counts_and_record_hit_counts(store):
    e = store.put_entry(entry())
    assert [store.record_failure("default", e.id) for _ in range(3)] == [1, 2, 3]
    store.record_hit("default", e.id)
    store.record_hit("default", e.id)
    got = store.get_entry("default", e.id)
    assert (got.failures, got.hits) == (3, 2)
    assert store.record_failure("default", "ent_unknown") == 0


def test_evicting_the_last_active_entry_reopens_the_group(store):
    e = store.put_entry(entry())
    store.set_entry_status("default", e.id, "evicted")
    assert store.active_entry("default", "grp_1") is None
    assert store.get_entry("default", e.id).status == "evicted"
    assert store.get_group("default", "grp_1").status == "open"
    store.set_entry_status("default", "ent_unknown", "evicted")  # no effect, no error


def test_evicting_a_superseded_entry_leaves_the_group_cached(store):
    old = store.put_entry(entry())
    store.put_entry(entry())
    store.set_entry_status("default", old.id, "evicted")
    assert store.get_group("default", "grp_1").status == "cached"


def test_delete_entry_and_delete_group(store):
    store.ensure_group("default", "grp_1")
    store.add_example(example())
    e1 = store.put_entry(entry())
    assert store.delete_entry("default", e1.id) is True
    assert store.get_entry("default", e1.id) is None
    assert store.get_group("default", "grp_1").status == "open"  # its only active entry is gone
    assert store.delete_entry("default", e1.id) is False
    store.put_entry(entry())
    assert store.delete_group("default", "grp_1") == 1
    assert store.get_group("default", "grp_1") is None and store.examples("default", "grp_1") == []


def test_a_failed_put_entry_changes_nothing(store):
    """The supersede and the insert are one transaction: a failing insert leaves the old entry active."""
    first = store.put_entry(entry())
    clash = entry()
    clash.id = first.id  # the insert fails on the primary key, after the UPDATE that supersedes
    with pytest.raises(psycopg.errors.UniqueViolation):
        store.put_entry(clash)
    assert store.active_entry("default", "grp_1").id == first.id
    assert store.get_entry("default", first.id).status == "active"
    assert [e.version for e in store.list_entries("default")] == [1]


def test_an_entry_in_a_transaction_that_dies_is_never_visible(store, pg_dsn):
    writer = psycopg.connect(pg_dsn)  # not autocommit: the INSERT opens a transaction
    writer.execute("INSERT INTO groups (tenant, id, created_at) VALUES ('default', 'grp_1', 0)")
    writer.execute("INSERT INTO entries (tenant, id, group_id, version, status, template, program, program_hash, "
                   "validation, created_at, updated_at) VALUES ('default', 'ent_half', 'grp_1', 1, 'active', '[]', "
                   "'x', 'h', '{}', 0, 0)")
    pid = writer.info.backend_pid
    assert store.active_entry("default", "grp_1") is None  # uncommitted: invisible to other sessions
    with raw(pg_dsn) as admin:  # the writer dies mid-transaction (as a crashed replica would)
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
    with pytest.raises(psycopg.OperationalError):
        writer.execute("SELECT 1")
    writer.close()
    assert store.active_entry("default", "grp_1") is None
    assert store.get_entry("default", "ent_half") is None and store.get_group("default", "grp_1") is None
    assert store.put_entry(entry()).version == 1  # and the group works normally afterwards

    quitter = psycopg.connect(pg_dsn)  # the same when the connection is just closed uncommitted
    quitter.execute("INSERT INTO counters (tenant, name, value) VALUES ('default', 'ghost', 1)")
    quitter.close()
    assert store.counters("default") == {}


def test_a_reader_never_sees_a_half_superseded_group(pg_dsn):
    """While one replica replaces a group's active entry over and over, another always sees exactly one."""
    writer, reader = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    try:
        writer.put_entry(entry())
        stop = threading.Event()
        seen: list[int] = []

        def write():
            try:
                for _ in range(40):
                    writer.put_entry(entry())
            finally:
                stop.set()

        def read():
            while not stop.is_set():
                seen.append(len(reader.list_entries("default", "active")))

        run_threads(lambda f: f(), [(write,), (read,)])
        assert seen and set(seen) == {1}
    finally:
        writer.close()
        reader.close()


def test_concurrent_put_entry_from_two_replicas_keeps_one_active_entry(pg_dsn):
    one, two = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    try:
        def work(s):
            for _ in range(10):
                s.put_entry(entry())

        run_threads(work, [(one,), (two,), (one,), (two,)])
        entries = one.list_entries("default")
        assert sorted(e.version for e in entries) == list(range(1, 41))
        assert [e.status for e in entries].count("active") == 1
        assert one.active_entry("default", "grp_1").version == 40
    finally:
        one.close()
        two.close()


# -- counters, tenants -------------------------------------------------------------------------------


def test_counters_bump_by_one_or_by_n(store):
    store.bump("default", "requests")
    store.bump("default", "requests")
    store.bump("default", "target_tokens", 250)
    store.bump("default", "big", 2**40)
    assert store.counters("default") == {"requests": 2, "target_tokens": 250, "big": 2**40}


def test_every_query_is_filtered_by_tenant(store):
    for tenant in ("a", "b"):
        store.ensure_group(tenant, "grp_same", label=tenant)
        store.add_example(example("grp_same", tenant=tenant, question=f"question of {tenant}",
                                  embedding=np.ones(4, dtype=np.float32)))
    ea = store.put_entry(entry("grp_same", tenant="a"))
    store.bump("a", "hits", 5)

    assert store.get_group("b", "grp_same").label == "b"
    assert store.get_group("b", "grp_same").status == "open" and store.get_group("a", "grp_same").status == "cached"
    assert [ex.question for ex in store.examples("b", "grp_same")] == ["question of b"]
    ids, matrix = store.routing_index("b")
    assert ids == ["grp_same"] and matrix.shape == (1, 4)
    assert store.active_entry("b", "grp_same") is None
    assert store.get_entry("b", ea.id) is None
    assert store.list_entries("b") == [] and [e.id for e in store.list_entries("a")] == [ea.id]
    assert store.counters("b") == {} and store.counters("a") == {"hits": 5}
    assert store.routing_index("nobody")[0] == []
    store.record_hit("b", ea.id)  # another tenant's id: no effect
    assert store.record_failure("b", ea.id) == 0
    store.set_entry_status("b", ea.id, "evicted")
    assert store.delete_entry("b", ea.id) is False
    assert store.clear_examples("b", "grp_same") == 1 and len(store.examples("a", "grp_same")) == 1
    assert store.delete_group("b", "grp_same") == 0
    got = store.get_entry("a", ea.id)
    assert (got.hits, got.failures, got.status) == (0, 0, "active")
    assert store.get_group("a", "grp_same") is not None


# -- build leases ----------------------------------------------------------------------------------


def test_build_lease_is_exclusive_until_released_or_expired(store):
    assert store.acquire_build_lease("t", "g", "a", ttl_s=60)
    assert store.acquire_build_lease("t", "g", "a", ttl_s=60)  # the holder may renew
    assert not store.acquire_build_lease("t", "g", "b", ttl_s=60)
    assert store.acquire_build_lease("t", "other", "b", ttl_s=60)
    assert store.acquire_build_lease("u", "g", "b", ttl_s=60)  # leases are per tenant
    store.release_build_lease("t", "g", "b")  # not the holder: no effect
    assert not store.acquire_build_lease("t", "g", "b", ttl_s=60)
    store.release_build_lease("t", "g", "a")
    assert store.acquire_build_lease("t", "g", "b", ttl_s=-1)  # an already-expired lease ...
    assert store.acquire_build_lease("t", "g", "c", ttl_s=60)  # ... can be taken over


def test_build_lease_is_exclusive_across_replicas_and_taken_over_after_expiry(pg_dsn):
    a, b = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    try:
        assert a.acquire_build_lease("default", "g", "replica_a", ttl_s=0.5)
        assert not b.acquire_build_lease("default", "g", "replica_b", ttl_s=60)
        time.sleep(0.7)  # replica a "crashed": its lease lapses
        assert b.acquire_build_lease("default", "g", "replica_b", ttl_s=60)
        assert not a.acquire_build_lease("default", "g", "replica_a", ttl_s=60)
        b.release_build_lease("default", "g", "replica_b")
        assert a.acquire_build_lease("default", "g", "replica_a", ttl_s=60)
    finally:
        a.close()
        b.close()


def test_build_lease_has_exactly_one_winner_among_racing_replicas(pg_dsn):
    stores = [PostgresStore(pg_dsn) for _ in range(2)]
    try:
        for attempt in range(5):
            barrier = threading.Barrier(8)
            winners: list[str] = []
            lock = threading.Lock()

            def race(k: int, group: str = f"g{attempt}") -> None:
                barrier.wait()
                if stores[k % 2].acquire_build_lease("default", group, f"owner{k}", ttl_s=60):
                    with lock:
                        winners.append(f"owner{k}")

            run_threads(race, [(k,) for k in range(8)])
            assert len(winners) == 1, winners
    finally:
        for s in stores:
            s.close()


# -- concurrency between threads and replicas ------------------------------------------------------


def test_concurrent_writers_from_threads_sum_correctly(store):
    def work():
        for _ in range(20):
            store.bump("default", "requests")

    run_threads(work, [()] * 8)
    assert store.counters("default") == {"requests": 160}


def test_two_replicas_see_each_others_writes(pg_dsn):
    one, two = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    try:
        def work(s):
            for _ in range(25):
                s.bump("default", "n")

        run_threads(work, [(one,), (two,), (one,), (two,)])
        assert one.counters("default") == two.counters("default") == {"n": 100}

        one.ensure_group("default", "g", label="g")
        one.add_example(example("g", embedding=np.ones(4, dtype=np.float32)))
        built = one.put_entry(entry("g"))
        assert two.active_entry("default", "g").id == built.id
        assert two.get_group("default", "g").n_examples == 1 and two.routing_index("default")[0] == ["g"]
        two.set_entry_status("default", built.id, "evicted")
        assert one.active_entry("default", "g") is None and one.get_group("default", "g").status == "open"
    finally:
        one.close()
        two.close()


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

    made = [MiniCache(FakeTarget(), FakeSmall(), store=PostgresStore(pg_dsn), embedder=HashEmbedder(),
                      config=EngineConfig(background_builds=False), sandbox=sandbox) for _ in range(2)]
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
        assert (stats["requests"], stats["misses"], stats["hits"], stats["builds_ok"]) == (4, 3, 1, 1)


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


def test_step_records_round_trip_in_insertion_order_per_tenant_and_task(store):
    from tests.test_store import step_records_round_trip

    step_records_round_trip(store)
