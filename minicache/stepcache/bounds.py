"""How large a number StepCache takes: at most ``MAX_DIGITS`` digits, and values whose parts stay
below ``10 ** MAX_DIGITS``.

StepCache's checks are exact arithmetic on the request's numbers, and what they cost grows with
the numbers' length: three 4,000-digit numbers took seconds of CPU per request, and past the
interpreter's limits they fail outright (an int longer than 4,300 digits cannot become a string; a
fraction beyond a float's range cannot be rounded for display). No worked solution needs such
numbers, so a request holding one is not StepCache's: it takes the program path like any request
StepCache does not recognise. Products and quotients of the request's own numbers are bounded too
(a product of several 100-digit numbers is a 300-digit one), and so is the solution.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction

MAX_DIGITS = 100
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_LIMIT = 10**MAX_DIGITS


def longest_number(text: str) -> int:
    """The digits in the longest number of ``text`` (its decimal places included)."""
    return max((sum(c.isdigit() for c in m.group(0)) for m in _DIGITS.finditer(text)), default=0)


def numbers_fit(text: str) -> bool:
    """Whether every number written in ``text`` has at most ``MAX_DIGITS`` digits."""
    return longest_number(text) <= MAX_DIGITS


def values_fit(values: Iterable[Fraction]) -> bool:
    """Whether every value's numerator and denominator stay below ``10 ** MAX_DIGITS``: then its
    products and quotients with another such value stay within a float's range."""
    return all(abs(v.numerator) < _LIMIT and v.denominator < _LIMIT for v in values)
