"""Hit verification (minicache.hit.verify, minicache.hit.align): a hit is served only when the cache can show it
is right. Each safeguard is pinned with fake models: the engine end to end where the route matters,
the verifier alone where a hand-made entry shows the check more directly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    VOCAB,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
    tokenize,
)
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.hit.align import align
from minicache.hit.audits import demoted, wilson_upper
from minicache.hit.cues import number_kind, positions
from minicache.hit.exemplars import learn_exemplar
from minicache.hit.extraction import Extractor
from minicache.hit.profile import check_exemplar, learn_exemplars, learn_profile
from minicache.hit.verify import HitRefused, HitVerifier
from minicache.models.base import Completion
from minicache.models.choice import Field, decode_object
from minicache.programs.numbers import find_candidates
from minicache.store import Entry, SQLiteStore, Variable
from pg import pg_database, pg_dsn, pg_server  # noqa: F401 - fixtures


class SwappingSmall(FakeSmall):
    """A good small model that, when ``swap`` is set, gives the variables each other's values."""

    swap = False

    def _reply(self, messages, options):
        out = super()._reply(messages, options)
        if self.swap and isinstance(out, dict):
            out = dict(zip(out, list(out.values())[::-1], strict=True))
        return out


class LyingTarget(FakeTarget):
    """A good target that, while ``lie`` is set, writes a sum where the ratio belongs."""

    lie = False

    def _miss(self, messages):
        reply = super()._miss(messages)
        return (
            reply.replace(
                "current_assets / current_liabilities", "current_assets + current_liabilities"
            )
            if self.lie and isinstance(reply, str)
            else reply
        )


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(*, target=None, small=None, **config):
        target = target or FakeTarget()
        small = small or SwappingSmall()
        config.setdefault(
            "verify", VerifyConfig(probation=0)
        )  # probation has its own tests (test_probation.py)
        config.setdefault(
            "build_early", 0
        )  # builds at build_after; early builds: tests/test_admission.py
        mc = MiniCache(
            target,
            small,
            store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            config=EngineConfig(background_builds=False, **config),
            sandbox=sandbox,
        )
        made.append(mc)
        return mc

    yield factory
    for mc in made:
        mc.close()


def warm(mc, domain, values_list, **kwargs):
    for values in values_list:
        result = mc.solve(domain.ask(*values), **kwargs)
        assert result.answer == pytest.approx(domain.answer(*values))
    return result


def entry_of(mc, result):
    return mc.store.active_entry("default", result.group)


REWORDED = "Current ratio please: assets {0:,} over liabilities {1:,}."


# -- the engine's hit path ----------------------------------------------------------------------


def test_swapped_variables_are_refused_and_the_request_is_answered_by_the_target(make):
    mc = make(use_rules=False)  # no rule, no alignment: only the words around the numbers can tell
    built = warm(mc, CURRENT_RATIO, CR_VALUES[:3], group="cr")
    entry = entry_of(mc, built)
    mc.small.swap = True
    result = mc.solve(REWORDED.format(64000, 16000), group="cr")
    assert result.route == "fallback" and result.fallback_reason.startswith("HitRefused: swap")
    assert result.answer == pytest.approx(4.0)  # the miss path's answer, not 16000 / 64000
    assert (
        mc.store.get_entry("default", entry.id).failures == 0
    )  # a refusal is not the entry's failure
    assert mc.stats()["hit_refusals"] == 1
    mc.small.swap = False
    again = mc.solve(REWORDED.format(64000, 16000), group="cr")
    assert (
        again.route == "hit" and again.extraction == "choice" and again.answer == pytest.approx(4.0)
    )


def test_a_value_outside_the_learned_range_is_refused(make):
    mc = make()
    warm(mc, CURRENT_RATIO, CR_VALUES[:3], group="cr")  # assets 9,000 to 120,000
    result = mc.solve(REWORDED.format(64, 16), group="cr")
    assert result.route == "fallback" and result.fallback_reason.startswith("HitRefused: range")
    assert "far outside the examples' magnitude" in result.fallback_reason


def test_a_zero_model_hit_without_rules_and_without_the_small_model(make):
    mc = make(build_after=2)
    first = warm(mc, SIMPLE_INTEREST, SI_VALUES[:2])
    entry = entry_of(mc, first)
    # Keep only what the first validated example taught: no rules (they need two that agree), one exemplar.
    profile = entry.validation["profile"]
    exemplars = profile["exemplars"]
    assert exemplars and exemplars[0]["slots"]["rate_pct"]["kind"] == "pct"
    entry.id, entry.rules, profile["exemplars"] = "ent_first_example_only", {}, exemplars[:1]
    mc.store.put_entry(entry)  # a new version of the group's entry
    calls = len(mc.small.calls)
    for values in SI_VALUES[2:5]:
        hit = mc.solve(SIMPLE_INTEREST.ask(*values))
        assert hit.route == "hit" and hit.extraction == "align" and hit.tokens["small"] == 0
        assert hit.variables == dict(zip(SIMPLE_INTEREST.names, values, strict=True))
        assert hit.answer == pytest.approx(SIMPLE_INTEREST.answer(*values))
    assert len(mc.small.calls) == calls


def test_an_extra_number_of_a_used_kind_is_not_aligned_and_goes_to_the_model(make):
    mc = make(build_after=2)
    warm(mc, CURRENT_RATIO, CR_VALUES[:2])
    calls = len(mc.small.calls)
    text = CURRENT_RATIO.ask(64000, 16000) + " Fixed assets are $5,000."
    result = mc.solve(text)
    assert result.extraction != "align" and len(mc.small.calls) == calls + 1


