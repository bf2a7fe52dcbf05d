"""Zero-model readings told apart by an independent reader (minicache.hit.independence): a rule's or
an alignment's reading of two slots of one kind is served only where the words around the numbers,
the other zero-model reader or the group's record of sizes tells the slots apart; a disagreement is
refused and the miss answer teaches the group (minicache.hit.refusals)."""

from __future__ import annotations

import pytest
from test_hit_verification import MarginSmall, SwappingSmall
from test_refusals import with_rules

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    FakeTarget,
    HashEmbedder,
    numbers_in,
    request_of,
)
from minicache.config.engine import EngineConfig, VerifyConfig
from minicache.engine import MiniCache
from minicache.hit.corroboration import telling_cues, telling_words
from minicache.hit.cues import positions
from minicache.hit.extraction import Extractor, Method
from minicache.hit.independence import apart_by_size, corroborate_reading
from minicache.hit.profile import learn_profile
from minicache.hit.refusals import revise
from minicache.hit.verify import HitRefused, HitVerifier
from minicache.store import Entry, SQLiteStore, Variable

CR = [
    Variable("current_assets", "integer", "current assets, dollars"),
    Variable("current_liabilities", "integer", "current liabilities, dollars"),
]
SI = [
    Variable("principal", "number", "loan principal, dollars"),
    Variable("rate_pct", "number", "annual interest rate, percent as written"),
    Variable("years", "number", "loan term, years"),
]
# Learned where the examples wrote the assets first: reads the first number as the assets.
IN_ORDER = {
    "current_assets": {"kind": "position", "index": 0, "count": 2},
    "current_liabilities": {"kind": "position", "index": 1, "count": 2},
}
LIABILITIES_FIRST = (
    "What is the current ratio if current liabilities are $16,000 and current assets are $64,000?"
)
ASSETS_FIRST = (
    "What is the current ratio if current assets are $64,000 and current liabilities are $16,000?"
)
NO_WORDS = "Current ratio: $64,000 over $16,000?"  # nothing says which amount is which


def cr_entry(rules=None, *, exemplars=False, values=None) -> Entry:
    pairs = [
        (CURRENT_RATIO.ask(*v), dict(zip(CURRENT_RATIO.names, v, strict=True)))
        for v in CR_VALUES[:3]
    ]
    profile = learn_profile(CR, pairs, [CURRENT_RATIO.answer(*v) for v in CR_VALUES[:3]])
    # The requests here write the amounts with few words or none; what those words tell apart is
    # pinned here, what a request must write at all in tests/hit/test_wording.py.
    profile.pop("wording")
    if not exemplars:
        profile["exemplars"] = []
    if values is not None:
        profile["values"] = values
    return Entry(
        id="ent_1",
        tenant="default",
        group_id="g",
        template=CR,
        program="",
        rules=rules or {},
        validation={"extraction": "choice", "profile": profile},
    )


def verifier(**config) -> HitVerifier:
    return HitVerifier(Extractor(MarginSmall({})), VerifyConfig(**config))


def ratio(values):
    return values["current_assets"] / values["current_liabilities"]


def test_a_rule_reading_that_swaps_two_money_amounts_against_their_words_is_refused():
    with pytest.raises(HitRefused) as refused:
        verifier().extract(cr_entry(IN_ORDER), LIABILITIES_FIRST)
    assert refused.value.check == "uncorroborated"
    assert "better in another order" in refused.value.reason
    readings = refused.value.readings
    assert readings["rule"] == {"current_assets": 16000, "current_liabilities": 64000}
    assert readings["cues"] == {"current_assets": 64000, "current_liabilities": 16000}


def test_a_rule_reading_the_words_around_its_numbers_agree_with_is_served():
    got = verifier().extract(cr_entry(IN_ORDER), ASSETS_FIRST)
    assert got.method == "rule"
    assert got.variables == {"current_assets": 64000, "current_liabilities": 16000}


def test_without_the_check_the_swapped_rule_reading_is_served_as_before():
    got = verifier(corroborate_zero_model=False).extract(cr_entry(IN_ORDER), LIABILITIES_FIRST)
    assert got.variables == {"current_assets": 16000, "current_liabilities": 64000}


def test_two_amounts_nothing_in_the_words_tells_apart_are_refused():
    with pytest.raises(HitRefused, match="nothing in the request's words tells") as refused:
        verifier().extract(cr_entry(IN_ORDER), NO_WORDS)
    assert refused.value.check == "uncorroborated"


