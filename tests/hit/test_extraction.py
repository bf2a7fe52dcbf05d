"""Hit-path extraction: number candidates, learned rules, type checks, the small model's schema."""

from __future__ import annotations

import pytest

from fakes import CR_VALUES, CURRENT_RATIO, SI_VALUES, SIMPLE_INTEREST, FakeSmall
from minicache.hit.extraction import (
    ExtractionError,
    Extractor,
    check_types,
    template_prompt,
    template_schema,
)
from minicache.hit.rules import (
    AnchorRule,
    KeywordRule,
    PositionRule,
    apply_rule,
    learn_rules,
    parse_rule,
    valid_rule,
)
from minicache.models import FakeBackend
from minicache.programs.numbers import candidate_values, find_candidates, relevant_text
from minicache.store import Entry, Variable


def values_of(text: str) -> list:
    return [c.value for c in find_candidates(text)]


# -- find_candidates ----------------------------------------------------------------------------


def test_thousands_separators_and_currency_are_read_as_one_number():
    cands = find_candidates("Revenue was $1,234,567.89 and costs were 2,000 units.")
    assert [c.value for c in cands] == [1234567.89, 2000]
    assert "$1,234,567.89" in cands[0].text
    assert isinstance(cands[1].value, int)


def test_percentages_are_read_as_written():
    assert values_of("rates of 5% and 7.5 percent") == [5, 7.5]


def test_scaled_amount_gives_both_the_written_and_the_scaled_value():
    cands = find_candidates("Revenue of 2.4 million and a loss of $3bn")
    assert [c.value for c in cands] == [2.4, 2400000, 3, 3000000000]
    assert (cands[0].start, cands[0].end) == (cands[1].start, cands[1].end)
    assert values_of("1.5 thousand") == [1.5, 1500]


def test_number_words_are_candidates():
    assert values_of("paid twice a year for three years, compounded quarterly, half of it") == [
        2,
        3,
        4,
        0.5,
    ]
    assert values_of("someone often tends to wonder") == []  # words inside other words do not count


def test_negative_and_leading_dot_numbers():
    assert values_of("a change of -5 and .5") == [-5, 0.5]


def test_candidates_are_in_text_order_and_values_are_deduplicated():
    text = "5 apples, twenty pears and 5 plums"
    assert values_of(text) == [5, 20, 5]
    assert candidate_values(text) == [5, 20]
    assert candidate_values("no numbers here") == []


def test_hyphenated_range_is_two_positive_numbers():
    assert candidate_values("a term between 5-10 years, fiscal 2020-2021") == [5, 10, 2020, 2021]


# -- learned rules ------------------------------------------------------------------------------


CR_TEMPLATE = [Variable("current_assets"), Variable("current_liabilities")]


def cr_validated(values_list):
    return [
        (CURRENT_RATIO.ask(*v), dict(zip(CURRENT_RATIO.names, v, strict=True))) for v in values_list
    ]


def test_anchor_rules_are_learned_and_apply_to_new_requests():
    rules = learn_rules(CR_TEMPLATE, cr_validated(CR_VALUES[:3]))
    assert rules == {
        "current_assets": AnchorRule(("assets", "are")),
        "current_liabilities": AnchorRule(("liabilities", "are")),
    }
    text = CURRENT_RATIO.ask(77000, 11000)
    assert apply_rule(rules["current_assets"], text) == 77000
    assert apply_rule(rules["current_liabilities"], text) == 11000


def test_lone_stop_word_is_never_an_anchor():
    template = [Variable(n) for n in SIMPLE_INTEREST.names]
    validated = [
        (SIMPLE_INTEREST.ask(*v), dict(zip(SIMPLE_INTEREST.names, v, strict=True)))
        for v in SI_VALUES[:3]
    ]
    rules = learn_rules(template, validated)
    assert rules["principal"] == AnchorRule(("loan", "of"))  # not just ["of"]
    assert rules["rate_pct"] == AnchorRule(("interest", "at"))
    assert apply_rule(rules["rate_pct"], SIMPLE_INTEREST.ask(1000, 9, 2)) == 9