def test_audit_disagreement_demotes_an_entry_and_agreement_restores_it(make):
    target = LyingTarget()
    mc = make(
        target=target, use_rules=False, audit_rate=1.0, audit_delta=0.25, audit_z=1.0
    )  # model-chosen hits
    built = warm(mc, CURRENT_RATIO, CR_VALUES[:3])
    entry = entry_of(mc, built)
    target.lie = True  # the audit's miss answers with a sum: the audit disagrees with the hit
    hit = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    assert hit.route == "hit" and hit.extraction == "choice"
    record = mc.store.get_entry("default", entry.id)
    assert (record.audits_agreed, record.audits_disagreed) == (0, 1) and demoted(record, 0.25, 1.0)
    assert mc.stats()["entries_demoted"] == 1 and mc.stats()["audits_disagreed"] == 1
    target.lie = False
    # Demoted: model-chosen hits become misses, and each would-be hit is audited against the miss answer.
    routes = []
    for k in range(20):
        values = (20000 + 1000 * k, 10000 + 300 * k)
        result = mc.solve(CURRENT_RATIO.ask(*values))
        assert result.answer == pytest.approx(CURRENT_RATIO.answer(*values))
        routes.append(result.route)
        if result.route == "hit":
            break
    record = mc.store.get_entry("default", entry.id)
    assert routes[:-1] == ["fallback"] * (len(routes) - 1) and routes[-1] == "hit"
    # Restored once 1 disagreement in n audits has a Wilson upper bound (z=1) of at most 0.25: n = 10.
    assert record.audits_disagreed == 1 and record.audits_agreed >= 9
    assert not demoted(record, 0.25, 1.0)
    assert len(routes) - 1 == 9
    assert mc.stats()["entries_demoted"] == 0


def test_a_zero_model_hit_caught_wrong_by_an_audit_counts_as_a_failure(make):
    target = LyingTarget()
    mc = make(target=target, audit_rate=1.0)
    built = warm(mc, CURRENT_RATIO, CR_VALUES[:3])
    entry = entry_of(mc, built)
    target.lie = True
    hit = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    assert hit.extraction in ("rule", "align")
    record = mc.store.get_entry("default", entry.id)
    assert record.audits_disagreed == 1 and record.failures == 1


def test_a_group_whose_programs_disagree_is_not_cached(make):
    class SplitTarget(FakeTarget):
        def _miss(self, messages):
            reply = super()._miss(messages)
            odd = any(CURRENT_RATIO.ask(*v) in messages[1].content for v in CR_VALUES[1:4:2])
            return (
                reply.replace(
                    "current_assets / current_liabilities", "current_assets + current_liabilities"
                )
                if odd
                else reply
            )

    mc = make(target=SplitTarget(), build_after=4)
    for values in CR_VALUES[:4]:
        mc.solve(CURRENT_RATIO.ask(*values))
    assert mc.store.list_entries("default") == []
    assert (
        mc.target.build_calls == 0
    )  # no generalization tried either: the examples must agree first
    assert mc.stats()["builds_failed"] == 1


# -- the verifier on hand-made entries ------------------------------------------------------------


CR_TEMPLATE = [
    Variable("current_assets", "integer", "current assets, dollars"),
    Variable("current_liabilities", "integer", "current liabilities, dollars"),
]


def cr_entry(*, rules=None, exemplars=True) -> Entry:
    pairs = [
        (CURRENT_RATIO.ask(*v), dict(zip(CURRENT_RATIO.names, v, strict=True)))
        for v in CR_VALUES[:3]
    ]
    profile = learn_profile(CR_TEMPLATE, pairs, [CURRENT_RATIO.answer(*v) for v in CR_VALUES[:3]])
    if not exemplars:
        profile["exemplars"] = []
    return Entry(
        id="ent_1",
        tenant="default",
        group_id="g",
        template=CR_TEMPLATE,
        program=CURRENT_RATIO.program(list(CR_VALUES[0])),
        rules=rules or {},
        validation={"extraction": "choice", "profile": profile},
    )


class MarginSmall:
    """Answers an extraction with fixed values and the margins a choice decoder would report."""

    name = "margin-small"

    def __init__(self, values, margins=None) -> None:
        self.values, self.margins, self.calls = values, margins or {}, 0

    def complete(self, messages, options=None):
        self.calls += 1
        return Completion(
            text=json.dumps(self.values),
            prompt_tokens=10,
            completion_tokens=5,
            choice_margins=dict(self.margins),
        )

    def close(self) -> None:
        pass


def test_a_rule_and_the_model_that_disagree_refuse_the_hit():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    rules = {
        "current_assets": {"kind": "anchor", "words": ["assets", "are"]}
    }  # reads only the assets
    small = MarginSmall({"current_assets": 16000, "current_liabilities": 64000})
    verifier = HitVerifier(Extractor(small))
    with pytest.raises(HitRefused, match="rule reads current_assets=64000") as refused:
        verifier.extract(cr_entry(rules=rules, exemplars=False), text)
    assert refused.value.check == "rule" and small.calls == 1


class SchemaSmall:
    """Chooses the value the schema leaves a variable when it leaves one, else ``values``' (a model
    that would put the liabilities' number in the assets, say). Records each call's schema."""

    name = "schema-small"

    def __init__(self, values) -> None:
        self.values, self.schemas = values, []

    def complete(self, messages, options=None):
        props = options.json_schema["properties"]
        self.schemas.append(props)
        out = {
            k: props[k]["enum"][0] if len(props[k].get("enum", [])) == 1 else v
            for k, v in self.values.items()
        }
        return Completion(
            text=json.dumps(out),
            prompt_tokens=10,
            completion_tokens=5,
            choice_margins=dict.fromkeys(out, 5.0),
        )

    def close(self) -> None:
        pass


def test_a_value_a_rule_reads_is_given_to_the_model_which_chooses_only_the_rest():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    rules = {
        "current_assets": {"kind": "anchor", "words": ["assets", "are"]}
    }  # reads only the assets
    small = SchemaSmall(
        {"current_assets": 16000, "current_liabilities": 16000}
    )  # wrong on the assets
    got = HitVerifier(Extractor(small)).extract(cr_entry(rules=rules, exemplars=False), text)
    assert small.schemas[0]["current_assets"] == {"enum": [64000]}
    assert (
        len(small.schemas[0]["current_liabilities"]["enum"]) == 2
    )  # the model still chooses this one
    assert got.variables == {"current_assets": 64000, "current_liabilities": 16000}
    assert got.detail["pinned"] == ["current_assets"]


