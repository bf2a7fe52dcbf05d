"""What every store promises, run on SQLite and on PostgreSQL alike: groups, examples, entries and
their versions, invalidation, failures, counters, tenants, build leases, imports in one transaction,
the commit-ordered example cursor, and what several store objects on one database (replicas) see.

Each test gets a fresh database: a SQLite file, or a PostgreSQL database on the server tests/pg.py
starts (in CI a missing server is an error, elsewhere the PostgreSQL half is skipped). What only one
store does (SQLite's WAL and busy timeout, PostgreSQL's pool, DSNs and dying sessions) is tested in
tests/test_store.py and tests/test_store_postgres.py.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from minicache.store import Entry, Example, SQLiteStore, Store, StoreError, Variable, new_id
from minicache.store.base import StepRecord
from minicache.store.schema import LATEST

PROGRAM = "def solve(x=1,  # a number\n):\n    return x * 2\n"


def entry(group="grp_1", tenant="default", status="active", program=PROGRAM, **kw) -> Entry:
    return Entry(
        id=new_id("ent"),
        tenant=tenant,
        group_id=group,
        template=[Variable("x", "integer", "a number")],
        program=program,
        status=status,
        **kw,
    )


def example(
    group="grp_1", tenant="default", question="What is 2 x 1?", answer=2, embedding=None
) -> Example:
    return Example(
        id=new_id("ex"),
        tenant=tenant,
        group_id=group,
        question=question,
        context=None,
        program=PROGRAM,
        answer=answer,
        variables={"x": 1},
        embedding=embedding,
    )


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


def check_writes_and_reads_back(store: Store) -> None:
    """A store at the latest schema takes an entry and an example and gives them back (for stores
    opened on databases older code created)."""
    assert store.schema_version() == LATEST
    stored = store.put_entry(entry())
    store.add_example(example(embedding=np.ones(3, dtype=np.float32)))
    assert store.active_entry("default", "grp_1").id == stored.id
    assert [r.group_id for r in store.examples_since("default", 0)] == ["grp_1"]


@dataclass
class Backend:
    """One database of one kind: ``open`` gives another store object on it (as a replica would),
    ``sql`` runs a statement beside the store, for what the protocol cannot do (plain SQL that both
    dialects read alike)."""

    name: str
    open: Callable[[], Store]
    sql: Callable[[str], list[tuple[Any, ...]]]
    integrity_error: type[Exception]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request, tmp_path) -> Iterator[Backend]:
    opened: list[Store] = []
    if request.param == "sqlite":
        path = tmp_path / "store.db"
        make: Callable[[], Store] = lambda: SQLiteStore(path)  # noqa: E731

        def sql(statement: str) -> list[tuple[Any, ...]]:
            conn = sqlite3.connect(path)
            try:
                with conn:
                    return conn.execute(statement).fetchall()
            finally:
                conn.close()

        integrity: type[Exception] = sqlite3.IntegrityError
    else:
        psycopg = pytest.importorskip("psycopg")
        from minicache.store.postgres import PostgresStore

        dsn = request.getfixturevalue("pg_dsn")
        make = lambda: PostgresStore(dsn)  # noqa: E731

        def sql(statement: str) -> list[tuple[Any, ...]]:
            with psycopg.connect(dsn, autocommit=True) as conn:
                cursor = conn.execute(statement)
                return cursor.fetchall() if cursor.description else []

        integrity = psycopg.IntegrityError

    def open_store() -> Store:
        opened.append(make())
        return opened[-1]

    yield Backend(request.param, open_store, sql, integrity)
    for s in opened:
        s.close()


@pytest.fixture
def store(backend) -> Store:
    return backend.open()


# -- schema and persistence ------------------------------------------------------------------------


def test_reopening_does_not_rerun_migrations(backend):
    backend.open().close()
    again = backend.open()
    assert again.schema_version() == LATEST
    assert backend.sql("SELECT COUNT(*) FROM schema_version") == [(LATEST,)]


def test_a_database_from_a_newer_version_is_refused(backend):
    backend.open().close()
    backend.sql("INSERT INTO schema_version (version) VALUES (999)")
    with pytest.raises(StoreError, match="schema version 999"):
        backend.open()


def test_reopening_keeps_groups_examples_entries_and_counters(backend):
    first = backend.open()
    first.ensure_group("default", "label:x", label="x")
    vector = np.arange(4, dtype=np.float32)
    ex_in = example("label:x", answer=2.5, embedding=vector)
    first.add_example(ex_in)
    stored = first.put_entry(
        entry("label:x", rules={"x": {"kind": "position", "index": 0, "count": 1}})
    )
    first.record_audit("default", stored.id, agreed=False)
    first.bump("default", "hits", 3)
    first.close()

    second = backend.open()
    group = second.get_group("default", "label:x")
    assert (group.label, group.status, group.n_examples) == ("x", "cached", 1)
    [ex] = second.examples("default", "label:x")
    assert ex.answer == 2.5 and ex.variables == {"x": 1}
    assert ex.created_at == ex_in.created_at  # float64 on both (not PostgreSQL's float4 REAL)
    np.testing.assert_array_equal(ex.embedding, vector)
    assert ex.embedding.dtype == np.float32
    got = second.get_entry("default", stored.id)
    assert got.program == PROGRAM and got.template == stored.template and got.rules == stored.rules
    assert got.program_hash == stored.program_hash
    assert (got.created_at, got.updated_at, got.version) == (
        stored.created_at,
        stored.updated_at,
        1,
    )
    assert (got.audits_agreed, got.audits_disagreed) == (0, 1)
    assert second.counters("default") == {"hits": 3}


# -- groups and examples ---------------------------------------------------------------------------


def test_ensure_group_is_idempotent_and_list_groups_counts_examples(store):
    g = store.ensure_group("default", "g1", label="one")
    assert (g.id, g.tenant, g.label, g.status, g.n_examples) == ("g1", "default", "one", "open", 0)
    assert (
        store.ensure_group("default", "g1", label="other").label == "one"
    )  # the first label stays
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
    assert (again.build_failures, again.status, again.uncacheable_until) == (
        2,
        "uncacheable",
        123.0,
    )


def test_a_groups_failure_record_is_kept_until_cleared(store):
    store.ensure_group("default", "g")
    store.ensure_group("other", "g")
    assert store.group_failure("default", "g") is None
    record = {
        "reason": "no agreement",
        "feedback": ["x ≠ 2"],
        "backoff_s": 40.0,
        "at": 1712345678.5,
    }
    store.set_group_failure("default", "g", record)
    assert store.group_failure("default", "g") == record
    assert (
        store.group_failure("other", "g") is None
        and store.group_failure("default", "missing") is None
    )
    store.set_group_failure("default", "g", None)
    assert store.group_failure("default", "g") is None


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
    assert [x.question for x in store.examples("default", "g0")] == [
        "q0",
        "q2",
        "q4",
        "no embedding",
    ]
    ids, matrix = store.routing_index("default")
    assert ids == ["g0", "g1", "g0", "g1", "g0"]
    assert matrix.shape == (5, 3) and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix, np.stack(vectors))
    assert store.routing_index("default")[1].flags.c_contiguous
    empty_ids, empty = store.routing_index("nobody")
    assert empty_ids == [] and empty.shape == (0, 0) and empty.dtype == np.float32


def test_examples_since_skips_unembedded_examples_and_never_reuses_a_deleted_seq(store):
    """A replica's cursor past a deleted example must still see the next one."""
    store.add_example(example("a", embedding=np.ones(3, dtype=np.float32)))
    store.add_example(example("a", question="no embedding"))
    store.add_example(example("b", embedding=np.zeros(3, dtype=np.float32)))
    rows = store.examples_since("default", 0)
    assert [r.group_id for r in rows] == ["a", "b"] and rows[0].seq < rows[1].seq
    assert np.frombuffer(rows[1].embedding, dtype=np.float32).tolist() == [0, 0, 0]
    store.clear_examples("default", "b")
    store.add_example(example("c", embedding=np.ones(3, dtype=np.float32)))
    [after] = store.examples_since("default", rows[-1].seq)
    assert after.group_id == "c" and after.seq > rows[-1].seq
    assert store.examples_since("other", 0) == []


