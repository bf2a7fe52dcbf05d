"""Learning from refusals the miss path shows unfounded (minicache.hit.refusals): a check that refused a
hit whose values gave the miss path's answer, while its own reading did not, is revised in the
entry's next version; a founded refusal changes nothing."""

from __future__ import annotations

import pytest
from test_hit_verification import SwappingSmall

from fakes import CR_VALUES, CURRENT_RATIO, FakeTarget, HashEmbedder
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.hit.corroboration import corroborate
from minicache.hit.extraction import Extraction
from minicache.hit.profile import learn_profile
from minicache.hit.refusals import revise
from minicache.hit.verify import HitRefused
from minicache.store import Entry, SQLiteStore, Variable

TEMPLATE = [
    Variable("current_assets", "integer", "current assets, dollars"),
    Variable("current_liabilities", "integer", "current liabilities, dollars"),
]
ASSETS_AS_SECOND = {"kind": "position", "index": 1, "count": 2}  # reads the liabilities' number
LIABILITIES_AS_FIRST = {"kind": "position", "index": 0, "count": 2}
REWORDED = "Current ratio please: assets {0:,} over liabilities {1:,}."


def ratio(values):
    return values["current_assets"] / values["current_liabilities"]


def entry(rules=None) -> Entry:
    pairs = [
        (CURRENT_RATIO.ask(*v), dict(zip(CURRENT_RATIO.names, v, strict=True)))
        for v in CR_VALUES[:3]
    ]
    profile = learn_profile(TEMPLATE, pairs, [CURRENT_RATIO.answer(*v) for v in CR_VALUES[:3]])
    return Entry(
        id="ent_1",
        tenant="default",
        group_id="g",
        template=TEMPLATE,
        program="",
        rules=rules or {},
        validation={"extraction": "choice", "profile": profile},
    )


def rule_refusal(rule_reads, other_reads, other="align"):
    return HitRefused("rule", "disagree", readings={"rule": rule_reads, other: other_reads})


# -- the revision itself -------------------------------------------------------------------------


def test_a_rule_the_miss_answer_shows_wrong_against_alignment_is_dropped_and_the_others_kept():
    e = entry(
        rules={"current_assets": ASSETS_AS_SECOND, "current_liabilities": LIABILITIES_AS_FIRST}
    )
    refused = rule_refusal(
        {"current_assets": 16000, "current_liabilities": 16000},
        {"current_assets": 64000, "current_liabilities": 16000},
    )
    revision = revise(e, refused, 4.0, ratio)
    assert revision is not None
    assert revision.rules == {"current_liabilities": LIABILITIES_AS_FIRST}
    assert revision.validation["revisions"] == [{"check": "rule", "dropped": ["current_assets"]}]
    assert "revisions" not in e.validation  # the entry read is not changed in place


def test_a_rule_the_model_contradicts_is_kept_even_when_the_model_was_right():
    # The rule still guards the model's choices: its disagreement once refused a wrong choice.
    e = entry(rules={"current_assets": ASSETS_AS_SECOND})
    refused = rule_refusal(
        {"current_assets": 16000, "current_liabilities": 16000},
        {"current_assets": 64000, "current_liabilities": 16000},
        other="model",
    )
    assert revise(e, refused, 4.0, ratio) is None


@pytest.mark.parametrize("reference", [1.0, 7.5])  # the rule's answer; neither reading's answer
def test_a_rule_refusal_is_kept_when_the_rule_gives_the_miss_answer_or_nothing_gives_it(reference):
    e = entry(rules={"current_assets": ASSETS_AS_SECOND})
    refused = rule_refusal(
        {"current_assets": 16000, "current_liabilities": 16000},
        {"current_assets": 64000, "current_liabilities": 16000},
    )
    assert revise(e, refused, reference, ratio) is None


def test_an_answer_refusal_the_miss_answer_confirms_widens_the_groups_answers():
    e = entry()  # answers 1.5, 1.5, 2.25: all positive
    refused = HitRefused(
        "answer", "another sign", readings={"hit": {"current_assets": -3, "current_liabilities": 2}}
    )
    refused.answer = -1.5
    assert (
        revise(e, refused, 2.0, ratio) is None
    )  # the miss path answered otherwise: the check was right
    revision = revise(e, refused, -1.5, ratio)
    assert revision is not None and revision.validation["profile"]["answers"][-1] == -1.5
    assert revision.rules == e.rules


def test_a_value_range_refusal_the_miss_answer_confirms_widens_the_variables_values():
    e = entry()
    values = {"current_assets": 64, "current_liabilities": 16}
    refused = HitRefused(
        "range", "far outside", readings={"hit": values}, variable="current_assets"
    )
    revision = revise(e, refused, 4.0, ratio)
    assert (
        revision is not None
        and revision.validation["profile"]["values"]["current_assets"][-1] == 64
    )
    assert revise(e, refused, 0.25, ratio) is None