def test_without_pins_a_model_that_contradicts_a_rule_refuses_the_hit():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    rules = {"current_assets": {"kind": "anchor", "words": ["assets", "are"]}}
    small = SchemaSmall({"current_assets": 16000, "current_liabilities": 16000})
    verifier = HitVerifier(Extractor(small), VerifyConfig(pin_readings=False))
    with pytest.raises(HitRefused, match="rule reads current_assets=64000"):
        verifier.extract(cr_entry(rules=rules, exemplars=False), text)
    assert (
        "enum" in small.schemas[0]["current_assets"]
        and len(small.schemas[0]["current_assets"]["enum"]) == 2
    )


def test_a_second_choice_keeps_the_rule_readings_pinned_and_says_so():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    rules = {"current_assets": {"kind": "anchor", "words": ["assets", "are"]}}
    small = SchemaSmall({"current_assets": 64000, "current_liabilities": 64000})  # one number twice
    got = HitVerifier(Extractor(small), VerifyConfig(second_choice=True)).extract(
        cr_entry(rules=rules, exemplars=False), text
    )
    assert got.method == "second-choice" and got.detail["first_choice"]["refused"] == "duplicate"
    assert small.schemas[1]["current_assets"] == {"enum": [64000]}
    assert got.variables == {"current_assets": 64000, "current_liabilities": 16000}
    assert got.detail["pinned"] == ["current_assets"]


def test_only_rule_readings_are_pinned_and_never_against_the_alignment_or_all_of_them():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    verifier = HitVerifier(Extractor(SchemaSmall({})))
    assets = {"current_assets": {"kind": "anchor", "words": ["assets", "are"]}}
    # One exemplar's partial alignment is not pinned: it once read the wrong number.
    assert verifier.pinned(cr_entry(exemplars=False), text, {"current_liabilities": 16000}) == {}
    assert verifier.pinned(cr_entry(rules=assets, exemplars=False), text, {}) == {
        "current_assets": 64000
    }
    assert verifier.pinned(
        cr_entry(rules=assets, exemplars=False), text, {"current_assets": 64000}
    ) == {"current_assets": 64000}
    # A rule the alignment contradicts is not given: the disagreement refuses the hit instead.
    assert (
        verifier.pinned(cr_entry(rules=assets, exemplars=False), text, {"current_assets": 16000})
        == {}
    )
    # Rules that read every value leave the model nothing to choose: nothing is pinned.
    both = {**assets, "current_liabilities": {"kind": "anchor", "words": ["liabilities", "total"]}}
    assert verifier.pinned(cr_entry(rules=both, exemplars=False), text, {}) == {}


def test_rules_and_alignment_that_disagree_refuse_the_hit():
    text = CURRENT_RATIO.ask(64000, 16000)
    rules = {
        "current_assets": {"kind": "position", "index": 1, "count": 2},
        "current_liabilities": {"kind": "position", "index": 0, "count": 2},
    }  # a wrong, swapped rule
    with pytest.raises(HitRefused, match="rule: rules read"):
        HitVerifier(Extractor(MarginSmall({}))).extract(cr_entry(rules=rules), text)


def test_a_small_decoder_margin_refuses_the_hit_and_a_large_one_serves_it():
    text = CURRENT_RATIO.ask(64000, 16000)
    values = {"current_assets": 64000, "current_liabilities": 16000}
    doubtful = HitVerifier(
        Extractor(MarginSmall(values, {"current_assets": 0.3, "current_liabilities": 4.0}))
    )
    with pytest.raises(HitRefused, match="margin of 0.30"):
        doubtful.extract(cr_entry(exemplars=False), text)
    sure = HitVerifier(
        Extractor(MarginSmall(values, {"current_assets": 2.5, "current_liabilities": 4.0}))
    )
    assert sure.extract(cr_entry(exemplars=False), text).variables == values


def test_a_model_that_reads_the_variables_order_instead_of_their_meaning_is_refused_on_reorder():
    text = CURRENT_RATIO.ask(64000, 16000)
    positional = (
        FakeSmall()
    )  # gives the request's numbers to the variables in the order they are listed
    checked = HitVerifier(Extractor(positional), VerifyConfig(reorder_check=True))
    with pytest.raises(
        HitRefused, match="reorder: with the variables in reverse order the model chose"
    ):
        checked.extract(cr_entry(exemplars=False), text)
    assert len(positional.calls) == 2
    reads_meaning = MarginSmall({"current_assets": 64000, "current_liabilities": 16000})
    served = HitVerifier(Extractor(reads_meaning), VerifyConfig(reorder_check=True)).extract(
        cr_entry(exemplars=False), text
    )
    assert (
        served.variables == {"current_assets": 64000, "current_liabilities": 16000}
        and reads_meaning.calls == 2
    )


def test_one_number_in_two_variables_is_refused_unless_written_twice():
    entry = cr_entry(exemplars=False)
    small = MarginSmall({"current_assets": 64000, "current_liabilities": 64000})
    with pytest.raises(HitRefused, match="both took 64000, written once"):
        HitVerifier(Extractor(small)).extract(entry, CURRENT_RATIO.ask(64000, 16000))
    same = HitVerifier(Extractor(small)).extract(entry, CURRENT_RATIO.ask(64000, 64000))
    assert same.variables == {"current_assets": 64000, "current_liabilities": 64000}


def test_a_percentage_where_the_examples_had_none_is_refused():
    template = [Variable("principal"), Variable("rate_pct"), Variable("years")]
    pairs = [
        (SIMPLE_INTEREST.ask(*v), dict(zip(SIMPLE_INTEREST.names, v, strict=True)))
        for v in SI_VALUES[:3]
    ]
    profile = learn_profile(template, pairs, [SIMPLE_INTEREST.answer(*v) for v in SI_VALUES[:3]])
    assert profile["kinds"]["rate_pct"] == ["pct"] and profile["kinds"]["years"] == ["unit:year"]
    profile["exemplars"] = []
    entry = Entry(
        id="e",
        tenant="default",
        group_id="g",
        template=template,
        program="",
        rules={},
        validation={"extraction": "choice", "profile": profile},
    )
    text = SIMPLE_INTEREST.ask(9000, 6, 4)
    small = MarginSmall(
        {"principal": 9000, "rate_pct": 4, "years": 6}
    )  # the years and the rate exchanged
    with pytest.raises(HitRefused, match="rate_pct was a percentage in every example"):
        HitVerifier(Extractor(small)).extract(entry, text)


