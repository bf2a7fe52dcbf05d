"""The routing index (minicache.route.index): in memory, capped per group, and in step with a shared store.

Replicas are two store objects (and two engines) on one SQLite file or one PostgreSQL database; a
fake clock steps through the refresh interval so nothing sleeps.
"""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
)
from minicache.engine import EngineConfig, MiniCache
from minicache.route.index import RouteIndex, TenantIndex
from minicache.route.router import Router, embed_request
from minicache.store import Example, SQLiteStore, new_id

DIM = 16


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def unit(seed: int, dim: int = DIM) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def example(group: str, vector: np.ndarray, tenant: str = "default") -> Example:
    return Example(
        id=new_id("ex"),
        tenant=tenant,
        group_id=group,
        question="q",
        context=None,
        program="def solve():\n    return 1\n",
        answer=1,
        variables={},
        embedding=vector,
    )


def add(store, group: str, vector: np.ndarray, tenant: str = "default") -> None:
    store.ensure_group(tenant, group)
    store.add_example(example(group, vector, tenant))


# -- the store's cursor ------------------------------------------------------------------------


def check_examples_since(store) -> None:
    for i in range(5):
        add(store, f"g{i % 2}", unit(i))
    add(store, "other-tenant-group", unit(99), tenant="other")
    rows = store.examples_since("default", 0)
    assert [r.group_id for r in rows] == ["g0", "g1", "g0", "g1", "g0"]
    seqs = [r.seq for r in rows]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert np.frombuffer(rows[2].embedding, dtype=np.float32) == pytest.approx(unit(2))
    assert [r.seq for r in store.examples_since("default", seqs[2])] == seqs[3:]
    assert store.examples_since("default", seqs[-1]) == []
    assert len(store.examples_since("default", 0, limit=2)) == 2


def test_sqlite_examples_since_returns_only_rows_after_the_cursor_in_commit_order(tmp_path):
    store = SQLiteStore(tmp_path / "mc.db")
    try:
        check_examples_since(store)
    finally:
        store.close()


def test_sqlite_seq_never_reuses_a_deleted_examples_number(tmp_path):
    """A cursor past a deleted example must still see the next one (rowid would be reused)."""
    store = SQLiteStore(tmp_path / "mc.db")
    try:
        add(store, "a", unit(1))
        add(store, "b", unit(2))
        cursor = store.examples_since("default", 0)[-1].seq
        store.clear_examples("default", "b")
        add(store, "c", unit(3))
        assert [r.group_id for r in store.examples_since("default", cursor)] == ["c"]
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_examples_since_returns_only_rows_after_the_cursor_in_commit_order(pg_dsn):
    from minicache.store.postgres import PostgresStore

    store = PostgresStore(pg_dsn)
    try:
        check_examples_since(store)
    finally:
        store.close()


# -- the capped set ----------------------------------------------------------------------------


def test_a_group_keeps_at_most_per_group_vectors_and_skips_copies():
    index = TenantIndex(per_group=4)
    base = unit(0)
    assert index.add("g", base)
    assert not index.add("g", base.copy())  # an exact copy adds nothing
    for seed in range(1, 50):
        index.add("g", unit(seed))
    assert len(index.groups["g"].rows) == 4
    assert index.rows == 4


def test_at_the_cap_a_new_vector_replaces_the_most_redundant_one():
    index = TenantIndex(per_group=3)
    a, b = unit(1), unit(2)
    near_a = a + 0.05 * unit(3)
    near_a /= np.linalg.norm(near_a)
    for v in (a, near_a, b):
        index.add("g", v)
    far = unit(4)  # covers wording none of the kept ones does
    assert index.add("g", far)
    kept = index.matrix[index.groups["g"].rows]
    assert max(float(k @ far) for k in kept) == pytest.approx(1.0)
    assert max(float(k @ b) for k in kept) == pytest.approx(1.0)
    # a or its near twin went, not both
    assert max(float(k @ a) for k in kept) > 0.99


def test_nearest_finds_the_closest_group_and_a_dropped_group_is_never_routed_to():
    index = TenantIndex(per_group=8)
    index.add("g1", unit(1))
    index.add("g2", unit(2))
    assert index.nearest(unit(2))[0] == "g2"
    index.drop("g2")
    group, sim = index.nearest(unit(2))
    assert group == "g1" and sim < 0.99
    index.add("g3", unit(3))  # reuses the freed row
    assert index.nearest(unit(3)) == ("g3", pytest.approx(1.0))


