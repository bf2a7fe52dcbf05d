"""The numbers written in a request: every number with where it is written and its readings
("2.4 million" is 2.4 and 2,400,000; "quarterly" is 4), for rules, alignment and the small model's
candidate choice; and the part of a long request that holds them (what the small model reads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_NUMBER = re.compile(
    r"(?<![\w.])(?P<neg>-|−)?(?P<cur>[$€£¥])?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?P<pct>\s?%| percent\b)?(?:\s?(?P<scale>million|billion|thousand|mn|bn)\b)?",
    re.I,
)
_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "half": 0.5,
    "twice": 2,
    "double": 2,
    "quarterly": 4,
    "monthly": 12,
    "semi-annually": 2,
    "semiannually": 2,
    "annually": 1,
    "daily": 365,
    "weekly": 52,
}
_WORD_RE = re.compile(r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b", re.I)
_SCALES = {"thousand": 1e3, "million": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9}


@dataclass
class Candidate:
    value: float
    start: int
    end: int
    text: str


def _clean(value: float) -> float | int:
    return int(value) if float(value).is_integer() and abs(value) < 1e15 else round(value, 10)


def find_candidates(text: str) -> list[Candidate]:
    """Every number written in ``text``, in order, plus its scaled value ("2.4 million" -> 2400000).

    Years and other numbers are all candidates: the model, or a rule, decides which one a variable is.
    """
    found: list[Candidate] = []
    for m in _NUMBER.finditer(text):
        raw = float(m.group("num").replace(",", ""))
        if m.group("neg"):
            raw = -raw
        found.append(Candidate(_clean(raw), m.start(), m.end(), m.group(0)))
        if m.group("scale"):
            found.append(
                Candidate(
                    _clean(raw * _SCALES[m.group("scale").lower()]), m.start(), m.end(), m.group(0)
                )
            )
    for m in _WORD_RE.finditer(text):
        found.append(Candidate(_WORDS[m.group(1).lower()], m.start(), m.end(), m.group(0)))
    found.sort(key=lambda c: (c.start, c.end))
    return found


def candidate_values(text: str) -> list[float | int]:
    seen: list[float | int] = []
    for c in find_candidates(text):
        if c.value not in seen:
            seen.append(c.value)
    return seen


LONG_TEXT = (
    2000  # characters past which the small model reads only the sentences around the numbers
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def relevant_text(text: str, limit: int = LONG_TEXT) -> str:
    """``text`` as the small model reads it: whole when short; past ``limit`` characters, its first
    sentence (where a question is: the context follows it) and the sentences (or lines: a table's
    rows) that write a number, each with the sentence before it (which may say what the number is),
    in order. Filler that writes no number costs the model its prefill and nothing else (a hit with
    2,048 tokens of it took 23 s); every number of the text stays, so the candidate values are the same."""
    if len(text) <= limit:
        return text
    parts = [p.strip() for p in _SENTENCE_END.split(text) if p.strip()]
    keep = {0}
    for i, part in enumerate(parts):
        if find_candidates(part):
            keep.update((i - 1, i) if i else (i,))
    return "\n".join(parts[i] for i in sorted(keep))


@dataclass
class Position:
    """One place in the text where a number is written, with its readings ([raw] or [raw, scaled])."""

    start: int
    end: int
    readings: list[Candidate]
    kind: str

    def values(self) -> list[Any]:
        return [c.value for c in self.readings]