def test_a_money_variable_given_a_number_written_otherwise_is_refused():
    """A wrong choice hit on WebShop: max_price, a dollar amount in every example, took the 1 of
    "1tb". A number the request writes with a unit (a count, a size) is not the amount asked for;
    one written plainly may be."""
    entry = cr_entry(exemplars=False)
    assert entry.validation["profile"]["kinds"]["current_liabilities"] == ["money"]
    text = (
        "What is the current ratio if current assets are $64,000 and current liabilities are $32,000, "
        "for a firm of 40000 employees with 20000tb of storage?"
    )
    for wrong in (40000, 20000):
        small = MarginSmall({"current_assets": 64000, "current_liabilities": wrong})
        with pytest.raises(
            HitRefused, match="current_liabilities was a money amount in every example"
        ) as refused:
            HitVerifier(Extractor(small)).extract(entry, text)
        assert refused.value.check == "unit"
    plain = (
        "What is the current ratio if current assets are 64,000 and current liabilities are 32,000?"
    )
    small = MarginSmall({"current_assets": 64000, "current_liabilities": 32000})
    assert (
        HitVerifier(Extractor(small)).extract(entry, plain).variables["current_liabilities"]
        == 32000
    )
    right = MarginSmall({"current_assets": 64000, "current_liabilities": 32000})
    assert (
        HitVerifier(Extractor(right)).extract(entry, text).variables["current_liabilities"] == 32000
    )


def test_a_model_chosen_number_the_request_does_not_write_is_refused():
    """Two wrong free-decoding hits on WebShop: requests with no price, to which the small model
    gave an entry's default price. The examples wrote every value, so a value not written is a guess."""
    entry = cr_entry(exemplars=False)
    entry.validation["extraction"] = "free"
    text = "What is the current ratio if current assets are $64,000 and current liabilities are unchanged?"
    small = MarginSmall(
        {"current_assets": 64000, "current_liabilities": 30000}
    )  # 30,000: the entry's default
    with pytest.raises(
        HitRefused, match="current_liabilities was written in the examples' requests"
    ) as refused:
        HitVerifier(Extractor(small)).extract(entry, text)
    assert refused.value.check == "unwritten"
    written = "What is the current ratio if current assets are $64,000 and current liabilities are $32,000?"
    found = HitVerifier(
        Extractor(MarginSmall({"current_assets": 64000, "current_liabilities": 32000}))
    ).extract(entry, written)
    assert found.variables == {"current_assets": 64000, "current_liabilities": 32000}


def test_an_answer_of_another_sign_or_scale_than_the_groups_is_refused():
    verifier = HitVerifier(Extractor(MarginSmall({})))
    entry = cr_entry()  # answers 1.5, 1.5, 2.25
    verifier.check_answer(entry, 3.2)
    with pytest.raises(HitRefused, match="another sign"):
        verifier.check_answer(entry, -1.5)
    with pytest.raises(HitRefused, match="magnitude"):
        verifier.check_answer(entry, 45000.0)


@pytest.mark.parametrize(
    ("seen", "value", "plausible"),
    [
        ([-200, -200, 0], 15, False),  # negatives and a zero: a positive is still another sign
        ([-200, -200, 0], -150, True),
        ([-200, -200, 0], 0, True),
        ([-200, -200, 0], -9_000_000, False),  # the zero does not switch the magnitude check off
        ([-3, 5], 0, True),  # both signs seen: zero lies between them
        ([2, 5], 0, False),
        ([0, 0], 4, True),  # all zero: no sign or magnitude to go by
    ],
)
def test_a_zero_among_the_examples_narrows_the_sign_and_magnitude_checks(seen, value, plausible):
    verifier = HitVerifier(Extractor(MarginSmall({})))
    entry = cr_entry()
    entry.validation["profile"]["answers"] = seen
    if plausible:
        verifier.check_answer(entry, value)
    else:
        with pytest.raises(HitRefused):
            verifier.check_answer(entry, value)


# -- alignment ----------------------------------------------------------------------------------


def test_number_kinds_follow_how_the_number_is_written():
    text = "a loan of $12,000 at 5% for 3 years, paid quarterly, 40 items and 7 more, on a 1tb disk"
    kinds = {c.text.strip(): number_kind(text, c) for c in find_candidates(text)}
    assert kinds == {
        "$12,000": "money",
        "5%": "pct",
        "3": "unit:year",
        "quarterly": "word:per-year",
        "40": "unit:item",
        "7": "plain",
        "1": "unit:tb",
    }


def test_an_exemplar_from_one_example_aligns_a_new_request():
    exemplar = learn_exemplar(
        CR_TEMPLATE,
        CURRENT_RATIO.ask(45000, 30000),
        {"current_assets": 45000, "current_liabilities": 30000},
    )
    found = align(exemplar, CURRENT_RATIO.ask(64000, 16000))
    assert found.complete and found.values == {
        "current_assets": 64000,
        "current_liabilities": 16000,
    }
    # The same words in the other order: the cue words, not the order, decide.
    flipped = "What is the current ratio if current liabilities are $16,000 and current assets are $64,000?"
    assert align(exemplar, flipped).values == {
        "current_assets": 64000,
        "current_liabilities": 16000,
    }


def test_words_after_a_number_describe_it_up_to_a_separator():
    template = [Variable("total_liabilities"), Variable("shareholders_equity")]
    exemplar = learn_exemplar(
        template,
        "Company ABC has total liabilities of $450,000 and shareholders' equity worth $150,000.",
        {"total_liabilities": 450000, "shareholders_equity": 150000},
    )
    text = "A company has $750,000 in total liabilities and $250,000 in shareholders' equity."
    assert align(exemplar, text).values == {
        "total_liabilities": 750000,
        "shareholders_equity": 250000,
    }
    # Written with a scale word where the example had none: the full amount, not 1.2.
    scaled = "Its shareholders' equity jumps to $1.2 million, and it carries total liabilities of $800,000."
    assert align(exemplar, scaled).values == {
        "total_liabilities": 800000,
        "shareholders_equity": 1200000,
    }


