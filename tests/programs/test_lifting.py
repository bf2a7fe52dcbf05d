"""Lifting plain PoT programs into parameterized ones (minicache.programs.lifting), without any model."""

from __future__ import annotations

import ast

import pytest

from minicache.errors import ProgramShapeError
from minicache.hit.extraction import check_types
from minicache.programs.lifting import lift, own_values, program_inputs
from minicache.programs.signature import fill_defaults, integer_parameters, parse_signature

NPV_TEXT = "A project expects annual cash inflows of $6,000 for 4 years. If the discount rate is 8%, what is the NPV?"
NPV_PLAIN = """import math
def solve():
    cash_inflow = 6000  # annual cash inflow, dollars
    discount_rate = 0.08
    years = 4
    npv = sum(cash_inflow / (1 + discount_rate) ** t for t in range(1, years + 1))
    return round(npv, 2)
"""


def test_assigned_literals_become_parameters_named_and_described_by_the_program(sandbox):
    lifted = lift(NPV_PLAIN, NPV_TEXT)
    assert lifted is not None
    assert lifted.defaults == {"cash_inflow": 6000, "discount_rate_pct": 8, "years": 4}
    sig = parse_signature(lifted.program)
    by_name = {v.name: v for v in sig.template}
    assert by_name["cash_inflow"].description.startswith(
        "annual cash inflow, dollars (in the example: "
    )
    assert by_name["cash_inflow"].unit == "dollars"
    assert "'expects annual cash inflows of $6,000 for 4'" in by_name["cash_inflow"].description
    # The same answer as the plain program, with the defaults and with another request's values.
    plain = sandbox.run(NPV_PLAIN, {}).value
    assert sandbox.run(lifted.program, {}).value == plain == 19872.76
    assert (
        sandbox.run(
            lifted.program, {"cash_inflow": 1000, "discount_rate_pct": 10, "years": 2}
        ).value
        == 1735.54
    )


def test_a_percentage_written_as_a_fraction_takes_the_value_as_written():
    lifted = lift(NPV_PLAIN, NPV_TEXT)
    assert "discount_rate = discount_rate_pct / 100" in lifted.program
    sig = parse_signature(lifted.program)
    rate = next(v for v in sig.template if v.name == "discount_rate_pct")
    assert "percent as written" in rate.description


def test_inline_literals_are_named_from_the_request_and_structural_constants_stay(sandbox):
    source = "def solve():\n    return round(6000 / (1 + 0.08) + 6000 / (1 + 0.08) ** 2, 2)\n"
    lifted = lift(source, "Cash inflows of $6,000 per year for 2 years at a discount rate of 8%.")
    assert lifted is not None
    assert lifted.defaults == {"cash_inflows": 6000, "discount_rate_pct": 8, "years": 2}
    assert "(1 + discount_rate_pct / 100)" in lifted.program  # the 1 stays a constant
    assert (
        "round(" in lifted.program and ", 2)" in lifted.program
    )  # round()'s digits are not an input
    assert sandbox.run(lifted.program, {}).value == sandbox.run(source, {}).value


def test_scaled_amounts_and_negative_values_match_what_is_written():
    source = "def solve():\n    exports = 120000000\n    imports = 200000000\n    return exports - imports\n"
    lifted = lift(
        source, "Corellia exported products valued at $120 million and imported $200 million."
    )
    assert lifted.defaults == {"exports": 120000000, "imports": 200000000}
    lifted = lift(
        "def solve():\n    change = -5\n    return change * 2\n", "The price changed by -5 dollars."
    )
    assert lifted.defaults == {"change": -5}


def test_equal_values_written_twice_become_two_parameters():
    source = "def solve():\n    r = 5 / 100\n    return 2000 * r * 5\n"
    lifted = lift(
        source, "You invest $2,000 at an annual interest rate of 5%. What interest after 5 years?"
    )
    assert lifted is not None and len(lifted.defaults) == 3
    assert sorted(lifted.defaults.values()) == [5, 5, 2000]