def test_an_embedder_change_keeps_only_the_newest_width():
    index = TenantIndex(per_group=8)
    index.add("old", unit(1, dim=8))
    index.add("new", unit(2, dim=DIM))
    assert index.nearest(unit(1, dim=8)) == (None, 0.0)
    assert index.nearest(unit(2))[0] == "new"
    assert set(index.groups) == {"new"}


# -- in step with the store --------------------------------------------------------------------


def check_replica_is_routed_to_within_the_refresh_interval(writer, reader) -> None:
    clock = Clock()
    index = RouteIndex(reader, refresh_s=2.0, clock=clock)
    add(writer, "first", unit(1))
    assert index.nearest("default", unit(1))[0] == "first"  # loaded on first use
    add(writer, "second", unit(2))  # another replica records an example
    clock.now += 1.0
    assert index.nearest("default", unit(2))[0] != "second"  # not yet: within the interval
    clock.now += 1.0
    assert index.nearest("default", unit(2)) == ("second", pytest.approx(1.0))
    assert index.stats("default")["rows"] == 2


def test_an_example_another_sqlite_replica_adds_is_routed_to_after_the_refresh_interval(tmp_path):
    writer, reader = SQLiteStore(tmp_path / "mc.db"), SQLiteStore(tmp_path / "mc.db")
    try:
        check_replica_is_routed_to_within_the_refresh_interval(writer, reader)
    finally:
        writer.close()
        reader.close()


@pytest.mark.postgres
def test_an_example_another_postgres_replica_adds_is_routed_to_after_the_refresh_interval(pg_dsn):
    from minicache.store.postgres import PostgresStore

    writer, reader = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    try:
        check_replica_is_routed_to_within_the_refresh_interval(writer, reader)
    finally:
        writer.close()
        reader.close()


def test_the_router_never_reads_the_whole_history_after_the_first_request(tmp_path, monkeypatch):
    store = SQLiteStore(tmp_path / "mc.db")
    try:
        embedder = HashEmbedder()
        router = Router(store, embedder, refresh_s=0.0)
        for i in range(3):
            add(store, "cr", embed_request(embedder, CURRENT_RATIO.ask(*CR_VALUES[i])))
        reads: list[int] = []
        since = store.examples_since
        monkeypatch.setattr(
            store,
            "examples_since",
            lambda t, c, limit=10_000: reads.append(c) or since(t, c, limit),
        )
        monkeypatch.setattr(
            store, "routing_index", lambda t: pytest.fail("routing read every example")
        )
        assert not router.route("default", CURRENT_RATIO.ask(*CR_VALUES[3])).new_group
        assert not router.route("default", CURRENT_RATIO.ask(*CR_VALUES[4])).new_group
        assert reads[0] == 0 and reads[1] > 0  # the second request asked only for what is new
    finally:
        store.close()


def test_two_engines_on_one_sqlite_file_route_to_each_others_groups(tmp_path, sandbox):
    """Engine A builds up a group; engine B, with its own store object, joins it after a refresh."""
    engines = [
        MiniCache(
            FakeTarget(),
            FakeSmall(),
            store=SQLiteStore(tmp_path / "mc.db"),
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(background_builds=False, route_refresh_s=0.0),
        )
        for _ in range(2)
    ]
    a, b = engines
    try:
        b.solve(
            SIMPLE_INTEREST.ask(*SI_VALUES[0])
        )  # B's index is loaded (one group, not current ratio)
        first = a.solve(CURRENT_RATIO.ask(*CR_VALUES[0]))
        assert first.route == "miss"
        second = b.solve(CURRENT_RATIO.ask(*CR_VALUES[1]))
        assert second.group == first.group
    finally:
        for mc in engines:
            mc.close()


# -- the load: off the request path, never partial, linear in history ----------------------------


class GatedStore:
    """A store whose first ``examples_since`` for ``tenant`` waits for ``release``: a load in progress."""

    def __init__(self, store, tenant: str = "default") -> None:
        self.store, self.tenant = store, tenant
        self.entered, self.release = threading.Event(), threading.Event()
        self.reads: list[tuple[str, int]] = []

    def examples_since(self, tenant: str, cursor: int, limit: int = 10_000):
        self.reads.append((tenant, cursor))
        if tenant == self.tenant and not self.entered.is_set():
            rows = self.store.examples_since(
                tenant, cursor, limit
            )  # read before the gate, as a slow load is
            self.entered.set()
            assert self.release.wait(10)
            return rows
        return self.store.examples_since(tenant, cursor, limit)

    def __getattr__(self, name: str):
        return getattr(self.store, name)


@pytest.fixture
def sqlite(tmp_path):
    store = SQLiteStore(tmp_path / "mc.db")
    yield store
    store.close()