SHARPE = [Variable("R_p_pct"), Variable("R_f_pct"), Variable("σ_p_pct")]


def test_symbols_the_request_writes_say_which_number_is_which():
    """A wrong hit on Formula: "return" and "portfolio" describe both the
    portfolio's return and the standard deviation of its excess return, and alignment swapped them.
    The symbols each request writes beside its values, ``(R_p)`` and ``(σ_p)``, are cues too."""
    exemplar = learn_exemplar(
        SHARPE,
        "Evaluate the Sharpe Ratio for a portfolio with a return of 5.5% (R_p), a "
        "risk-free rate of 1.2% (R_f), and a standard deviation of the portfolio’s "
        "performance (σ_p) of 9%.",
        {"R_p_pct": 5.5, "R_f_pct": 1.2, "σ_p_pct": 9},
    )
    assert exemplar is not None and "σ_p" in exemplar["slots"]["σ_p_pct"]["cues"]
    text = (
        "If the return of a portfolio (R_p) was 8% and the risk-free rate (R_f) was 2%, and the standard "
        "deviation of the portfolio's excess return (σ_p) was 10%, calculate the Sharpe Ratio."
    )
    found = align(exemplar, text)
    assert found.complete and found.values == {"R_p_pct": 8, "R_f_pct": 2, "σ_p_pct": 10}


def test_alignment_refuses_a_leftover_number_and_ties():
    exemplar = learn_exemplar(
        CR_TEMPLATE,
        CURRENT_RATIO.ask(45000, 30000),
        {"current_assets": 45000, "current_liabilities": 30000},
    )
    extra = align(exemplar, CURRENT_RATIO.ask(64000, 16000) + " The audit fee was $900.")
    assert not extra.complete and "'$900' is left over" in extra.reason
    assert extra.values == {
        "current_assets": 64000,
        "current_liabilities": 16000,
    }  # each slot did align
    near = align(exemplar, CURRENT_RATIO.ask(64000, 16000) + " Fixed assets are $5,000.")
    assert not near.complete  # "assets are" before two numbers: neither is the one
    tie = align(exemplar, "Two amounts: $64,000 and $16,000.")
    assert not tie.complete and "could be" in tie.reason


def test_no_exemplar_when_a_value_is_written_twice_or_a_text_is_not_the_requests_words():
    assert (
        learn_exemplar(
            CR_TEMPLATE,
            CURRENT_RATIO.ask(5000, 5000),
            {"current_assets": 5000, "current_liabilities": 5000},
        )
        is None
    )
    assert (
        learn_exemplar(
            [Variable("k", "string")], "red shoes under 30 dollars", {"k": "crimson sneakers"}
        )
        is None
    )
    assert (
        learn_exemplar([Variable("k", "string")], "red shoes under 30 dollars", {"k": "shoes red"})
        is None
    )
    two_texts = [Variable("what", "string"), Variable("colour", "string")]
    assert learn_exemplar(two_texts, "red shoes", {"what": "shoes", "colour": "red"}) is None


# -- text variables (WebShop's keywords) ----------------------------------------------------------

SEARCH = [
    Variable("keywords", "string", "what to search for"),
    Variable("max_price", "number", "price limit"),
]
SEARCH_PROGRAM = (
    'def solve(keywords="protective ac output cable cord", max_price=30.0):\n'
    '    return {"keywords": keywords, "max_price": max_price}\n'
)
SEARCH_EXAMPLE = (
    "i need a protective ac output cable cord, and price lower than 30.00 dollars",
    {"keywords": "protective ac output cable cord", "max_price": 30.0},
)


def test_a_text_variable_is_the_region_its_closing_words_end_less_the_examples_filler():
    exemplar = learn_exemplar(SEARCH, *SEARCH_EXAMPLE)
    assert exemplar["slots"]["keywords"] == {
        "kind": "text",
        "opening": None,
        "filler": ["a", "i", "need"],
        "closing": ["and", "price", "lower", "than"],
    }
    found = align(
        exemplar,
        "i need a 6 foot long coaxial cable with 53mm plugs, price lower than 40.00 dollars",
    )
    assert found.complete, found.reason
    # the numbers inside the text are the text's: not the price, and not left over
    assert found.values == {
        "keywords": "6 foot long coaxial cable with 53mm plugs",
        "max_price": 40,
    }


def test_a_text_after_a_number_opens_where_the_words_after_that_number_say_not_at_numbers_inside_it():
    boilerplate = "Write the search (max_price 1000000 if none). Instruction: "
    exemplar = learn_exemplar(SEARCH, boilerplate + SEARCH_EXAMPLE[0], SEARCH_EXAMPLE[1])
    assert exemplar["slots"]["keywords"]["opening"] == [
        "if",
        "none",
        "instruction",
        "i",
        "need",
        "a",
    ]
    found = align(
        exemplar,
        boilerplate + "i want 2 pairs of 10 inch red shoes, and price lower than 40 dollars",
    )
    assert found.complete, found.reason
    assert found.values == {"keywords": "want 2 pairs of 10 inch red shoes", "max_price": 40}


def test_a_text_slot_whose_closing_words_are_missing_or_written_twice_does_not_align():
    exemplar = learn_exemplar(SEARCH, *SEARCH_EXAMPLE)
    missing = align(exemplar, "i want red shoes under 30 dollars")
    assert not missing.complete and "are not before a number" in missing.reason
    twice = align(
        exemplar, "red shoes, price lower than 30 dollars, or boots, price lower than 50 dollars"
    )
    assert not twice.complete and "more than once" in twice.reason