def test_dict_values_are_named_by_their_keys_and_request_words_become_a_string_parameter(sandbox):
    source = 'def solve():\n    return {"keywords": "red running shoes", "max_price": 40.0}\n'
    lifted = lift(source, "i want red running shoes, and price lower than 40.00 dollars")
    assert lifted is not None
    assert lifted.defaults == {"keywords": "red running shoes", "max_price": 40}
    template = {v.name: v for v in parse_signature(lifted.program).template}
    assert (
        template["keywords"].type == "string" and template["max_price"].type == "number"
    )  # 40 is a price
    assert (
        template["keywords"].description == "keywords, words taken from the request"
    )  # no example to copy
    assert sandbox.run(lifted.program, {"keywords": "blue hat", "max_price": 10}).value == {
        "keywords": "blue hat",
        "max_price": 10,
    }


def test_a_list_of_the_requests_words_becomes_one_text_parameter_split_back(sandbox):
    source = (
        'def solve():\n    keywords = ["toothbrush", "easy to carry"]\n    max_price = 20.00\n'
        '    return {"keywords": keywords, "max_price": str(max_price)}\n'
    )
    lifted = lift(source, "i want a toothbrush easy to carry, and price lower than 20.00 dollars")
    assert lifted.defaults == {"keywords": "toothbrush easy to carry", "max_price": 20}
    assert sandbox.run(lifted.program, {"keywords": "red hat", "max_price": 9}).value == {
        "keywords": ["red", "hat"],
        "max_price": "9",
    }


def test_a_number_written_as_a_string_becomes_a_number_parameter():
    source = 'def solve():\n    return {"keywords": "topper birthday cake", "max_price": "20.00"}\n'
    lifted = lift(
        source, "i'm looking for a topper for a birthday cake, and price lower than 20.00 dollars"
    )
    assert lifted.defaults == {"keywords": "topper birthday cake", "max_price": 20}


def test_a_string_not_made_of_the_requests_words_stays():
    source = 'def solve():\n    return {"keywords": "sneakers", "max_price": 40.0}\n'
    lifted = lift(source, "i want red running shoes, and price lower than 40.00 dollars")
    assert lifted.defaults == {"max_price": 40}


@pytest.mark.parametrize(
    "source, text",
    [
        ("def solve(x=1):\n    return x\n", "x is 1"),  # already parameterized
        (
            "def solve():\n    return 42\n",
            "What is six times seven?",
        ),  # no literal is written in the request
        ("def other():\n    return 3\n", "3 apples"),  # no solve()
        ("import os\ndef solve():\n    return 3\n", "3 apples"),  # outside the allow-list
    ],
)
def test_programs_with_nothing_to_lift_give_none(source, text):
    assert lift(source, text) is None


def test_helpers_and_imports_around_solve_are_kept(sandbox):
    source = (
        "import math\n\ndef helper(x):\n    return math.sqrt(x)\n\n"
        "def solve():\n    area = 49\n    return helper(area)\n"
    )
    lifted = lift(source, "A square has an area of 49 square meters; how long is a side?")
    assert lifted.defaults == {"area": 49}
    assert sandbox.run(lifted.program, {"area": 81}).value == 9.0


def test_own_values_reads_another_example_under_the_same_names_only():
    other = (
        NPV_PLAIN.replace("6000", "1000").replace("0.08", "0.1").replace("years = 4", "years = 2")
    )
    text = "Cash inflows of $1,000 a year for 2 years, discounted at 10%."
    names = lift(NPV_PLAIN, NPV_TEXT).defaults
    assert own_values(names, other, text) == {
        "cash_inflow": 1000,
        "discount_rate_pct": 10,
        "years": 2,
    }
    renamed = other.replace("cash_inflow", "flow")
    assert own_values(names, renamed, text) is None
    assert program_inputs("def solve(a=3, b=4):\n    return a + b\n", "") == {"a": 3, "b": 4}