# -- entries ---------------------------------------------------------------------------------------


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


def test_a_failed_put_entry_changes_nothing(backend, store):
    """The supersede and the insert are one transaction: a failing insert leaves the old entry active."""
    first = store.put_entry(entry())
    clash = entry()
    clash.id = first.id  # the insert fails on the primary key, after the UPDATE that supersedes
    with pytest.raises(backend.integrity_error):
        store.put_entry(clash)
    assert store.active_entry("default", "grp_1").id == first.id
    assert store.get_entry("default", first.id).status == "active"
    assert [e.version for e in store.list_entries("default")] == [1]


def test_an_import_that_collides_with_a_stored_entry_leaves_the_store_as_it_was(store):
    """import_entries is one transaction: the entries and examples before the failing one go too."""
    kept = store.put_entry(entry("g1"))
    clash = entry("g1")
    clash.id = kept.id
    with pytest.raises(StoreError, match="rolled back"):
        store.import_entries([entry("g2"), entry("g1"), clash], [example("g2")])
    assert [e.id for e in store.list_entries("default")] == [kept.id]
    assert store.active_entry("default", "g1").id == kept.id
    assert store.get_group("default", "g2") is None and store.examples("default", "g2") == []


# -- counters and tenants --------------------------------------------------------------------------


def test_counters_bump_by_one_or_by_n(store):
    store.bump("default", "requests")
    store.bump("default", "requests")
    store.bump("default", "target_tokens", 250)
    store.bump("default", "big", 2**40)
    assert store.counters("default") == {"requests": 2, "target_tokens": 250, "big": 2**40}