def start_gated_load(store) -> tuple[GatedStore, RouteIndex, threading.Thread]:
    """A RouteIndex over ``store`` whose warm-up of tenant "default" is under way and held."""
    gated = GatedStore(store)
    index = RouteIndex(gated)
    warming = threading.Thread(target=index.warm, args=(["default"],))
    warming.start()
    assert gated.entered.wait(10)
    return gated, index, warming


def test_after_a_warm_up_the_first_request_reads_no_history(tmp_path, sandbox, monkeypatch):
    store = SQLiteStore(tmp_path / "mc.db")
    mc = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=store,
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    try:
        for i in range(3):
            add(store, "cr", embed_request(mc.router.embedder, CURRENT_RATIO.ask(*CR_VALUES[i])))
        took = mc.warm_routing(["default", "other"])
        assert (
            set(took) == {"default", "other"} and mc.router.index.stats("default")["offered"] == 3
        )
        reads: list[int] = []
        since = store.examples_since
        monkeypatch.setattr(
            store,
            "examples_since",
            lambda t, c, limit=10_000: reads.append(c) or since(t, c, limit),
        )
        result = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
        assert result.group == "cr"
        assert 0 not in reads  # at most a refresh of what is new, never the history from the start
    finally:
        mc.close()


def test_a_request_during_its_tenants_load_waits_for_the_whole_index(sqlite):
    """Routing with a partly read index would start a second group; the request waits instead,
    while another tenant's request goes through."""
    add(sqlite, "g1", unit(1))
    add(sqlite, "b-group", unit(3), tenant="b")
    gated, index, warming = start_gated_load(sqlite)
    answer: list[tuple[str | None, float]] = []
    request = threading.Thread(target=lambda: answer.append(index.nearest("default", unit(1))))
    request.start()
    assert index.nearest("b", unit(3))[0] == "b-group"  # not held up by tenant default's load
    request.join(0.3)
    assert request.is_alive() and not answer  # waiting, not routed on an empty index
    gated.release.set()
    warming.join(10)
    request.join(10)
    assert answer == [("g1", pytest.approx(1.0))]
    assert [c for t, c in gated.reads if t == "default"].count(0) == 1  # loaded once, not twice


def test_changes_made_while_a_tenant_loads_reach_the_loaded_index(sqlite):
    add(sqlite, "dropped", unit(1))
    gated, index, warming = start_gated_load(sqlite)  # the load has read "dropped" already
    index.drop_group("default", "dropped")
    index.add("default", "added", unit(2))
    gated.release.set()
    warming.join(10)
    assert index.loaded("default")
    assert index.nearest("default", unit(2)) == ("added", pytest.approx(1.0))
    assert index.nearest("default", unit(1))[0] != "dropped"


def test_a_tenant_not_warmed_is_loaded_on_its_first_request(tmp_path, sandbox):
    store = SQLiteStore(tmp_path / "mc.db")
    mc = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=store,
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    try:
        mc.warm_routing(["default"])
        for i in range(2):
            add(
                store,
                "late-cr",
                embed_request(mc.router.embedder, CURRENT_RATIO.ask(*CR_VALUES[i])),
                tenant="late",
            )
        assert not mc.router.index.loaded("late")
        assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[2]), tenant="late").group == "late-cr"
    finally:
        mc.close()


def test_a_failed_load_is_retried_by_the_next_request(sqlite, monkeypatch):
    def unreachable(tenant: str, cursor: int, limit: int = 10_000):
        raise OSError("store gone")

    add(sqlite, "g", unit(1))
    index = RouteIndex(sqlite)
    with monkeypatch.context() as patched:
        patched.setattr(sqlite, "examples_since", unreachable)
        with pytest.raises(OSError):
            index.warm(["default"])
    assert not index.loaded("default")
    assert index.nearest("default", unit(1))[0] == "g"


def test_a_group_loaded_at_once_keeps_one_vector_per_distinct_wording():
    """Three wordings, many near-copies of each: the farthest-point selection keeps one of each."""
    rng = np.random.default_rng(0)
    centres = [unit(s) for s in (1, 2, 3)]
    vectors = np.stack(
        [centres[i % 3] + 0.001 * rng.standard_normal(DIM) for i in range(300)]
    ).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = TenantIndex(per_group=8)
    index.extend("g", vectors)
    kept = index.matrix[index.groups["g"].rows]
    assert len(kept) == 3
    assert sorted(int(np.argmax([c @ k for c in centres])) for k in kept) == [0, 1, 2]
    assert index.groups["g"].gram.shape == (3, 3)


