"""A program's computation up to names (minicache.programs.computation): one normalisation, with
parameters named by their use (group merges) or by the request's numbers they hold
(self-consistency)."""

from __future__ import annotations

import pytest

from minicache.programs.computation import ParameterNaming, computation_of, parameterized

BY_USE, BY_NUMBER = ParameterNaming.BY_USE, ParameterNaming.BY_REQUEST_NUMBER
REQUEST = "The current ratio: assets of 10 and debts of 4."
RIGHT = "def solve(assets=10, debts=4):\n    return assets / debts\n"
SWAPPED = "def solve(assets=4, debts=10):\n    return assets / debts\n"  # the values misread


def test_a_swap_of_two_quantities_is_one_shape_by_use_and_another_by_the_requests_numbers():
    right, swapped = computation_of(RIGHT, BY_USE), computation_of(SWAPPED, BY_USE)
    assert right is not None and swapped is not None and right.shape == swapped.shape
    right_n = computation_of(RIGHT, BY_NUMBER, request=REQUEST)
    swapped_n = computation_of(SWAPPED, BY_NUMBER, request=REQUEST)
    assert right_n is not None and swapped_n is not None and right_n.shape != swapped_n.shape
    assert right_n.roles == ("assets", "debts")  # q0 is 10, the assets; q1 is 4, the debts


@pytest.mark.parametrize("naming", list(ParameterNaming))
def test_docstrings_annotations_defaults_and_comments_are_no_part_of_the_computation(naming):
    plain = computation_of(RIGHT, naming, request=REQUEST)
    dressed = computation_of(
        "def solve(assets: float = 10,  # total assets, USD\n"
        "          debts: float = 4) -> float:\n"
        '    """The current ratio."""\n'
        "    return assets / debts  # assets over debts\n",
        naming,
        request=REQUEST,
    )
    assert plain is not None and dressed is not None and plain.shape == dressed.shape


def test_literals_written_for_the_request_are_lifted_when_named_by_its_numbers():
    literal = computation_of("def solve():\n    return 10 / 4\n", BY_NUMBER, request=REQUEST)
    named = computation_of(RIGHT, BY_NUMBER, request=REQUEST)
    assert literal is not None and named is not None and literal.shape == named.shape


def test_naming_by_the_requests_numbers_needs_the_request():
    with pytest.raises(ValueError, match="needs the request"):
        computation_of(RIGHT, BY_NUMBER)


@pytest.mark.parametrize(
    "program",
    [
        "def solve(*values):\n    return sum(values)\n",
        "def solve(a=1):\n    return a\n\ndef solve(b=2):\n    return b\n",
        "def solve(a=1, b=2):\n    return a +\n",
        "def answer(a=1, b=2):\n    return a / b\n",
    ],
)
def test_anything_but_one_plain_solve_is_no_computation(program):
    assert computation_of(program, BY_USE) is None


def test_two_wordings_of_one_computation_are_one_shape_by_use_but_not_by_the_requests_numbers():
    # The liabilities written first: the same division takes the request's second number first.
    reversed_request = "Debts of 4 against assets of 10: what is the current ratio?"
    reversed_program = "def solve():\n    debts = 4\n    assets = 10\n    return assets / debts\n"
    lifted = parameterized(reversed_program, reversed_request)
    assert lifted is not None and lifted[1] == {"debts": 4, "assets": 10}
    by_use = computation_of(lifted[0], BY_USE), computation_of(RIGHT, BY_USE)
    assert by_use[0] is not None and by_use[1] is not None
    assert by_use[0] == by_use[1]  # one shape, the parameters in the same roles
    by_number = (
        computation_of(reversed_program, BY_NUMBER, request=reversed_request),
        computation_of(RIGHT, BY_NUMBER, request=REQUEST),
    )
    assert by_number[0] is not None and by_number[1] is not None
    assert by_number[0].shape != by_number[1].shape


def test_a_program_with_nothing_of_its_request_to_lift_has_no_parameters():
    assert parameterized("def solve():\n    return 2.5\n", REQUEST) is None


P_E = "A share trades at $35 and earns $3.5 a share. What is its P/E ratio?"


SAMPLES = [  # three samples of one computation the target wrote for P_E
    "import math\ndef solve():\n    return round(35 / 3.5, 2)\n",
    "from math import sqrt\ndef solve():\n    price = 35\n    eps = 3.5\n"
    "    ratio = price / eps\n    return round(ratio, 2)\n",
    "def solve(price=35, eps=3.5):\n    ratio = price / eps\n    return ratio\n",
    "def solve(price=35, eps=3.5):\n    return round(price / eps, ndigits=2)\n",
]
PLAIN = "def solve(price=35, eps=3.5):\n    return price / eps\n"


@pytest.mark.parametrize(
    ("program", "naming"),
    [(p, BY_NUMBER) for p in SAMPLES] + [(SAMPLES[2], BY_USE)],  # by use, literals are not lifted
)
def test_imports_intermediate_names_and_a_rounded_answer_are_no_part_of_the_computation(
    program, naming
):
    # Counted apart, samples that differ only so never agree.
    plain = computation_of(PLAIN, naming, request=P_E)
    other = computation_of(program, naming, request=P_E)
    assert plain is not None and other is not None and plain.shape == other.shape


def test_a_rounding_inside_the_computation_and_a_swap_still_count():
    plain = computation_of("def solve(a=35, b=3.5):\n    return a / b\n", BY_NUMBER, request=P_E)
    inner = computation_of(
        "def solve(a=35, b=3.5):\n    return round(a / b) * 2\n", BY_NUMBER, request=P_E
    )
    swapped = computation_of(
        "def solve(a=35, b=3.5):\n    r = b / a\n    return round(r, 2)\n", BY_NUMBER, request=P_E
    )
    assert plain is not None and inner is not None and swapped is not None
    assert len({plain.shape, inner.shape, swapped.shape}) == 3


def test_a_body_that_is_not_straight_line_is_compared_as_written():
    looped = "def solve(a=35, b=3.5):\n    t = 0\n    for _ in range(2):\n        t = t + a\n    return t / b\n"
    twice = "def solve(a=35, b=3.5):\n    t = a\n    t = t / b\n    return t\n"
    for program in (looped, twice):
        found = computation_of(program, BY_USE)
        assert found is not None and "\n    v0 = " in found.shape  # the local is kept, renamed


@pytest.mark.parametrize(
    ("program", "kept"),
    [
        ("def solve(a=35, b=3.5):\n    return round(a / b)\n", "round("),  # whole items
        ("def solve(a=35, b=3.5):\n    r = a / b\n    return round(r, 0)\n", "round("),
        ("def solve(a=35, b=3.5):\n    return round(a / b, ndigits=0)\n", "round("),
        ("def solve(a=35, b=3.5, n=2):\n    return round(a / b, n)\n", "round("),  # counted
        (
            "def solve(a=35, b=3.5):\n    n = a * 2\n    return sum((n for n in range(int(b))))\n",
            "v0 = ",  # a name a generator binds again: substituting it would capture it
        ),
        ("from math import floor\ndef solve(a=35, b=3.5):\n    return floor(a / b)\n", "import"),
    ],
)
def test_what_changes_an_answer_stays_part_of_the_computation(program, kept):
    found = computation_of(program, BY_USE)
    assert found is not None and kept in found.shape


def test_an_import_a_helper_uses_stays_part_of_the_computation():
    program = (
        "import math\ndef root(x):\n    return math.sqrt(x)\n"
        "def solve(a=35, b=3.5):\n    return root(a / b)\n"
    )
    found = computation_of(program, BY_USE)
    assert found is not None and "import math" in found.shape