def test_no_rules_from_a_single_example():
    assert learn_rules(CR_TEMPLATE, cr_validated(CR_VALUES[:1])) == {}


def test_anchor_rule_is_none_when_text_is_ambiguous_or_anchor_absent():
    rule = {"kind": "anchor", "words": ["assets", "are"]}
    assert apply_rule(rule, "current assets are $5,000 while fixed assets are $7,000") is None
    assert apply_rule(rule, "assets total 5,000") is None
    assert apply_rule(rule, "current assets are $5,000 and, again, assets are $5,000") == 5000


def test_anchor_rule_returns_the_number_as_written_for_scaled_amounts():
    assert (
        apply_rule({"kind": "anchor", "words": ["revenue", "of"]}, "a revenue of 2.4 million")
        == 2.4
    )


def test_position_rule_is_learned_when_no_anchor_is_shared():
    template = [Variable("x"), Variable("y")]
    validated = [
        ("Alpha 10 beta 20", {"x": 10, "y": 20}),
        ("Gamma 30 delta 40", {"x": 30, "y": 40}),
        ("Epsilon 50 zeta 60", {"x": 50, "y": 60}),
    ]
    rules = learn_rules(template, validated)
    assert rules == {"x": PositionRule(0, 2), "y": PositionRule(1, 2)}
    assert apply_rule(rules["y"], "Eta 70 theta 80") == 80
    assert apply_rule(rules["y"], "Eta 70 theta 80 iota 90") is None  # count differs


def test_variable_whose_value_appears_twice_gets_no_rule():
    validated = [
        ("current assets are $5,000 and current liabilities are $5,000", {"a": 5000, "b": 5000}),
        ("current assets are $8,000 and current liabilities are $8,000", {"a": 8000, "b": 8000}),
    ]
    assert learn_rules([Variable("a"), Variable("b")], validated) == {}


def test_learned_rules_reproduce_every_validated_extraction():
    validated = cr_validated(CR_VALUES[:5])
    rules = learn_rules(CR_TEMPLATE, validated)
    for text, values in validated:
        assert {name: apply_rule(rule, text) for name, rule in rules.items()} == values


def test_unknown_rule_kind_applies_to_nothing():
    assert apply_rule({"kind": "regex", "pattern": r"\d+"}, "42") is None


# Rules as entries written before they were typed classes stored them (entries.rules in SQLite, JSON).
STORED_RULES = (
    '{"kind": "anchor", "words": ["assets", "are"]}',
    '{"kind": "keyword", "stems": ["opera", "incom"]}',
    '{"kind": "position", "index": 1, "count": 3}',
)


@pytest.mark.parametrize("stored", STORED_RULES)
def test_a_stored_rule_loads_as_a_typed_rule_and_is_written_back_byte_for_byte(stored):
    import json

    rule = parse_rule(json.loads(stored))
    assert rule is not None and rule.kind == json.loads(stored)["kind"]
    assert json.dumps(rule.to_json()) == stored
    assert parse_rule(rule.to_json()) == rule


def test_learned_rules_written_as_json_apply_as_the_typed_rules_did():
    import json

    validated = cr_validated(CR_VALUES[:5])
    rules = learn_rules(CR_TEMPLATE, validated)
    stored = json.loads(json.dumps({name: rule.to_json() for name, rule in rules.items()}))
    for text, _values in validated:
        assert {n: apply_rule(r, text) for n, r in stored.items()} == {
            n: apply_rule(r, text) for n, r in rules.items()
        }


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"kind": "anchor"},
        {"kind": "anchor", "words": []},
        {"kind": "anchor", "words": ["a"] * 9},
        {"kind": "anchor", "words": [1]},
        {"kind": "keyword", "stems": [""]},
        {"kind": "position", "index": 3, "count": 3},
        {"kind": "position", "index": -1, "count": 3},
        {"kind": "position", "index": "0", "count": 3},
        {"kind": "regex", "pattern": "x"},
    ],
)
def test_a_malformed_rule_is_not_a_rule_and_applies_to_nothing(bad):
    assert parse_rule(bad) is None and not valid_rule(bad)
    assert apply_rule(bad, "a loan of 5000 at 3 percent") is None


