"""Probation: where routing has not shown that it keeps a tenant's computations apart, a new entry's
first hit attempts are answered by the miss path and compared before the entry serves."""

from __future__ import annotations

import pytest

from fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder, spy_on_admission
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.hit.audits import needs_probation
from minicache.store import SQLiteStore


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(**verify) -> tuple[MiniCache, FakeTarget]:
        target = FakeTarget()
        config = EngineConfig(
            background_builds=False, audit_rate=0.0, verify=VerifyConfig(**verify), build_early=0
        )  # built at build_after, as the counts here expect
        mc = MiniCache(
            target,
            FakeSmall(),
            store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            config=config,
            sandbox=sandbox,
        )
        made.append(mc)
        return mc, target

    yield factory
    for mc in made:
        mc.close()


def _built(mc: MiniCache) -> None:
    for values in CR_VALUES[:3]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    assert len(mc.store.list_entries("default", "active")) == 1


def test_a_new_entry_answers_its_first_attempt_by_the_miss_path_then_serves_once_they_agreed(make):
    mc, _ = make()
    _built(mc)
    entry = mc.store.list_entries("default", "active")[0]
    assert (
        entry.validation["probation"] == "sample"
    )  # a tenant's first entry (and every 4th) is probed
    first = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    assert first.route == "fallback" and "probation" in first.fallback_reason
    assert first.answer == pytest.approx(CURRENT_RATIO.answer(*CR_VALUES[3]))
    second = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[4]))
    assert second.route == "hit"
    stats = mc.stats()
    assert (stats["probations"], stats["probations_failed"], stats["audits"]) == (1, 0, 1)
    assert [e["passed"] for e in mc.events if e["event"] == "probation"] == [True]


def test_a_disagreement_on_probation_evicts_the_entry_and_records_the_request_for_the_next_build(
    make,
):
    mc, target = make()
    _built(mc)
    entry = mc.store.list_entries("default", "active")[0]
    target.mode = "other"  # this request is another computation, worded like the group's
    question = CURRENT_RATIO.ask(*CR_VALUES[3])
    refused = mc.solve(question)
    assert refused.route == "fallback" and refused.answer == pytest.approx(sum(CR_VALUES[3]))
    assert mc.store.get_entry("default", entry.id).status == "evicted"
    assert (mc.stats()["probations"], mc.stats()["probations_failed"]) == (1, 1)
    failure = mc.store.group_failure("default", entry.group_id)
    assert failure is not None and any(question in str(r) for r in failure["requests"])


def test_an_entry_on_probation_for_want_of_a_record_is_released_once_the_record_is_established(
    make,
):
    mc, _ = make()
    mc.store.bump(
        "default", "builds_ok"
    )  # not an every-4th entry: probed only because the record is young
    _built(mc)
    entry = mc.store.list_entries("default", "active")[0]
    assert entry.validation["probation"] == "record"
    mc.store.bump(
        "default", "probations", 5
    )  # meanwhile five other entries' probations ran and passed
    hit = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    assert hit.route == "hit" and hit.answer == pytest.approx(CURRENT_RATIO.answer(*CR_VALUES[3]))
    assert mc.stats()["probations"] == 5  # no probation was run for it


def test_an_entry_on_probation_for_want_of_a_record_stays_on_it_while_the_record_is_young(make):
    mc, _ = make()
    mc.store.bump("default", "builds_ok")
    _built(mc)
    mc.store.bump("default", "probations", 4)  # fewer than probation_tenant_min
    refused = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    assert refused.route == "fallback" and "probation" in refused.fallback_reason


def test_a_sampled_entry_stays_on_probation_whatever_the_record(make):
    mc, _ = make()
    _built(mc)
    assert mc.store.list_entries("default", "active")[0].validation["probation"] == "sample"
    mc.store.bump("default", "probations", 5)
    refused = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    assert refused.route == "fallback" and "probation" in refused.fallback_reason


def test_probation_off_serves_the_first_attempt(make):
    mc, _ = make(probation=0)
    _built(mc)
    assert mc.store.list_entries("default", "active")[0].validation["probation"] is False
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3])).route == "hit"


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({}, True),  # nothing known about the tenant yet
        ({"probations": 4}, True),  # fewer than probation_tenant_min (5) run
        ({"probations": 5, "builds_ok": 5}, False),  # 5 of 5 passed: (0+1)/7 = 0.14
        ({"probations": 5, "probations_failed": 1, "builds_ok": 5}, False),  # 2/7 = 0.29
        ({"probations": 5, "probations_failed": 2, "builds_ok": 5}, True),  # 3/7 = 0.43 > 0.35
        ({"probations": 23, "probations_failed": 14, "builds_ok": 42}, True),  # SVAMP, docs/hits.md
        (
            {"probations": 8, "probations_failed": 1, "builds_ok": 8},
            True,
        ),  # every 4th entry still probed
    ],
)
def test_a_tenant_skips_probation_only_once_its_probations_mostly_passed(record, expected):
    assert needs_probation(record, VerifyConfig()) is expected


def test_probation_zero_means_never(make):
    assert needs_probation({}, VerifyConfig(probation=0)) is False


def test_admission_learns_a_probation_refusal_as_a_miss_not_as_a_dear_hit(make):
    """Counted among hit attempts, probations made hits look as dear as misses and stopped every
    later build (on Formula)."""
    mc, _ = make()
    _built(mc)
    misses = mc.admission.miss.n
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3])).route == "fallback"
    assert (mc.admission.hit.n, mc.admission.miss.n) == (0, misses + 1)
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[4])).route == "hit"
    assert mc.admission.hit.n == 1


def test_a_benchmark_replays_a_probation_refusal_as_a_miss_and_other_fallbacks_as_hit_attempts():
    from minicache.build.admission import observed_route

    assert observed_route("fallback", "HitRefused: probation: a new entry's first ...") == "miss"
    assert observed_route("fallback", "HitRefused: margin: the model chose ...") == "fallback"
    assert observed_route("hit", None) == "hit"


@pytest.mark.parametrize("probation, expected", [(1, 1), (0, 0)])
def test_admission_is_told_the_arrivals_an_entry_on_probation_answers_as_misses(
    make, probation, expected
):
    mc, _ = make(probation=probation)
    told = spy_on_admission(mc)
    _built(mc)
    assert [t["first_misses"] for t in told] == [expected]