def test_a_search_entry_is_served_without_the_small_model_and_its_price_is_the_priced_number():
    pairs = [
        SEARCH_EXAMPLE,
        (
            "i want a noise cancelling usb microphone, and price lower than 60.00 dollars",
            {"keywords": "noise cancelling usb microphone", "max_price": 60.0},
        ),
    ]
    entry = Entry(
        id="ent_s",
        tenant="default",
        group_id="g",
        template=SEARCH,
        program=SEARCH_PROGRAM,
        validation={"extraction": "free", "profile": learn_profile(SEARCH, pairs, [])},
    )
    assert len(entry.validation["profile"]["exemplars"]) == 2  # each checked on the other
    small = MarginSmall({"keywords": "cable", "max_price": 6})  # would read "6 foot" as the price
    found = HitVerifier(Extractor(small)).extract(
        entry,
        "i'm looking for a 6 foot long high performance coaxial "
        "cable, and price lower than 40.00 dollars",
    )
    assert found.method == "align" and small.calls == 0
    assert found.variables["max_price"] == 40
    assert set(found.variables["keywords"].split()) >= {"6", "foot", "coaxial", "cable"}


def test_an_exemplar_that_misreads_a_validated_example_is_dropped():
    good = ("Pay $45,000 over 3 years.", {"a": 45000, "b": 3})
    misread = (
        "Pay $45,000 over 3 years.",
        {"a": 3, "b": 45000},
    )  # as if validated the other way round
    assert check_exemplar(learn_exemplar([Variable("a"), Variable("b")], *good), [good])
    assert not check_exemplar(
        learn_exemplar([Variable("a"), Variable("b")], *good), [good, misread]
    )
    assert len(learn_exemplars([Variable("a"), Variable("b")], [good])) == 1


def test_scaled_values_align_with_the_reading_the_example_used():
    template = [Variable("revenue")]
    exemplar = learn_exemplar(template, "Revenue was 2.4 million this year.", {"revenue": 2400000})
    assert exemplar["slots"]["revenue"]["scale"] == "scaled"
    assert align(exemplar, "Revenue was 3.1 million this year.").values == {"revenue": 3100000}
    assert [p.values() for p in positions("3.1 million")] == [[3.1, 3100000]]


# -- the bound and the decoder's margin -----------------------------------------------------------


def test_wilson_upper_bound():
    assert wilson_upper(0, 0, 1.96) == 1.0
    assert wilson_upper(1, 10, 1.0) == pytest.approx(0.2339, abs=1e-3)
    assert wilson_upper(0, 380, 1.96) == pytest.approx(0.01, abs=1e-4)
    assert wilson_upper(5, 10, 1.96) > wilson_upper(5, 100, 1.96) > 0.05


def test_entries_never_caught_wrong_are_not_demoted():
    entry = cr_entry()
    assert not demoted(entry, 0.01, 1.96)
    entry.audits_disagreed, entry.audits_agreed = 1, 50
    assert demoted(entry, 0.01, 1.96) and not demoted(entry, 0.2, 1.96)


def test_the_choice_decoder_reports_the_log_probability_margin_of_each_choice():
    def model(batch):
        logits = np.zeros(len(VOCAB))
        logits[VOCAB.index("1")], logits[VOCAB.index("2")] = 3.0, 1.75  # "1" over "2" by 1.25
        logits[VOCAB.index("5")] = 1.0  # after "1": "2" over "5" by only 0.75
        return logits

    out = decode_object([Field("a", [12, 15, 2])], tokenize, model, pending=[3])
    assert out.values == {"a": 12}
    # Branches: 1 vs 2 (gap 1.25), then 2 vs 5 after "1" (gap 0.75): the smallest gap is the margin.
    assert out.margins == {"a": pytest.approx(0.75)}
    forced = decode_object([Field("a", [5])], tokenize, model, pending=[3])
    assert forced.margins == {}  # one allowed value: nothing was chosen


# -- the audit record in both stores ------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request, tmp_path):
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path / "audit.db")
    else:
        pytest.importorskip("psycopg")
        from minicache.store.postgres import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_dsn"))
    yield store
    store.close()


def test_audits_are_counted_per_entry_in_both_stores(any_store):
    entry = cr_entry()
    any_store.put_entry(entry)
    assert any_store.record_audit("default", entry.id, True) == (1, 0)
    assert any_store.record_audit("default", entry.id, False) == (1, 1)
    assert any_store.record_audit("default", entry.id, True) == (2, 1)
    assert any_store.record_audit("other-tenant", entry.id, False) == (0, 0)  # tenants stay apart
    assert any_store.record_audit("default", "ent_missing", True) == (0, 0)
    stored = any_store.get_entry("default", entry.id)
    assert (stored.audits_agreed, stored.audits_disagreed) == (2, 1)
    assert (stored.to_json()["audits_agreed"], stored.to_json()["audits_disagreed"]) == (2, 1)


# -- the benchmark's figures ----------------------------------------------------------------------


def test_cache_error_and_gain_rates_compare_hits_with_pot_on_the_same_requests():
    from minicache_bench.report import cache_rates

    def row(i, route, correct, extraction=None):
        return {
            "id": i,
            "route": route,
            "correct": correct,
            "latency_s": 0.1 * (i + 1),
            "detail": {"extraction": extraction} if extraction else {},
        }

    pot = [row(i, "miss", correct) for i, correct in enumerate([True, True, False, True, False])]
    mc = [
        row(0, "hit", False, "choice"),  # wrong where pot was right: an error the cache added
        row(1, "hit", True, "rule"),
        row(2, "hit", True, "align"),  # right where pot was wrong: a gain
        row(3, "miss", False),  # not a hit: in neither rate
        row(4, "hit", False, "rule"),
    ]  # wrong where pot was wrong too: neither
    rates = {c["path"]: c for c in cache_rates("minicache", mc, pot)}
    assert rates["all"]["hits"] == 4
    assert rates["all"]["cache_error_rate"] == pytest.approx(1 / 4)
    assert rates["all"]["cache_gain_rate"] == pytest.approx(1 / 4)
    assert (rates["choice"]["hits"], rates["choice"]["cache_error_rate"]) == (1, 1.0)
    assert (
        rates["rule"]["hits"],
        rates["rule"]["cache_error_rate"],
        rates["rule"]["cache_gain_rate"],
    ) == (2, 0, 0)
    assert rates["align"]["cache_gain_rate"] == 1.0
    assert cache_rates("exact", [row(0, "miss", True)], pot) == []


