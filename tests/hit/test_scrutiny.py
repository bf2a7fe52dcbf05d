"""How closely an entry is watched is sized from its own record: its probation grows with what its
stored record says disagreed with it, its audit share with every doubt and shrinks with its agreeing
audits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.hit.audits import on_probation
from minicache.hit.scrutiny import Doubt, audit_share, doubts, probation_length
from minicache.store import Entry, SQLiteStore, new_id


def entry(**fields: object) -> Entry:
    """An entry with an ordinary record: validated on all its held examples, no rules, no audits."""
    validation = {"passed": 3, "of": 3, "extraction": None, "rule_examples": 3}
    validation.update(fields.pop("validation", {}))
    return Entry(
        id="e", tenant="t", group_id="g", template=[], program="", validation=validation, **fields
    )


CONFIG = EngineConfig(audit_rate=0.05)


def test_an_ordinary_fresh_entry_gets_the_configured_probation_and_audit_rate():
    assert not doubts(entry(), CONFIG.build_after)
    assert probation_length(entry(), VerifyConfig()) == VerifyConfig().probation
    assert audit_share(entry(), CONFIG) == pytest.approx(CONFIG.audit_rate)


@pytest.mark.parametrize("agreed", [1, 10, 50])
def test_an_entry_with_a_clean_record_of_agreeing_audits_is_audited_less_than_a_fresh_one(agreed):
    fewer = audit_share(entry(audits_agreed=agreed), CONFIG)
    assert CONFIG.verify.audit_rate_min <= fewer < audit_share(entry(), CONFIG)
    assert audit_share(entry(audits_agreed=agreed + 10), CONFIG) <= fewer  # the longer, the fewer


def test_a_clean_record_whose_failure_bound_is_under_the_bar_gets_the_floor():
    # 381 agreeing audits: Wilson upper bound (z=1.96) on the failure rate under audit_delta (0.01)
    assert audit_share(entry(audits_agreed=400), CONFIG) == CONFIG.verify.audit_rate_min


def test_a_disagreeing_audit_raises_the_audit_share_above_a_fresh_and_a_clean_entry():
    caught = entry(audits_agreed=10, audits_disagreed=1)
    assert audit_share(caught, CONFIG) > audit_share(entry(), CONFIG)
    assert audit_share(caught, CONFIG) > audit_share(entry(audits_agreed=11), CONFIG)


@pytest.mark.parametrize(
    ("record", "doubt"),
    [
        ({"model_refused": 2}, Doubt.REFUSED),
        ({"validation": {"passed": 2, "of": 3}}, Doubt.VALIDATION),
        ({"validation": {"samples": 9, "agreement": 0.67}}, Doubt.SAMPLES),
        ({"validation": {"revisions": [{"check": "rule"}]}}, Doubt.REVISED),
        ({"validation": {"extraction": "choice"}}, Doubt.MODEL_READ),
        ({"rules": {"a": {}}, "validation": {"rule_examples": 2}}, Doubt.FEW_EXAMPLES),
    ],
)
def test_each_doubt_in_an_entry_record_raises_its_audit_share(record, doubt):
    doubtful = entry(**record)
    assert doubts(doubtful, CONFIG.build_after)[doubt] == 1
    assert audit_share(doubtful, CONFIG) == pytest.approx(2 * CONFIG.audit_rate)


def test_a_hit_read_by_the_small_model_is_audited_more_than_one_read_by_rules():
    assert audit_share(entry(), CONFIG, "choice") > audit_share(entry(), CONFIG, "rule")


def test_contradictions_in_the_stored_record_lengthen_probation_and_thin_evidence_does_not():
    verify = VerifyConfig()
    assert probation_length(entry(validation={"agreement": 0.67}), verify) == verify.probation + 1
    both = entry(validation={"passed": 2, "of": 3, "revisions": [{"check": "rule"}]})
    assert probation_length(both, verify) == verify.probation + 2
    thin = entry(rules={"a": {}}, validation={"extraction": "choice", "rule_examples": 2})
    assert probation_length(thin, verify) == verify.probation


def test_a_wording_review_that_only_recorded_evidence_is_no_revision_doubt():
    """Evidence changes nothing the entry serves by (minicache.hit.wording), so it lengthens no
    probation; a review that learned a word is a revision like any other."""
    evidence = {"check": "wording", "learned": [], "evidence": ["missing:practice"]}
    learned = {"check": "wording", "learned": ["missing:practice"], "evidence": []}
    assert Doubt.REVISED not in doubts(entry(validation={"revisions": [evidence]}), build_after=3)
    both = entry(validation={"revisions": [evidence, learned]})
    assert doubts(both, build_after=3)[Doubt.REVISED] == 1
    ranged = entry(validation={"revisions": [{"check": "range", "variable": "a"}]})
    assert doubts(ranged, build_after=3)[Doubt.REVISED] == 1


@pytest.mark.parametrize("found", [{"model_refused": 1}, {"audits_disagreed": 1}])
def test_doubts_found_in_service_raise_the_audit_share_but_never_reopen_a_passed_probation(found):
    verify = VerifyConfig()
    passed = entry(audits_agreed=verify.probation, validation={"probation": "sample"})
    assert not on_probation(passed, verify)
    doubted = replace(passed, **found)
    assert probation_length(doubted, verify) == verify.probation
    assert not on_probation(doubted, verify)
    assert audit_share(doubted, CONFIG) > audit_share(passed, CONFIG)


def test_a_probation_lengthened_by_the_stored_record_ends_only_once_it_is_served_out():
    verify = VerifyConfig()
    record = {"probation": "sample", "passed": 2, "of": 3}
    assert on_probation(entry(audits_agreed=verify.probation, validation=record), verify)
    passed = entry(audits_agreed=verify.probation + 1, validation=record)
    assert not on_probation(passed, verify)
    assert not on_probation(replace(passed, model_refused=1, audits_disagreed=1), verify)


def test_sizes_stay_within_the_configured_bounds():
    worst = entry(
        audits_disagreed=30,
        model_refused=9,
        rules={"a": {}},
        validation={"passed": 2, "of": 3, "agreement": 0.55, "revisions": [{}], "rule_examples": 1},
    )
    verify = VerifyConfig(probation=1, probation_max=3)
    assert probation_length(worst, verify) == 3
    assert probation_length(worst, VerifyConfig(probation=5, probation_max=3)) == 5  # never below
    assert probation_length(worst, VerifyConfig(probation=0)) == 0  # probation off
    assert audit_share(worst, CONFIG, "choice") == CONFIG.verify.audit_rate_max
    for rate in (0.0, 1.0):  # audits off; every hit audited
        assert audit_share(worst, replace(CONFIG, audit_rate=rate)) == rate
        assert audit_share(entry(audits_agreed=400), replace(CONFIG, audit_rate=rate)) == rate


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(audit_rate: float = 0.0, **verify) -> MiniCache:
        config = EngineConfig(
            background_builds=False,
            audit_rate=audit_rate,
            verify=VerifyConfig(**verify),
            build_early=0,
        )
        mc = MiniCache(
            FakeTarget(),
            FakeSmall(),
            store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            config=config,
            sandbox=sandbox,
        )
        made.append(mc)
        return mc

    yield factory
    for mc in made:
        mc.close()


def _built(mc: MiniCache) -> Entry:
    for values in CR_VALUES[:3]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    return mc.store.list_entries("default", "active")[0]


def _as_if(mc: MiniCache, built: Entry, **record: object) -> Entry:
    """The group's entry stored again with ``record`` in place of what its build recorded."""
    return mc.store.put_entry(replace(built, id=new_id("ent"), **record))