def test_a_context_refusal_the_miss_answer_confirms_teaches_the_words_around_the_chosen_value():
    e = entry()
    text = "For firm X: 64,000 over liabilities of 16,000; current assets last quarter were 50,000."
    values = {"current_assets": 64000, "current_liabilities": 16000}
    with pytest.raises(HitRefused) as caught:
        corroborate(e, Extraction(values, "choice", 0.1), text, {}, min_margin=1.0)
    refused = caught.value
    assert (
        refused.check == "context"
        and refused.variable == "current_assets"
        and "firm" in refused.cues
    )
    assert (
        revise(e, refused, 50000 / 16000, ratio) is None
    )  # the miss path read 50,000: the check was right
    revision = revise(e, refused, 4.0, ratio)
    assert revision is not None and revision.note == {
        "check": "context",
        "variable": "current_assets",
        "cues": refused.cues,
    }
    # The same request written with other numbers: refused before the revision, passed after it.
    again = Extraction({"current_assets": 72000, "current_liabilities": 18000}, "choice", 0.1)
    text = "For firm X: 72,000 over liabilities of 18,000; current assets last quarter were 50,000."
    with pytest.raises(HitRefused, match="^context"):
        corroborate(e, again, text, {}, min_margin=1.0)
    e.validation = revision.validation
    assert corroborate(e, again, text, {}, min_margin=1.0) is None
    assert revise(e, refused, 4.0, ratio) is None  # nothing new to learn the second time


def test_checks_that_teach_nothing_are_not_revised():
    e = entry()
    for check in ("swap", "probation", "unit"):
        refused = HitRefused(
            check, "x", readings={"hit": {"current_assets": 64000, "current_liabilities": 16000}}
        )
        assert revise(e, refused, 4.0, ratio) is None


# -- through the engine --------------------------------------------------------------------------


@pytest.fixture
def mc(tmp_path, sandbox):
    engine = MiniCache(
        FakeTarget(),
        SwappingSmall(),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        config=EngineConfig(background_builds=False, verify=VerifyConfig(probation=0)),
        sandbox=sandbox,
    )
    yield engine
    engine.close()


def with_rules(mc, rules, *, exemplars=True) -> Entry:
    """The built group's entry, stored again as a new version with these rules (and exemplars or none)."""
    for values in CR_VALUES[:3]:
        built = mc.solve(CURRENT_RATIO.ask(*values), group="cr")
    e = mc.store.active_entry("default", built.group)
    e.id, e.rules = "ent_given_rules", rules
    # The exemplars three examples teach (the fake target's build learns them from one, with fewer cues).
    # Every fake request starts "What is the current ratio if current assets are": the build strips that
    # shared prefix, and with it the assets' only cue words; kept here, so that alignment can read them.
    e.validation["profile"]["exemplars"] = (
        entry().validation["profile"]["exemplars"] if exemplars else []
    )
    e.validation.pop("shared_prefix", None)
    return mc.store.put_entry(e)


@pytest.mark.parametrize("pin", [False, True])
def test_a_wrong_rule_that_refused_a_right_model_choice_is_kept_and_keeps_refusing(mc, pin):
    # Pinned, the wrong rule's value is given to the model, and the other value it then chooses is
    # refused by another check (here the one number in two variables); unpinned, the model's choice
    # contradicts the rule.
    mc.verifier.config.pin_readings = pin
    e = with_rules(mc, {"current_assets": ASSETS_AS_SECOND}, exemplars=False)
    for values in ((64000, 16000), (80000, 32000)):
        refused = mc.solve(REWORDED.format(*values), group="cr")
        assert refused.route == "fallback"
        assert refused.fallback_reason.startswith(
            "HitRefused: duplicate" if pin else "HitRefused: rule"
        )
        assert refused.answer == pytest.approx(values[0] / values[1])  # the miss path's, right
    assert mc.store.active_entry("default", e.group_id).id == e.id
    assert mc.stats()["refusals_overturned"] == 0


def test_a_hit_names_the_values_a_rule_gave_the_model(mc):
    with_rules(
        mc, {"current_assets": {"kind": "position", "index": 0, "count": 2}}, exemplars=False
    )
    hit = mc.solve(REWORDED.format(64000, 16000), group="cr")
    assert hit.route == "hit" and hit.extraction == "choice" and hit.answer == pytest.approx(4.0)
    assert hit.pinned == ["current_assets"]


def test_swapped_rules_that_alignment_contradicts_are_dropped_and_alignment_serves(mc):
    e = with_rules(
        mc, {"current_assets": ASSETS_AS_SECOND, "current_liabilities": LIABILITIES_AS_FIRST}
    )
    refused = mc.solve(CURRENT_RATIO.ask(64000, 16000), group="cr")
    assert refused.route == "fallback" and refused.fallback_reason.startswith(
        "HitRefused: rule: rules read"
    )
    revised = mc.store.active_entry("default", e.group_id)
    assert revised.id != e.id and revised.rules == {} and revised.program == e.program
    assert revised.validation["revisions"] == [
        {"check": "rule", "dropped": ["current_assets", "current_liabilities"]}
    ]
    assert revised.validation["revised_from"] == e.id and revised.hits == e.hits
    assert mc.stats()["refusals_overturned"] == 1
    again = mc.solve(CURRENT_RATIO.ask(90000, 30000), group="cr")
    assert (
        again.route == "hit" and again.extraction == "align" and again.answer == pytest.approx(3.0)
    )


def test_a_founded_refusal_leaves_the_entry_as_it_was(mc):
    e = with_rules(mc, {"current_assets": LIABILITIES_AS_FIRST}, exemplars=False)  # a right rule
    mc.small.swap = True  # the model gives the variables each other's values
    refused = mc.solve(REWORDED.format(64000, 16000), group="cr")
    assert refused.route == "fallback" and refused.fallback_reason.startswith("HitRefused: rule")
    assert refused.answer == pytest.approx(4.0)
    assert mc.store.active_entry("default", e.group_id).id == e.id
    assert mc.stats()["refusals_overturned"] == 0