def test_the_groups_record_of_sizes_tells_two_amounts_apart_when_the_reading_keeps_its_order():
    apart = {"current_assets": [90000, 120000, 150000], "current_liabilities": [9000, 12000, 15000]}
    got = verifier().extract(cr_entry(IN_ORDER, values=apart), NO_WORDS)
    assert got.variables == {"current_assets": 64000, "current_liabilities": 16000}
    # Read the other way round, the record no longer sets them apart: nothing does.
    swapped = {
        "current_assets": [9000, 12000, 15000],
        "current_liabilities": [90000, 120000, 150000],
    }
    with pytest.raises(HitRefused, match="nothing in the request's words"):
        verifier().extract(cr_entry(IN_ORDER, values=swapped), NO_WORDS)


def test_sizes_set_slots_apart_only_from_three_observed_values_each_in_separate_ranges():
    assert apart_by_size(64000, 16000, [90000, 120000, 150000], [9000, 12000, 15000])
    assert not apart_by_size(16000, 64000, [90000, 120000, 150000], [9000, 12000, 15000])
    assert not apart_by_size(64000, 16000, [90000, 120000], [9000, 12000])  # two each: chance
    assert not apart_by_size(64000, 16000, [90000, 10000, 150000], [9000, 12000, 15000])


def test_slots_of_different_kinds_need_no_reader_to_tell_them_apart():
    by_place = {
        "principal": {"kind": "position", "index": 0, "count": 3},
        "rate_pct": {"kind": "position", "index": 1, "count": 3},
        "years": {"kind": "position", "index": 2, "count": 3},
    }
    pairs = [
        (SIMPLE_INTEREST.ask(*v), dict(zip(SIMPLE_INTEREST.names, v, strict=True)))
        for v in SI_VALUES[:3]
    ]
    profile = learn_profile(SI, pairs, [SIMPLE_INTEREST.answer(*v) for v in SI_VALUES[:3]])
    profile["exemplars"] = []
    profile.pop(
        "wording"
    )  # "Loan: $9,000, 4%, 3 years. Interest?" writes none of the examples' words
    e = Entry(
        id="ent_si",
        tenant="default",
        group_id="g",
        template=SI,
        program="",
        rules=by_place,
        validation={"extraction": "choice", "profile": profile},
    )
    got = verifier().extract(e, "Loan: $9,000, 4%, 3 years. Interest?")
    assert got.method == "rule"
    assert got.variables == {"principal": 9000, "rate_pct": 4, "years": 3}


def test_a_rule_reading_the_alignment_reads_the_same_is_served():
    e = cr_entry(IN_ORDER, exemplars=True)
    text = CURRENT_RATIO.ask(64000, 16000)
    assert verifier().extract(e, text).variables == {
        "current_assets": 64000,
        "current_liabilities": 16000,
    }


def test_a_rule_contradicting_an_alignment_the_words_confirm_does_not_refuse_it():
    # A partial rule that reads the liabilities' number as the assets: the words side with the
    # alignment, two readers against one.
    reads_liabilities = {"current_assets": {"kind": "anchor", "words": ["liabilities", "are"]}}
    got = verifier().extract(cr_entry(reads_liabilities, exemplars=True), ASSETS_FIRST)
    assert got.method == "align"
    assert got.variables == {"current_assets": 64000, "current_liabilities": 16000}


def test_a_contradiction_the_words_cannot_settle_is_refused_with_both_readings():
    read = {"current_assets": 64000, "current_liabilities": 16000}
    with pytest.raises(HitRefused) as refused:
        corroborate_reading(cr_entry(), Method.RULE, read, NO_WORDS, {"current_assets": 16000})
    assert refused.value.check == "rule"
    assert refused.value.readings == {
        "rule": read,
        "align": {"current_assets": 16000, "current_liabilities": 16000},
    }


def test_a_refused_reading_the_miss_answer_confirms_teaches_the_words_that_tell_the_slots_apart():
    e = cr_entry(IN_ORDER)
    with pytest.raises(HitRefused) as refused:
        verifier().extract(e, NO_WORDS)
    revision = revise(e, refused.value, 4.0, ratio)
    assert revision is not None and revision.note["check"] == "uncorroborated"
    learned = revision.validation["profile"]["cues"]
    assert "ratio" in learned["current_assets"]
    # "over", the one word between the two amounts, may describe either: neither slot learns it.
    assert all("over" not in said for said in learned.values())
    taught = cr_entry(IN_ORDER)
    taught.validation = revision.validation
    got = verifier().extract(taught, NO_WORDS)  # the same wording is now told apart
    assert got.variables == {"current_assets": 64000, "current_liabilities": 16000}