def test_an_extracted_text_for_a_lifted_string_must_be_words_of_the_request():
    from minicache.hit.extraction import ExtractionError, check_grounded

    source = 'def solve():\n    return {"keywords": "red running shoes", "max_price": 40.0}\n'
    template = parse_signature(
        lift(source, "i want red running shoes under 40.00 dollars").program
    ).template
    request = "i need a blue rain jacket, and price lower than 60.00 dollars"
    check_grounded(template, {"keywords": "blue rain jacket", "max_price": 60}, request)
    with pytest.raises(ExtractionError, match="running, shoes"):
        check_grounded(template, {"keywords": "red running shoes", "max_price": 60}, request)
    with pytest.raises(ExtractionError, match="empty"):
        check_grounded(template, {"keywords": " ", "max_price": 60}, request)


def test_a_whole_default_is_typed_integer_only_where_the_program_needs_an_integer():
    """The NPV program counts years in ``range``: ``years`` is an integer; the cash inflow, whole in
    this example, is a quantity, so a later request's 6,250.50 is a value for it, not a type error."""
    by_name = {v.name: v for v in parse_signature(lift(NPV_PLAIN, NPV_TEXT).program).template}
    assert {name: v.type for name, v in by_name.items()} == {
        "cash_inflow": "number",
        "discount_rate_pct": "number",
        "years": "integer",
    }
    values = {"cash_inflow": 6250.5, "discount_rate_pct": 7.5, "years": 3}
    assert check_types(list(by_name.values()), values) == values


@pytest.mark.parametrize(
    "body, integers",
    [
        ("return round(x * 1.1, digits)", {"digits"}),
        ("months = years * 12\n    return sum(x for _ in range(months))", {"years"}),
        ("return [x] * copies", {"copies"}),
        ("return math.comb(x, k)", {"x", "k"}),
        ("return sorted([x, 2, 3])[k]", {"k"}),
        ("return x ** k / k", set()),
    ],
    ids=[
        "round digits",
        "through an assignment",
        "list repeat",
        "math.comb",
        "index",
        "plain arithmetic",
    ],
)
def test_integer_parameters_are_the_names_python_needs_as_integers(body, integers):
    source = f"import math\ndef solve(x=4, k=2, digits=2, years=3, copies=2):\n    {body}\n"
    fn = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef))
    assert integer_parameters(fn) & {"x", "k", "digits", "years", "copies"} == integers
    assert {v.name for v in parse_signature(source).template if v.type == "integer"} == integers


def test_a_signature_without_defaults_reads_only_when_allowed_and_fills_in_around_its_comments():
    source = (
        "def solve(P,  # principal, dollars\n          r_pct: float,  # rate, percent\n          t=2):\n"
        "    return P * r_pct / 100 * t\n"
    )
    with pytest.raises(ProgramShapeError, match="no default"):
        parse_signature(source)
    loose = parse_signature(source, require_defaults=False)
    assert loose.defaults == {"P": None, "r_pct": None, "t": 2}
    assert [(v.name, v.type, v.unit) for v in loose.template] == [
        ("P", "number", "dollars"),
        ("r_pct", "number", "percent"),
        ("t", "number", ""),
    ]
    filled = fill_defaults(source, {"P": 1500, "r_pct": 2.8})
    assert filled.splitlines()[:2] == [
        "def solve(P=1500,  # principal, dollars",
        "          r_pct: float=2.8,  # rate, percent",
    ]
    assert parse_signature(filled).defaults == {"P": 1500, "r_pct": 2.8, "t": 2}
    with pytest.raises(ProgramShapeError, match="no value for parameter 'P'"):
        fill_defaults(source, {"r_pct": 2.8})


def test_fill_defaults_counts_columns_as_python_does_with_names_outside_ascii():
    source = "def solve(β, r_m):  # beta, then the market return\n    return β * r_m\n"
    assert fill_defaults(source, {"β": 1.4, "r_m": 7.5}).startswith("def solve(β=1.4, r_m=7.5):")