SHOP = [
    "i need a protective ac output cable cord, and price lower than 30.00 dollars",
    "i want a noise cancelling usb microphone, and price lower than 60.00 dollars",
    "i need gluten free smoked bacon 4 ounce pack of 2, and price lower than 50.00 dollars",
    "i am looking for red running shoes in size 10, and price lower than 80.00 dollars",
    "i need a 6 foot long coaxial cable, and price lower than 40.00 dollars",
    "find me a 53mm round brush for hair styling, and price lower than 25.00 dollars",
]


def shop_action(instruction: str) -> dict:
    """What the fake target writes: the words before the price clause less a leading 'i need a' or
    the like, and the price."""
    import re as regex

    words, price = instruction.split(", and price lower than ")
    words = regex.sub(r"^(i need a |i want a |i need |i am looking for |find me a )", "", words)
    return {"keywords": words, "max_price": float(price.split()[0])}


def test_a_search_group_is_built_and_then_served_by_text_alignment_without_the_small_model(make):
    def target(messages, options):
        if "Request:\n" not in messages[1].content:
            raise AssertionError("no generalization expected: the miss programs lift")
        action = shop_action(messages[1].content.split("Request:\n")[1].split("\n")[0])
        return (
            "```python\ndef solve():\n"
            f"    keywords = {action['keywords']!r}\n    max_price = {action['max_price']!r}\n"
            "    return {'keywords': keywords, 'max_price': max_price}\n```"
        )

    def small(messages, options):  # the build's validation asks it; a hit must not
        return shop_action(messages[-1].content.strip().splitlines()[-1])

    from minicache.models import FakeBackend

    mc = make(target=FakeBackend(target), small=FakeBackend(small))
    for instruction in SHOP[:3]:
        result = mc.solve(instruction, group="shop")
        assert result.route == "miss" and result.answer == shop_action(instruction)
    entry = mc.store.active_entry("default", "label:shop")
    assert entry is not None, mc.stats()
    kinds = {
        name: slot["kind"]
        for name, slot in entry.validation["profile"]["exemplars"][0]["slots"].items()
    }
    assert kinds == {"keywords": "text", "max_price": "money"}
    validation_calls = len(mc.small.calls)
    for instruction in SHOP[3:]:
        result = mc.solve(instruction, group="shop")
        assert result.route == "hit" and result.extraction == "align", result.fallback_reason
        assert (
            result.answer["max_price"] == shop_action(instruction)["max_price"]
        )  # not 6, 53 or 10
        assert set(shop_action(instruction)["keywords"].split()) <= set(
            result.answer["keywords"].split()
        )
    assert len(mc.small.calls) == validation_calls  # the hits asked the small model nothing


def test_which_hits_are_audited_is_seeded_so_two_runs_audit_the_same_ones(make):
    def audited(seed: int) -> list[int]:
        mc = make(audit_rate=0.3, audit_seed=seed)
        warm(mc, CURRENT_RATIO, CR_VALUES[:3])
        calls, picks = mc.target.miss_calls, []
        for i, values in enumerate(CR_VALUES[3:] * 3):
            assert mc.solve(CURRENT_RATIO.ask(*values)).route == "hit"
            if mc.target.miss_calls > calls:
                picks.append(i)
            calls = mc.target.miss_calls
        return picks

    first = audited(seed=5)
    assert first and len(first) < len(CR_VALUES[3:] * 3)  # a sample, not all or none
    assert audited(seed=5) == first


def two_number_entry(
    names: tuple[str, str], examples: list[tuple[str, int, int]], answers: list[float]
) -> Entry:
    """A choice-extraction entry for two numeric variables, its profile learned from (text, a, b) examples."""
    template = [Variable(name, "number", name.replace("_", " ")) for name in names]
    pairs = [(text, dict(zip(names, (a, b), strict=True))) for text, a, b in examples]
    return Entry(
        id="e",
        tenant="t",
        group_id="g",
        template=template,
        program="",
        rules={},
        validation={"extraction": "choice", "profile": learn_profile(template, pairs, answers)},
    )


def test_a_model_choice_next_to_the_variables_acronym_is_not_refused_on_context():
    from minicache.hit.corroboration import corroborate
    from minicache.hit.extraction import Extraction

    entry = two_number_entry(
        ("market_value_per_share", "earnings_per_share"),
        [
            (
                "A stock with a market value per share of $230 and earnings per share of $23.",
                230,
                23,
            ),
            ("Earnings per share of $5 and a market value per share of $75.", 75, 5),
        ],
        [10, 15],
    )
    chosen = Extraction({"market_value_per_share": 78, "earnings_per_share": 9}, "choice", 0.1)
    # "EPS" names earnings per share: the 9 it stands next to is better described than the dividend's
    # "$2 per share" (without the acronym the context check refused this right choice).
    assert (
        corroborate(
            entry,
            chosen,
            "A share price of $78, EPS of $9 and a dividend of $2 per share.",
            {},
            min_margin=1.0,
        )
        is None
    )
    # The acronym does not excuse a wrong choice: the 2 is not next to "EPS".
    wrong = Extraction({"market_value_per_share": 78, "earnings_per_share": 2}, "choice", 0.1)
    with pytest.raises(HitRefused, match="^context"):
        corroborate(
            entry,
            wrong,
            "A share price of $78, EPS of $9 and a dividend of $2 per share.",
            {},
            min_margin=1.0,
        )