def test_a_swapped_rule_the_miss_answer_refutes_is_dropped_where_the_words_read_it_right():
    e = cr_entry(IN_ORDER)
    with pytest.raises(HitRefused) as refused:
        verifier().extract(e, LIABILITIES_FIRST)
    revision = revise(e, refused.value, 4.0, ratio)
    assert revision is not None
    assert revision.note == {"check": "uncorroborated", "dropped": sorted(IN_ORDER)}
    assert revision.rules == {}
    # A refusal the miss answer does not settle teaches nothing.
    assert revise(e, refused.value, 7.0, ratio) is None


class ReadsTheWords(FakeTarget):
    """A target that reads a current ratio's amounts by their words, in either order."""

    def _miss(self, messages):
        question = request_of(messages)
        if "liabilities" in question and question.index("liabilities") < question.index("assets"):
            values = numbers_in(question)[:2][::-1]
            return f"```python\n{CURRENT_RATIO.plain_program(values)}```\n"
        return super()._miss(messages)


@pytest.fixture
def mc(tmp_path, sandbox):
    engine = MiniCache(
        ReadsTheWords(),
        SwappingSmall(),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        config=EngineConfig(background_builds=False, verify=VerifyConfig(probation=0)),
        sandbox=sandbox,
    )
    yield engine
    engine.close()


def test_a_swapped_rule_reading_is_answered_as_a_miss_and_the_refusal_drops_the_rule(mc):
    e = with_rules(mc, IN_ORDER, exemplars=False)
    refused = mc.solve(LIABILITIES_FIRST, group="cr")
    assert refused.route == "fallback"
    assert refused.fallback_reason.startswith("HitRefused: uncorroborated")
    assert refused.answer == pytest.approx(4.0)  # the miss path's, right
    revised = mc.store.active_entry("default", e.group_id)
    assert revised.id != e.id and revised.rules == {}
    assert mc.stats()["refusals_overturned"] == 1
    served = mc.solve(ASSETS_FIRST.replace("64,000", "90,000"), group="cr")
    # Without the rules, the small model reads the next request, and its choice is corroborated.
    assert served.route == "hit" and served.extraction == "choice"
    assert served.answer == pytest.approx(90000 / 16000)


def test_a_value_written_twice_is_checked_not_skipped():
    """The liabilities' $64,000 is written twice: the swapped reading is still compared with the
    words around both places, and refused."""
    text = (
        "What is the current ratio if current liabilities are $16,000 and current assets are "
        "$64,000? Current assets: $64,000."
    )
    swapped = {"current_assets": 16000, "current_liabilities": 64000}
    with pytest.raises(HitRefused, match="better in another order") as refused:
        corroborate_reading(cr_entry(), Method.RULE, swapped, text, {})
    assert refused.value.readings["cues"] == {"current_assets": 64000, "current_liabilities": 16000}
    right = {"current_assets": 64000, "current_liabilities": 16000}
    corroborate_reading(cr_entry(), Method.RULE, right, text, {})


def test_only_the_ends_of_a_stretch_no_separator_splits_describe_the_numbers_beside_it():
    text = "12 kids get 3 oranges equally. Tom has 4 bags of 5 apples, and 6 pears."
    words = telling_words(text, positions(text))
    said = {p.values()[0]: [w for w, _ in words[p.start]] for p in positions(text)}
    assert said[12] == ["kids"]  # what the 12 counts, not the 3's
    assert said[3] == ["get", "oranges", "equally"]  # "get", right before it, and its own words
    assert "bags" in said[4] and "bags" not in said[5] and "of" in said[5]
    assert "apples" in said[5] and "pears" in said[6]  # split by the comma as number_words splits


def test_cue_words_two_slots_share_tell_neither_apart():
    cues = {"items": {"cooki", "equal", "tom"}, "people": {"equal", "frien"}}
    assert telling_cues(cues) == {"items": {"cooki", "tom"}, "people": {"frien"}}


def test_one_word_between_two_numbers_tells_neither_apart():
    """ "$64,000 over $16,000": "over" may describe either amount, so the cue reader counts it for
    neither, whatever the slots learned: the reading is refused as nothing tells it apart."""
    e = cr_entry()
    e.validation["profile"]["cues"] = {"current_liabilities": ["over"]}
    read = {"current_assets": 64000, "current_liabilities": 16000}
    with pytest.raises(HitRefused, match="nothing in the request's words tells"):
        corroborate_reading(e, Method.RULE, read, "$64,000 over $16,000?", {})