def test_an_entry_whose_validation_got_a_held_example_wrong_stays_on_probation_longer(make):
    mc = make()
    built = _built(mc)
    assert built.validation["probation"] == "sample"
    _as_if(mc, built, validation={**built.validation, "passed": 2, "of": 3})
    routes = [mc.solve(CURRENT_RATIO.ask(*values)).route for values in CR_VALUES[3:6]]
    assert routes == ["fallback", "fallback", "hit"]  # two agreeing comparisons, not one
    assert (mc.stats()["probations"], mc.stats()["probations_failed"]) == (1, 0)


def test_an_entry_with_a_long_clean_record_pays_for_fewer_audits_than_a_fresh_one(make):
    def audits(clean: int) -> int:
        mc = make(audit_rate=0.5, probation=0)
        built = _built(mc)
        _as_if(mc, built, audits_agreed=clean)
        before = mc.stats()["audits"]
        for values in CR_VALUES[3:] * 2:
            assert mc.solve(CURRENT_RATIO.ask(*values)).route == "hit"
        return mc.stats()["audits"] - before

    assert audits(clean=400) < audits(clean=0)


def _passed_probation(mc: MiniCache) -> Entry:
    """The group's entry, built on probation and passed by its first comparison."""
    built = _built(mc)
    assert built.validation["probation"] == "sample"
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3])).route == "fallback"  # the comparison
    assert (mc.stats()["probations"], mc.stats()["probations_failed"]) == (1, 0)
    return built


def _probation_events(mc: MiniCache) -> list[bool]:
    return [e["passed"] for e in mc.events if e["event"] == "probation"]


def test_a_passed_entry_keeps_serving_after_a_refused_reading_of_the_small_model(make):
    mc = make()
    entry = _passed_probation(mc)
    mc.store.record_model_choice("default", entry.id, False, 300)  # one refused in service
    for values in CR_VALUES[4:7]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "hit"
    assert mc.stats()["probations"] == 1 and _probation_events(mc) == [True]


def test_a_passed_entry_keeps_serving_after_a_disagreeing_audit(make):
    mc = make(audit_rate=1.0)  # every served hit is audited
    entry = _passed_probation(mc)
    target = mc.target
    assert isinstance(target, FakeTarget)
    target.mode = "other"  # the miss path answers this request with another computation
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[4])).route == "hit"
    stored = mc.store.get_entry("default", entry.id)
    assert stored is not None and (stored.audits_agreed, stored.audits_disagreed) == (1, 1)
    target.mode = "ok"
    for values in CR_VALUES[5:8]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "hit"
    assert mc.stats()["probations"] == 1 and _probation_events(mc) == [True]
    assert mc.stats()["audits_disagreed"] == 1