def test_a_typed_rule_outside_the_stored_shape_applies_to_nothing():
    """A typed rule is checked as its JSON form is: a keyword rule with nine stems is not valid anywhere."""
    assert apply_rule(KeywordRule(tuple("abcdefghi")), "a 5") is None


# -- check_types --------------------------------------------------------------------------------


TYPED = [Variable("amount", "number"), Variable("count", "integer"), Variable("name", "string")]


def test_check_types_accepts_and_normalizes_good_values():
    assert check_types(TYPED, {"amount": 2.5, "count": 3.0, "name": "Acme", "extra": 1}) == {
        "amount": 2.5,
        "count": 3,
        "name": "Acme",
    }
    assert isinstance(check_types(TYPED, {"amount": 1, "count": 3.0, "name": ""})["count"], int)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"count": 1, "name": "x"}, "missing"),
        ({"amount": "12", "count": 1, "name": "x"}, "should be a number"),
        ({"amount": True, "count": 1, "name": "x"}, "should be a number"),
        ({"amount": None, "count": 1, "name": "x"}, "should be a number"),
        ({"amount": float("nan"), "count": 1, "name": "x"}, "out of range"),
        ({"amount": float("inf"), "count": 1, "name": "x"}, "out of range"),
        ({"amount": 2e15, "count": 1, "name": "x"}, "out of range"),
        ({"amount": 1, "count": 2.5, "name": "x"}, "should be an integer"),
        ({"amount": 1, "count": 1, "name": 7}, "should be a string"),
    ],
    ids=[
        "missing",
        "number as text",
        "bool",
        "null",
        "nan",
        "inf",
        "too large",
        "fractional integer",
        "string var given a number",
    ],
)
def test_check_types_rejects_bad_values(values, message):
    with pytest.raises(ExtractionError, match=message):
        check_types(TYPED, values)


# -- the small model's schema and prompt ---------------------------------------------------------


def test_template_schema_with_candidates_uses_enum_for_numbers_only():
    schema = template_schema(TYPED, [45000, 30000, 2.4])
    assert schema["properties"] == {
        "amount": {"enum": [45000, 30000, 2.4]},
        "count": {"enum": [45000, 30000, 2.4]},
        "name": {"type": "string", "maxLength": 200},
    }
    assert schema["required"] == ["amount", "count", "name"]
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("candidates", [None, []])
def test_template_schema_without_candidates_uses_json_types(candidates):
    props = template_schema(TYPED, candidates)["properties"]
    assert props["amount"] == {"type": "number"} and props["count"] == {"type": "integer"}


def test_template_prompt_lists_every_variable_with_unit_and_description():
    prompt = template_prompt(
        [
            Variable("rate_pct", "number", "annual rate, percent as written", "percent"),
            Variable("years", "integer"),
        ]
    )
    assert "- rate_pct (number) [percent]: annual rate, percent as written" in prompt
    assert "- years (integer): years" in prompt


# -- Extractor ----------------------------------------------------------------------------------


def cr_entry(rules=None, extraction="choice") -> Entry:
    template = [
        Variable("current_assets", "integer", "current assets, dollars"),
        Variable("current_liabilities", "integer", "current liabilities, dollars"),
    ]
    return Entry(
        id="ent_1",
        tenant="default",
        group_id="grp_1",
        template=template,
        program=CURRENT_RATIO.program(list(CR_VALUES[0])),
        validation={"extraction": extraction},
        rules=rules or {},
    )


def test_choice_extraction_offers_only_the_numbers_in_the_request():
    small = FakeSmall()
    result = Extractor(small).extract(cr_entry(), CURRENT_RATIO.ask(9000, 4000))
    assert result.method == "choice" and result.variables == {
        "current_assets": 9000,
        "current_liabilities": 4000,
    }
    assert result.small_tokens > 0
    schema = small.calls[0].options.json_schema
    assert schema["properties"]["current_assets"] == {"enum": [9000, 4000]}


