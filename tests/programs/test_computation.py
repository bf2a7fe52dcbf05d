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
