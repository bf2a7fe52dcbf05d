"""The micro-benchmark's linear equations: the forms its base prompts use and the forms no base prompt
has (the semantic changes), each with a builder that draws constants with an integer solution.

A form is ``(template, builder)``: the template has ``{a}``, ``{b}``, ... for constants and ``{v}``
for the unknown; ``builder(rng)`` returns the constants and the solution ``s``. The builders draw
from the seed's one ``random.Random`` in a fixed order, so the stream a seed gives never changes.
"""

from __future__ import annotations

import random

VARIABLES = ["x", "y", "z", "n", "m", "t", "k", "p", "q", "w", "u", "r", "s"]
FORMATS = [
    "{v} = <value>",
    "Answer: <value>",
    "Final answer: {v} = <value>",
    '{{"{v}": <value>}}',
    "The solution is <value>.",
]


def _ints(rng: random.Random, n: int, lo: int = 2, hi: int = 9) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


def _f1(r):  # a v + b = c
    s, (a, b) = r.randint(2, 12), _ints(r, 2, 2, 19)
    return dict(a=a, b=b, c=a * s + b, s=s)


def _f2(r):  # a v - b = c
    s, (a, b) = r.randint(3, 12), _ints(r, 2, 2, 19)
    b = min(b, a * s - 1)
    return dict(a=a, b=b, c=a * s - b, s=s)


def _f3(r):  # a v + b = c v + d
    s, c = r.randint(2, 12), r.randint(2, 7)
    a, b = c + r.randint(1, 5), r.randint(2, 19)
    return dict(a=a, b=b, c=c, d=(a - c) * s + b, s=s)


def _f4(r):  # a (v + b) = c
    s, (a, b) = r.randint(2, 12), _ints(r, 2)
    return dict(a=a, b=b, c=a * (s + b), s=s)


def _f5(r):  # a (v - b) = c
    b, a = r.randint(2, 9), r.randint(2, 9)
    s = b + r.randint(1, 9)
    return dict(a=a, b=b, c=a * (s - b), s=s)


def _f6(r):  # b + a v = c
    return _f1(r)


def _f7(r):  # a v = b v + c
    s, b = r.randint(2, 12), r.randint(2, 8)
    a = b + r.randint(1, 6)
    return dict(a=a, b=b, c=(a - b) * s, s=s)


def _f8(r):  # v / a + b = c
    a, q, b = r.randint(2, 6), r.randint(2, 9), r.randint(2, 19)
    return dict(a=a, b=b, c=q + b, s=a * q)


def _f9(r):  # a v - b = c v + d
    s, c = r.randint(3, 12), r.randint(2, 6)
    a, b = c + r.randint(1, 5), r.randint(2, 15)
    return dict(a=a, b=b, c=c, d=(a - c) * s - b, s=s) if (a - c) * s - b > 0 else _f9(r)


def _f10(r):  # c - a v = b
    s, a, b = r.randint(2, 9), r.randint(2, 6), r.randint(2, 19)
    return dict(a=a, b=b, c=b + a * s, s=s)


BASE_FORMS = [
    ("{a}{v} + {b} = {c}", _f1),
    ("{a}{v} - {b} = {c}", _f2),
    ("{a}{v} + {b} = {c}{v} + {d}", _f3),
    ("{a}({v} + {b}) = {c}", _f4),
    ("{a}({v} - {b}) = {c}", _f5),
    ("{b} + {a}{v} = {c}", _f6),
    ("{a}{v} = {b}{v} + {c}", _f7),
    ("{v}/{a} + {b} = {c}", _f8),
    ("{a}{v} - {b} = {c}{v} + {d}", _f9),
    ("{c} - {a}{v} = {b}", _f10),
]


# Forms no base prompt has: the semantic changes ("another operation").
CHANGED_FORMS = [
    (
        "{a}{v} + {b}{v} = {c}",
        lambda r: (lambda s, a, b: dict(a=a, b=b, c=(a + b) * s, s=s))(
            r.randint(2, 9), r.randint(2, 9), r.randint(2, 9)
        ),
    ),
    (
        "({v} + {b})/{a} = {c}",
        lambda r: (lambda a, b, c: dict(a=a, b=b, c=c, s=a * c - b))(
            r.randint(2, 5), r.randint(1, 5), r.randint(3, 9)
        ),
    ),
    (
        "{a}{v} - {b}{v} = {c}",
        lambda r: (
            lambda s, b: (lambda a: dict(a=a, b=b, c=(a - b) * s, s=s))(b + r.randint(1, 5))
        )(r.randint(2, 9), r.randint(2, 6)),
    ),
    (
        "{v}/{a} - {b} = {c}",
        lambda r: (lambda a, b, c: dict(a=a, b=b, c=c, s=a * (b + c)))(
            r.randint(2, 5), r.randint(1, 9), r.randint(1, 9)
        ),
    ),
    (
        "{a}{v} + {b} = {c} + {d}",
        lambda r: (
            lambda s, a, b, c: (
                dict(a=a, b=b, c=c, d=a * s + b - c, s=s)
                if a * s + b - c > 0
                else dict(a=a, b=b, c=1, d=a * s + b - 1, s=s)
            )
        )(r.randint(2, 9), r.randint(2, 7), r.randint(2, 9), r.randint(2, 9)),
    ),
    (
        "{b} = {a}{v} - {c}",
        lambda r: (lambda s, a, c: dict(a=a, b=a * s - c, c=c, s=s))(
            r.randint(3, 9), r.randint(2, 7), r.randint(1, 5)
        ),
    ),
    (
        "{a}({v} - {b}) + {c} = {d}",
        lambda r: (lambda s, a, b, c: dict(a=a, b=b, c=c, d=a * (s - b) + c, s=s))(
            r.randint(6, 12), r.randint(2, 5), r.randint(1, 5), r.randint(2, 9)
        ),
    ),
    (
        "{a}{v} + {b} + {c} = {d}",
        lambda r: (lambda s, a, b, c: dict(a=a, b=b, c=c, d=a * s + b + c, s=s))(
            r.randint(2, 9), r.randint(2, 9), r.randint(2, 9), r.randint(2, 9)
        ),
    ),
    (
        "{a}{v} = {b} + {c}",
        lambda r: (lambda s, a, b: dict(a=a, b=b, c=a * s - b, s=s))(
            r.randint(3, 9), r.randint(2, 7), r.randint(1, 5)
        ),
    ),
    (
        "{a}({v} + {b}) = {c}({v} + {d})",
        lambda r: (
            lambda s, c, b: (
                lambda a: (
                    dict(a=a, b=b, c=c, d=(a * (s + b)) // c - s, s=s)
                    if (a * (s + b)) % c == 0 and (a * (s + b)) // c - s > 0
                    else dict(a=2 * c, b=b, c=c, d=2 * (s + b) - s, s=s)
                )
            )(c + r.randint(1, 3))
        )(r.randint(2, 9), r.randint(2, 4), r.randint(1, 6)),
    ),
    (
        "{v} - {b} = {c}/{a}",
        lambda r: (lambda a, b, q: dict(a=a, b=b, c=a * q, s=b + q))(
            r.randint(2, 6), r.randint(1, 9), r.randint(2, 9)
        ),
    ),
]