def test_free_extraction_sends_no_enum():
    small = FakeSmall()
    result = Extractor(small).extract(cr_entry(extraction="free"), CURRENT_RATIO.ask(9000, 4000))
    assert result.method == "free"
    assert small.calls[0].options.json_schema["properties"]["current_assets"] == {"type": "integer"}


def test_choice_without_numbers_in_text_becomes_free():
    small = FakeBackend.scripted([{"current_assets": 1, "current_liabilities": 2}])
    result = Extractor(small).by_model(cr_entry().template, "no digits at all", choice=True)
    assert result.method == "free"


def test_rules_extract_without_calling_the_small_model():
    rules = learn_rules(cr_entry().template, cr_validated(CR_VALUES[:3]))
    small = FakeSmall()
    result = Extractor(small).extract(cr_entry(rules), CURRENT_RATIO.ask(64000, 16000))
    assert result.method == "rule" and result.small_tokens == 0
    assert result.variables == {"current_assets": 64000, "current_liabilities": 16000}
    assert small.calls == []


def test_rules_that_do_not_apply_fall_through_to_the_small_model():
    rules = learn_rules(cr_entry().template, cr_validated(CR_VALUES[:3]))
    small = FakeSmall()
    result = Extractor(small).extract(
        cr_entry(rules), "Current ratio: assets 64,000, liabilities 16,000"
    )
    assert result.method == "choice" and len(small.calls) == 1


def test_rules_are_ignored_when_disabled():
    rules = learn_rules(cr_entry().template, cr_validated(CR_VALUES[:3]))
    small = FakeSmall()
    result = Extractor(small, use_rules=False).extract(
        cr_entry(rules), CURRENT_RATIO.ask(64000, 16000)
    )
    assert result.method == "choice" and len(small.calls) == 1


@pytest.mark.parametrize(
    "mode, message",
    [
        ("raise", "small model failed"),
        ("invalid_json", "invalid JSON"),
        ("not_object", "not an object"),
        ("missing", "missing"),
        ("string", "should be a number"),
    ],
)
def test_small_model_failures_become_extraction_errors(mode, message):
    with pytest.raises(ExtractionError, match=message):
        Extractor(FakeSmall(mode)).extract(cr_entry(), CURRENT_RATIO.ask(9000, 4000))


def test_shared_prefix_is_the_common_boilerplate_cut_at_a_word_boundary():
    from minicache.request import shared_prefix

    texts = [
        "Use formula ROA to answer. Question: What is ROA if net income is 5?",
        "Use formula ROA to answer. Question: What's the ROA for income 7?",
        "Use formula ROA to answer. Question: Compute ROA, income 9.",
    ]
    assert shared_prefix(texts, minimum=10) == "Use formula ROA to answer. Question: "
    assert shared_prefix(texts[:1], minimum=10) == ""  # one request has no boilerplate to learn
    assert shared_prefix(["short a", "short b"]) == ""  # below the minimum length


def test_keyword_rule_reads_numbers_by_the_words_of_the_variable_name():
    from minicache.hit.rules import apply_rule, learn_rules, name_stems
    from minicache.store.base import Variable

    template = [Variable("revenue"), Variable("operating_income")]
    validated = [
        (
            "A firm had revenue of $500,000 and operating income of $70,000.",
            {"revenue": 500000, "operating_income": 70000},
        ),
        (
            "Operating income came to $45,000 while total revenue reached $150,000.",
            {"revenue": 150000, "operating_income": 45000},
        ),
    ]
    rules = learn_rules(template, validated)
    assert rules["revenue"] == KeywordRule(tuple(name_stems("revenue")))
    assert rules["operating_income"].kind == "keyword"
    text = "Given operating income of $90,000 and revenue of $750,000, find the margin."
    assert apply_rule(rules["revenue"], text) == 750000
    assert apply_rule(rules["operating_income"], text) == 90000
    # No number near any of the name's words: the rule does not apply (the small model decides).
    assert apply_rule(rules["revenue"], "Sales were 10 and costs 4.") is None