def test_loading_one_large_group_takes_memory_linear_in_its_examples():
    """A full similarity matrix of one group's 10,000 examples would take 400 MB; the load must not
    build it (it took 1.7 s for 10,000 examples of 384 dimensions, and 10 GB for a batch of 50,000)."""
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((10_000, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = TenantIndex(per_group=32)
    tracemalloc.start()
    try:
        index.extend("g", vectors)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(index.groups["g"].rows) == 32
    assert peak < 20 * vectors.nbytes  # linear: the pool and a few vectors of its length


# -- coarse buckets past exact_rows (minicache.route.partition) -------------------------------------


def clustered(groups: int, per: int, dim: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``groups`` random unit centres and ``per`` noisy unit vectors around each (rows grouped by centre)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((groups, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((groups * per, dim)).astype(np.float32) / np.sqrt(dim)
    noisy = np.repeat(centres, per, axis=0) + 0.3 * noise
    return centres, noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def filled(index: TenantIndex, vectors: np.ndarray, per: int) -> TenantIndex:
    for i, v in enumerate(vectors):
        index.add(f"g{i // per}", v)
    return index


def test_past_exact_rows_the_search_reads_a_few_buckets_and_routes_as_exact_search_does():
    centres, vectors = clustered(groups=400, per=4)
    exact = filled(TenantIndex(per_group=8), vectors, 4)
    bucketed = filled(TenantIndex(per_group=8, exact_rows=100), vectors, 4)
    queries = (
        centres
        + 0.3 * np.random.default_rng(1).standard_normal(centres.shape).astype(np.float32) / 8
    )
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for q in queries:
        assert bucketed.nearest(q)[0] == exact.nearest(q)[0]
    assert exact.partition is None  # 1,600 rows: still exact
    part = bucketed.partition
    assert part is not None and len(part.centres) == 20  # about sqrt(400 groups) buckets
    searched = len(part.candidates(queries[0], bucketed.probes))
    assert searched < 400 / 2  # the groups of 8 buckets of 20, not all 400


def test_buckets_are_made_again_when_the_groups_double_and_new_or_dropped_groups_are_kept_in_step():
    _, vectors = clustered(groups=200, per=2)
    index = filled(TenantIndex(per_group=4, exact_rows=10), vectors[:200], 2)  # 100 groups
    index.nearest(vectors[0])
    first = index.partition
    assert first is not None and first.built_for == 100
    filled_more = [
        index.add(f"g{i // 2}", v) for i, v in enumerate(vectors[200:], start=200)
    ]  # groups 100..199
    assert all(filled_more)
    assert "g150" in first.bucket_of  # a new group joined a bucket as it arrived
    assert index.nearest(vectors[0])[0] == "g0"
    second = index.partition
    assert second is not first and second.built_for == 200  # the groups doubled: made again
    index.drop("g3")
    assert "g3" not in second.bucket_of
    assert index.nearest(vectors[6])[0] != "g3"


def test_the_buckets_follow_the_data_not_the_process():
    _, vectors = clustered(groups=150, per=2)
    a = filled(TenantIndex(per_group=4, exact_rows=10), vectors, 2)
    b = filled(TenantIndex(per_group=4, exact_rows=10), vectors, 2)
    a.nearest(vectors[0])
    b.nearest(vectors[0])
    assert a.partition.bucket_of == b.partition.bucket_of
    assert [list(m) for m in a.partition.members] == [list(m) for m in b.partition.members]


def test_the_engine_option_route_exact_rows_reaches_every_tenants_index(tmp_path, sandbox):
    from minicache.config.models import load_engine_config

    config = load_engine_config(tmp_path / "absent.toml", {}, options=("route_exact_rows=5",))
    config.background_builds = False
    assert config.route_exact_rows == 5
    mc = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=config,
    )
    try:
        mc.solve(CURRENT_RATIO.ask(*CR_VALUES[0]))
        width = mc.router.index.tenant("default").width
        for i in range(12):
            mc.router.recorded("default", f"g{i}", unit(i, width))
        index = mc.router.index.tenant("default")
        assert index.exact_rows == 5 and index.rows == 13
        assert mc.router.index.nearest("default", unit(7, width)) == ("g7", pytest.approx(1.0))
        assert index.partition is not None  # routed through the coarse buckets
    finally:
        mc.close()


def test_a_long_digit_run_is_masked_as_a_short_number_is():
    """A 20,000-digit number masks to the same token a short one does (the run is cut before the
    patterns run, so they cannot restart at each of its digits)."""
    from minicache.route.router import skeleton

    long = "9" * 20_000
    assert skeleton(f"Solve for x: {long}x + 5 = 20, and {long}.5% of it") == skeleton(
        "Solve for x: 9x + 5 = 20, and 9.5% of it"
    )
