"""The SQLite store: migrations, persistence, entry versions, counters, tenants, concurrency, WAL."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from minicache.store import Entry, Example, SQLiteStore, StoreError, Variable, open_store

PROGRAM = "def solve(x=1,  # a number\n):\n    return x * 2\n"


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "store.db")
    yield s
    s.close()


def entry(group="grp_1", tenant="default", status="active", program=PROGRAM, **kw) -> Entry:
    from minicache.store import new_id

    return Entry(id=new_id("ent"), tenant=tenant, group_id=group, template=[Variable("x", "integer", "a number")],
                 program=program, status=status, **kw)


def example(group="grp_1", tenant="default", question="What is 2 x 1?", answer=2, embedding=None) -> Example:
    from minicache.store import new_id

    return Example(id=new_id("ex"), tenant=tenant, group_id=group, question=question, context=None,
                   program=PROGRAM, answer=answer, variables={"x": 1}, embedding=embedding)


# -- migrations and persistence -----------------------------------------------------------------


def test_migrations_bring_a_new_store_to_the_latest_schema(store):
    from minicache.store.sqlite import MIGRATIONS

    assert store.schema_version() == len(MIGRATIONS)
    tables = {r[0] for r in store._conn().execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"groups", "examples", "entries", "counters", "schema_version", "build_leases", "step_records"} <= tables


def test_build_lease_is_exclusive_until_released_or_expired(store):
    assert store.acquire_build_lease("t", "g", "a", ttl_s=60)
    assert not store.acquire_build_lease("t", "g", "b", ttl_s=60)
    assert store.acquire_build_lease("t", "other", "b", ttl_s=60)
    store.release_build_lease("t", "g", "a")
    assert store.acquire_build_lease("t", "g", "b", ttl_s=-1)  # an already-expired lease ...
    assert store.acquire_build_lease("t", "g", "c", ttl_s=60)  # ... can be taken over


def test_reopening_does_not_rerun_migrations(tmp_path):
    SQLiteStore(tmp_path / "s.db").close()
    again = SQLiteStore(tmp_path / "s.db")
    from minicache.store.sqlite import MIGRATIONS

    assert again.schema_version() == len(MIGRATIONS)
    assert again._conn().execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == len(MIGRATIONS)
    again.close()


def test_store_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (999)")
    conn.close()
    with pytest.raises(StoreError, match="schema version 999"):
        SQLiteStore(path)


def test_reopening_keeps_groups_examples_entries_and_counters(tmp_path):
    path = tmp_path / "s.db"
    first = SQLiteStore(path)
    first.ensure_group("default", "label:x", label="x")
    vector = np.arange(4, dtype=np.float32)
    first.add_example(example("label:x", answer=2.5, embedding=vector))
    stored = first.put_entry(entry("label:x", rules={"x": {"kind": "position", "index": 0, "count": 1}}))
    first.bump("default", "hits", 3)
    first.close()

    second = SQLiteStore(path)
    group = second.get_group("default", "label:x")
    assert (group.label, group.status, group.n_examples) == ("x", "cached", 1)
    [ex] = second.examples("default", "label:x")
    assert ex.answer == 2.5 and ex.variables == {"x": 1}
    np.testing.assert_array_equal(ex.embedding, vector)
    got = second.get_entry("default", stored.id)
    assert got.program == PROGRAM and got.template == stored.template and got.rules == stored.rules
    assert got.program_hash == stored.program_hash
    assert second.counters("default") == {"hits": 3}
    second.close()


def test_open_store_accepts_a_path_or_a_store_and_refuses_postgres(tmp_path):
    s = open_store(str(tmp_path / "o.db"))
    assert isinstance(s, SQLiteStore) and s.schema_version() >= 1
    assert open_store(s) is s
    s.close()
    with pytest.raises(StoreError, match="cannot connect|connect"):
        open_store("postgresql://127.0.0.1:1/x")
    with pytest.raises(StoreError, match="key=value"):
        open_store("host=db dbname=minicache")


# -- entries ------------------------------------------------------------------------------------


def test_put_entry_supersedes_the_previous_active_version(store):
    first = store.put_entry(entry())
    second = store.put_entry(entry(program=PROGRAM.replace("* 2", "* 3")))
    assert (first.version, second.version) == (1, 2)
    assert store.get_entry("default", first.id).status == "superseded"
    assert store.active_entry("default", "grp_1").id == second.id
    assert [e.id for e in store.list_entries("default", "active")] == [second.id]
    assert store.get_group("default", "grp_1").status == "cached"


def test_candidate_entry_does_not_supersede_the_active_one(store):
    active = store.put_entry(entry())
    candidate = store.put_entry(entry(status="candidate"))
    assert candidate.version == 2
    assert store.active_entry("default", "grp_1").id == active.id


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
    assert store.get_group("default", "grp_1").status == "open"


def test_delete_entry_and_delete_group(store):
    store.ensure_group("default", "grp_1")
    store.add_example(example())
    e1 = store.put_entry(entry())
    assert store.delete_entry("default", e1.id) is True
    assert store.get_entry("default", e1.id) is None
    assert store.delete_entry("default", e1.id) is False
    store.put_entry(entry())
    assert store.delete_group("default", "grp_1") == 1
    assert store.get_group("default", "grp_1") is None and store.examples("default", "grp_1") == []


def test_update_group_persists_failures_and_status(store):
    group = store.ensure_group("default", "grp_1")
    group.build_failures, group.status, group.uncacheable_until = 2, "uncacheable", 123.0
    store.update_group(group)
    again = store.get_group("default", "grp_1")
    assert (again.build_failures, again.status, again.uncacheable_until) == (2, "uncacheable", 123.0)


# -- counters, tenants ---------------------------------------------------------------------------


def test_counters_bump_by_one_or_by_n(store):
    store.bump("default", "requests")
    store.bump("default", "requests")
    store.bump("default", "target_tokens", 250)
    assert store.counters("default") == {"requests": 2, "target_tokens": 250}


def test_every_query_is_filtered_by_tenant(store):
    for tenant in ("a", "b"):
        store.ensure_group(tenant, "grp_same", label=tenant)
        store.add_example(example("grp_same", tenant=tenant, question=f"question of {tenant}",
                                  embedding=np.ones(4, dtype=np.float32)))
    ea = store.put_entry(entry("grp_same", tenant="a"))
    store.bump("a", "hits", 5)

    assert store.get_group("b", "grp_same").label == "b"
    assert [ex.question for ex in store.examples("b", "grp_same")] == ["question of b"]
    ids, matrix = store.routing_index("b")
    assert ids == ["grp_same"] and matrix.shape == (1, 4)
    assert store.active_entry("b", "grp_same") is None
    assert store.get_entry("b", ea.id) is None
    assert store.list_entries("b") == [] and [e.id for e in store.list_entries("a")] == [ea.id]
    assert store.counters("b") == {} and store.counters("a") == {"hits": 5}
    assert store.routing_index("nobody")[0] == []
    store.record_hit("b", ea.id)  # another tenant's id: no effect
    assert store.get_entry("a", ea.id).hits == 0


# -- concurrency and journal ---------------------------------------------------------------------


def test_concurrent_writers_from_threads_sum_correctly(store):
    def work():
        for _ in range(20):
            store.bump("default", "requests")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.counters("default") == {"requests": 160}


def test_two_store_objects_on_one_file_see_each_others_writes(tmp_path):
    one, two = SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")

    def work(s):
        for _ in range(25):
            s.bump("default", "n")

    threads = [threading.Thread(target=work, args=(s,)) for s in (one, two, one, two)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert one.counters("default") == two.counters("default") == {"n": 100}
    one.close()
    two.close()


def test_wal_journal_mode_is_on(store):
    assert store._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(store.path) as plain:  # WAL is a property of the file
        assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    plain.close()


def test_in_memory_store_is_shared_between_threads():
    s = SQLiteStore(":memory:")
    s.bump("default", "requests")
    errors: list[BaseException] = []

    def other_thread():
        try:
            s.bump("default", "requests")
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    assert s.counters("default") == {"requests": 2}


def test_step_records_round_trip_in_insertion_order_per_tenant_and_task(store):
    step_records_round_trip(store)


def step_records_round_trip(store):
    """Shared with the PostgreSQL tests: both stores must read back the same."""
    from minicache.store.base import StepRecord

    for i in range(3):
        store.add_step_record(StepRecord(id=f"step_{i}", tenant="t1", task="linear", frame="F", request=f"r{i}",
                                         steps=[f"a{i}", "x = 5"], embedding=np.full(4, i, dtype=np.float32)))
    store.add_step_record(StepRecord(id="step_j", tenant="t1", task="json", frame="G", request="j", steps=["{}"]))
    got = store.step_records("t1", "linear")
    assert [r.request for r in got] == ["r0", "r1", "r2"] and got[1].steps == ["a1", "x = 5"]
    assert got[2].embedding.tolist() == [2, 2, 2, 2] and store.step_records("t1", "json")[0].embedding is None
    assert store.step_records("t2", "linear") == []