def test_a_number_written_as_a_word_does_not_compete_for_a_variable_never_written_that_way():
    from minicache.hit.corroboration import corroborate
    from minicache.hit.extraction import Extraction

    entry = two_number_entry(
        ("operating_cash_flow", "capital_expenditures"),
        [
            (
                "A shop had operating cash flows of $50,000 and capital expenditures of $20,000.",
                50000,
                20000,
            ),
            (
                "Capital expenditures of $5,000 against operating cash flows of $30,000.",
                30000,
                5000,
            ),
        ],
        [30000, 25000],
    )
    text = (
        "A bakery operating cash flows for one year of $28,000 with $8,000 of capital expenditures."
    )
    chosen = Extraction({"operating_cash_flow": 28000, "capital_expenditures": 8000}, "choice", 0.1)
    assert corroborate(entry, chosen, text, {}, min_margin=1.0) is None
    # Where the examples wrote the variable as a word, the word still competes.
    entry.validation["profile"]["kinds"]["operating_cash_flow"] = ["money", "word:one"]
    with pytest.raises(HitRefused, match="^context: the words around 'one'"):
        corroborate(entry, chosen, text, {}, min_margin=1.0)


def test_compared_to_separates_the_words_of_two_numbers():
    from minicache.hit.cues import number_words

    text = "A club has $222,000 in current assets compared to $127,000 in current liabilities."
    pos = positions(text)
    described = number_words(text, pos)
    words = {p.values()[0]: [w for w, _ in described[p.start]] for p in pos}
    assert "assets" in words[222000] and "assets" not in words[127000]


SECOND = VerifyConfig(second_choice=True)


class EnumSmall:
    """Chooses, for each variable, its ``prefer``red value while the schema still allows it, else the
    first value allowed; records the schemas it was given and reports the given margins."""

    name = "enum-small"

    def __init__(
        self, prefer: dict[str, float], margins: list[dict[str, float]] | None = None
    ) -> None:
        self.prefer, self.margins, self.schemas = prefer, list(margins or []), []

    def complete(self, messages, options=None):
        props = options.json_schema["properties"]
        self.schemas.append(props)
        values = {
            k: self.prefer[k] if self.prefer[k] in spec["enum"] else spec["enum"][0]
            for k, spec in props.items()
        }
        margins = self.margins.pop(0) if self.margins else {}
        return Completion(
            text=json.dumps(values), prompt_tokens=10, completion_tokens=5, choice_margins=margins
        )

    def close(self) -> None:
        pass


def test_a_value_a_check_refutes_is_taken_out_and_the_models_second_choice_is_served():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    small = EnumSmall({"current_assets": 64000, "current_liabilities": 64000})  # one number twice
    served = HitVerifier(Extractor(small), SECOND).extract(cr_entry(exemplars=False), text)
    assert served.method == "second-choice"
    assert served.variables == {"current_assets": 64000, "current_liabilities": 16000}
    # The 64,000 stays with the variable its words describe ("current assets"): only the liabilities lose it.
    assert small.schemas[1]["current_liabilities"]["enum"] == [16000]
    assert small.schemas[1]["current_assets"]["enum"] == [64000, 16000]
    assert served.detail["first_choice"] == {
        "refused": "duplicate",
        "variable": "current_liabilities",
        "value": 64000,
    }
    assert served.small_tokens == 30  # both calls


def test_a_second_choice_must_pass_every_check_or_the_first_refusal_stands():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    # The second choice is right but the decoder was unsure of it: refused, and the refusal the miss
    # path is compared with is the first one (the duplicate).
    small = EnumSmall(
        {"current_assets": 64000, "current_liabilities": 64000},
        margins=[{}, {"current_liabilities": 0.2}],
    )
    with pytest.raises(
        HitRefused, match="^duplicate: current_assets and current_liabilities both took 64000"
    ):
        HitVerifier(Extractor(small), SECOND).extract(cr_entry(exemplars=False), text)
    assert len(small.schemas) == 2
    # A value outside the variable's range is taken out too; when nothing is left the first refusal stands.
    far = "What is the current ratio if current assets are $64,000,000 and current liabilities total $16,000?"
    small = EnumSmall({"current_assets": 64000000, "current_liabilities": 16000})
    with pytest.raises(HitRefused, match="^range: current_assets"):
        HitVerifier(Extractor(small), SECOND).extract(cr_entry(exemplars=False), far)
    assert small.schemas[1]["current_assets"]["enum"] == [
        16000
    ]  # chose 16000 again for both: refused


def test_a_disagreement_or_a_small_margin_gets_no_second_choice():
    text = "What is the current ratio if current assets are $64,000 and current liabilities total $16,000?"
    unsure = EnumSmall(
        {"current_assets": 64000, "current_liabilities": 16000}, margins=[{"current_assets": 0.3}]
    )
    with pytest.raises(HitRefused, match="^margin"):
        HitVerifier(Extractor(unsure), SECOND).extract(cr_entry(exemplars=False), text)
    rules = {"current_assets": {"kind": "anchor", "words": ["assets", "are"]}}
    contradicted = EnumSmall({"current_assets": 16000, "current_liabilities": 64000})
    unpinned = VerifyConfig(
        second_choice=True, pin_readings=False
    )  # pinned, the rule's value is given
    with pytest.raises(HitRefused, match="^rule"):
        HitVerifier(Extractor(contradicted), unpinned).extract(
            cr_entry(rules=rules, exemplars=False), text
        )
    off = EnumSmall({"current_assets": 64000, "current_liabilities": 64000})
    with pytest.raises(HitRefused, match="^duplicate"):
        HitVerifier(Extractor(off)).extract(cr_entry(exemplars=False), text)  # off by default
    assert [len(s.schemas) for s in (unsure, contradicted, off)] == [1, 1, 1]


def test_a_second_choice_hit_is_served_and_counted_as_a_model_hit(make):
    mc = make(
        use_rules=False, verify=VerifyConfig(probation=0, second_choice=True)
    )  # the model chooses
    warm(mc, CURRENT_RATIO, CR_VALUES[:3], group="cr")
    mc.small = mc.extractor.small = mc.verifier.extractor.small = EnumSmall(
        {"current_assets": 64000, "current_liabilities": 64000}
    )
    result = mc.solve(REWORDED.format(64000, 16000), group="cr")
    assert (
        result.route == "hit"
        and result.extraction == "second-choice"
        and result.answer == pytest.approx(4.0)
    )
