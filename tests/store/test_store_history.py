"""What every store promises about its tenants and the dashboard's history, on SQLite and on
PostgreSQL alike (the fixtures are the contract tests': a fresh database each, PostgreSQL skipped
where no server can start outside CI)."""

from __future__ import annotations

import pytest
from test_store_contract import backend, entry  # noqa: F401 - the contract tests' fixture

from minicache.store import Store

MINUTE = 60 * 29_000_000  # a bucket start, in epoch seconds


@pytest.fixture
def store(backend) -> Store:  # noqa: F811 - the imported fixture
    return backend.open()


def test_tenants_are_those_with_counters_groups_or_entries_sorted_once(store: Store):
    assert store.tenants() == []
    store.bump("team-b", "requests")
    store.ensure_group("team-a", "grp_1")
    store.put_entry(entry(tenant="team-c"))
    store.bump("team-a", "hits")
    assert store.tenants() == ["team-a", "team-b", "team-c"]


def test_history_keeps_each_levels_lowest_and_highest_reading_and_sums_additions(store: Store):
    store.record_history("a", "minute", MINUTE, {"requests": 5.0}, {"tokens_saved": 10.0})
    # another replica, which read the counters a moment earlier, and adds its own estimate
    store.record_history("a", "minute", MINUTE, {"requests": 4.0}, {"tokens_saved": 2.5})
    store.record_history("a", "minute", MINUTE, {"requests": 6.0}, {})
    store.record_history("a", "minute", MINUTE + 60, {"requests": 7.0, "hits": 1.0}, {})
    assert store.history("a", "minute", MINUTE) == {
        MINUTE: {"requests": (4.0, 6.0), "tokens_saved": (0.0, 12.5)},
        MINUTE + 60: {"requests": (7.0, 7.0), "hits": (1.0, 1.0)},
    }
    assert list(store.history("a", "minute", MINUTE + 1)) == [MINUTE + 60]


def test_history_is_kept_per_tenant_and_unit(store: Store):
    store.record_history("a", "minute", MINUTE, {"requests": 1.0}, {})
    store.record_history("a", "hour", MINUTE, {"requests": 2.0}, {})
    store.record_history("b", "minute", MINUTE, {"requests": 3.0}, {})
    assert store.history("a", "minute", 0) == {MINUTE: {"requests": (1.0, 1.0)}}
    assert store.history("a", "hour", 0) == {MINUTE: {"requests": (2.0, 2.0)}}
    assert store.history("b", "minute", 0) == {MINUTE: {"requests": (3.0, 3.0)}}
    assert store.history("c", "minute", 0) == {}


def test_pruning_deletes_only_older_buckets_of_its_unit(store: Store):
    for i in range(3):
        store.record_history("a", "minute", MINUTE + 60 * i, {"requests": float(i)}, {})
        store.record_history("b", "minute", MINUTE + 60 * i, {"requests": float(i)}, {})
    store.record_history("a", "hour", MINUTE, {"requests": 9.0}, {})
    assert store.prune_history("minute", MINUTE + 120) == 4
    assert list(store.history("a", "minute", 0)) == [MINUTE + 120]
    assert list(store.history("b", "minute", 0)) == [MINUTE + 120]
    assert store.history("a", "hour", 0) == {MINUTE: {"requests": (9.0, 9.0)}}


def test_history_survives_reopening_the_store(backend):  # noqa: F811 - the shared fixture
    first = backend.open()
    first.record_history("a", "hour", MINUTE, {"requests": 3.0}, {"tokens_saved": 1.5})
    first.close()
    assert backend.open().history("a", "hour", 0) == {
        MINUTE: {"requests": (3.0, 3.0), "tokens_saved": (0.0, 1.5)}
    }


@pytest.mark.parametrize("amount", [0.0, 1e12 + 0.5])
def test_history_amounts_round_trip_as_floats(store: Store, amount: float):
    store.record_history("a", "minute", MINUTE, {}, {"tokens_saved": amount})
    assert store.history("a", "minute", 0) == {MINUTE: {"tokens_saved": (0.0, amount)}}