def test_a_shared_prefix_is_stripped_whatever_the_spacing_of_the_request():
    from minicache.request import strip_prefix

    prefix = (
        "Formula: ROA = (Net Income / Total Assets) x 100. Question:  "  # learned with two spaces
    )
    assert (
        strip_prefix(
            'Formula: ROA = (Net Income / Total Assets) x 100. Question: "Income $5, assets $50."',
            prefix,
        )
        == '"Income $5, assets $50."'
    )
    assert (
        strip_prefix('Formula: ROA = (Net Income / Total Assets)\nx 100.  Question:\t"q 5"', prefix)
        == '"q 5"'
    )
    # Left part-way (a word differs, or a space is missing): only the whole words shared go.
    assert (
        strip_prefix("Formula: ROA = (Net Income / Total Assets) x 10. Question: q 5", prefix)
        == "10. Question: q 5"
    )
    assert (
        strip_prefix("Formula: ROA = (Net Income / Total Assets) x 100.Question: q 5", prefix)
        == "100.Question: q 5"
    )
    # Fewer shared characters than PREFIX_MIN: the text is left whole.
    assert strip_prefix("Formula: ROA", prefix) == "Formula: ROA"
    assert (
        strip_prefix("Formula: ROA = (Net Income) x 5", prefix) == "Formula: ROA = (Net Income) x 5"
    )


def test_a_request_that_leaves_the_prefix_part_way_loses_only_the_words_it_shares():
    from minicache.request import PREFIX_MIN, shared_prefix, strip_prefix

    # Two early examples both began their instruction with "i": the learned prefix runs one word
    # past the boilerplate (seen on WebShop).
    boiler = "Write the WebShop search keywords for the shopper. Instruction: "
    prefix = shared_prefix(
        [boiler + "i need a red mug under 30 dollars", boiler + "i want blue socks, size 9"]
    )
    assert prefix == boiler + "i "
    assert (
        strip_prefix(boiler + "find me a lamp under 40 dollars", prefix)
        == "find me a lamp under 40 dollars"
    )
    assert strip_prefix(boiler + "i need green tea", prefix) == "need green tea"  # the whole prefix
    assert len("Write the WebShop ") < PREFIX_MIN
    assert (
        strip_prefix("Write the WebShop query: lamp 40", prefix)
        == "Write the WebShop query: lamp 40"
    )


def test_keyword_rule_reads_the_number_next_to_the_names_acronym_in_capitals():
    rule = KeywordRule(("earni", "per", "share"))
    # "share" is near the price; "EPS" stands for all three words and is nearer the 9.
    assert apply_rule(rule, "A telecom company reports a share price of $78 and EPS of $9.") == 9
    assert apply_rule(rule, "A share price of $64 and Earnings per Share of $8.") == 8
    # In lower case "eps" is a word like any other, not the acronym: nothing near the 9 names the variable.
    assert apply_rule(rule, "a share price of $78 and eps of $9") == 78
    # Two-word names have no acronym ("net income" is not "NI").
    assert apply_rule(KeywordRule(("net", "incom")), "NI of $5 and assets of $50") is None


FILLER = (
    "The board thanked the outgoing committee members for their service. "
    "Several unrelated operational remarks were recorded in the minutes. "
) * 20


def test_the_small_model_reads_a_long_request_without_its_sentences_that_write_no_number():
    request = (
        "What is the current ratio?\n\nContext:\n"
        + FILLER
        + "Our records say so. Current assets are $64,000. "
        "Current liabilities total $16,000. " + FILLER
    )
    assert len(request) > 2000
    short = relevant_text(request)
    # the question, each number's sentence and the one before it, in order; none of the filler
    assert short.split("\n") == [
        "What is the current ratio?",
        "Our records say so.",
        "Current assets are $64,000.",
        "Current liabilities total $16,000.",
    ]
    assert candidate_values(short) == candidate_values(request)
    assert relevant_text(CURRENT_RATIO.ask(64000, 16000)) == CURRENT_RATIO.ask(
        64000, 16000
    )  # short: as it is
    small = FakeBackend.scripted([{"current_assets": 64000, "current_liabilities": 16000}])
    result = Extractor(small).by_model(cr_entry().template, request, choice=True)
    assert result.variables == {"current_assets": 64000, "current_liabilities": 16000}
    (call,) = small.calls
    assert call.messages[-1].content == short