def test_every_query_is_filtered_by_tenant(store):
    for tenant in ("a", "b"):
        store.ensure_group(tenant, "grp_same", label=tenant)
        store.add_example(
            example(
                "grp_same",
                tenant=tenant,
                question=f"question of {tenant}",
                embedding=np.ones(4, dtype=np.float32),
            )
        )
    ea = store.put_entry(entry("grp_same", tenant="a"))
    store.bump("a", "hits", 5)

    assert store.get_group("b", "grp_same").label == "b"
    assert (
        store.get_group("b", "grp_same").status == "open"
        and store.get_group("a", "grp_same").status == "cached"
    )
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


def test_step_records_round_trip_in_insertion_order_per_tenant_and_task(store):
    for i in range(3):
        store.add_step_record(
            StepRecord(
                id=f"step_{i}",
                tenant="t1",
                task="linear",
                frame="F",
                request=f"r{i}",
                steps=[f"a{i}", "x = 5"],
                embedding=np.full(4, i, dtype=np.float32),
            )
        )
    store.add_step_record(
        StepRecord(id="step_j", tenant="t1", task="json", frame="G", request="j", steps=["{}"])
    )
    got = store.step_records("t1", "linear")
    assert [r.request for r in got] == ["r0", "r1", "r2"] and got[1].steps == ["a1", "x = 5"]
    assert (
        got[2].embedding.tolist() == [2, 2, 2, 2]
        and store.step_records("t1", "json")[0].embedding is None
    )
    assert store.step_records("t2", "linear") == []


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


def test_build_lease_is_exclusive_across_replicas_and_taken_over_after_expiry(backend):
    a, b = backend.open(), backend.open()
    assert a.acquire_build_lease("default", "g", "replica_a", ttl_s=0.5)
    assert not b.acquire_build_lease("default", "g", "replica_b", ttl_s=60)
    time.sleep(0.7)  # replica a "crashed": its lease lapses
    assert b.acquire_build_lease("default", "g", "replica_b", ttl_s=60)
    assert not a.acquire_build_lease("default", "g", "replica_a", ttl_s=60)
    b.release_build_lease("default", "g", "replica_b")
    assert a.acquire_build_lease("default", "g", "replica_a", ttl_s=60)


def test_build_lease_has_exactly_one_winner_among_racing_replicas(backend):
    stores = [backend.open() for _ in range(2)]
    lock = threading.Lock()

    def race(k: int, group: str, barrier: threading.Barrier, winners: list[str]) -> None:
        barrier.wait()
        if stores[k % 2].acquire_build_lease("default", group, f"owner{k}", ttl_s=60):
            with lock:
                winners.append(f"owner{k}")

    for attempt in range(5):
        barrier, winners = threading.Barrier(8), []
        run_threads(race, [(k, f"g{attempt}", barrier, winners) for k in range(8)])
        assert len(winners) == 1, winners


# -- concurrency: threads and replicas -------------------------------------------------------------


def test_concurrent_writers_from_threads_sum_correctly(store):
    def work():
        for _ in range(20):
            store.bump("default", "requests")

    run_threads(work, [()] * 8)
    assert store.counters("default") == {"requests": 160}


def test_two_replicas_see_each_others_writes(backend):
    one, two = backend.open(), backend.open()

    def work(s):
        for _ in range(25):
            s.bump("default", "n")

    run_threads(work, [(one,), (two,), (one,), (two,)])
    assert one.counters("default") == two.counters("default") == {"n": 100}

    one.ensure_group("default", "g", label="g")
    one.add_example(example("g", embedding=np.ones(4, dtype=np.float32)))
    built = one.put_entry(entry("g"))
    assert two.active_entry("default", "g").id == built.id
    assert two.get_group("default", "g").n_examples == 1 and two.routing_index("default")[0] == [
        "g"
    ]
    two.set_entry_status("default", built.id, "evicted")
    assert (
        one.active_entry("default", "g") is None and one.get_group("default", "g").status == "open"
    )


def test_a_reader_never_sees_a_half_superseded_group(backend):
    """While one replica replaces a group's active entry over and over, another always sees exactly one."""
    writer, reader = backend.open(), backend.open()
    writer.put_entry(entry())
    stop, reading = threading.Event(), threading.Event()
    seen: list[int] = []

    def write():
        reading.wait(
            10
        )  # the writes start once the reader reads: else they may all finish before its first read
        try:
            for _ in range(40):
                writer.put_entry(entry())
        finally:
            stop.set()

    def read():
        while True:
            seen.append(len(reader.list_entries("default", "active")))
            reading.set()
            if stop.is_set():
                break

    run_threads(lambda f: f(), [(write,), (read,)])
    assert seen and set(seen) == {1}


def test_concurrent_put_entry_from_two_replicas_keeps_one_active_entry(backend):
    one, two = backend.open(), backend.open()

    def work(s):
        for _ in range(10):
            s.put_entry(entry())

    run_threads(work, [(one,), (two,), (one,), (two,)])
    entries = one.list_entries("default")
    assert sorted(e.version for e in entries) == list(range(1, 41))
    assert [e.status for e in entries].count("active") == 1
    assert one.active_entry("default", "grp_1").version == 40
