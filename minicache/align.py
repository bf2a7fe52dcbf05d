"""Zero-model extraction by alignment with one validated example.

A validated example of a group says, for each variable, *which* number of its request the variable
took. That number has a **kind** (a percentage, a money amount, a count followed by a unit such as
"5 years", a number word such as "quarterly", or a plain number), an optional scale reading ("2.4
million" read as 2,400,000) and **cue words** around it ("annual cash *inflows* of $6,000"). An
*exemplar* keeps exactly that, with the numbers masked, so it is learned from a single example,
where a learned rule (:func:`minicache.extraction.learn_rules`) needs two that agree.

A new request aligns with an exemplar when:

* every slot finds a number of its kind, and, where the request holds several of that kind, the cue
  words pick one of them strictly better than the others;
* no number of another kind has better cues for the slot (the words point elsewhere);
* no two slots take the same number;
* no number is left over of a kind the template uses (an extra "$13,000 upfront" next to the cash
  inflow means the request may not be the computation the entry does), unless the exemplar's own
  request held the same number unused (a constant of the wording).

Anything less is not an alignment: the caller asks the small model instead, or refuses the hit. The
slots that did align on their own are still returned, so that a model's choice can be checked
against them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .extraction import Candidate, find_candidates
from .store.base import Variable

_WORD = re.compile(r"[a-z]+")
_UNITS = {"year", "month", "day", "week", "quarter", "period", "hour", "minute", "share", "unit", "item",
          "employee", "customer", "time", "installment", "payment", "person", "people"}
_STOP = set("a an the and or of for is are was were be by at to in on with from as if its it this that what how "
            "much many per each given has have had will would which who its their our your".split())
BEFORE = 6  # cue window: words before a number


@dataclass
class Position:
    """One place in the text where a number is written, with its readings ([raw] or [raw, scaled])."""

    start: int
    end: int
    readings: list[Candidate]
    kind: str

    def values(self) -> list[Any]:
        return [c.value for c in self.readings]


def number_kind(text: str, cand: Candidate) -> str:
    """What sort of number this is, from how it is written: pct | money | unit:<unit> | word:<word> | plain."""
    written = cand.text.lower()
    if "%" in written or "percent" in written:
        return "pct"
    if re.search(r"[$€£¥]", written):
        return "money"
    if written.isalpha() or "-" in written and written.replace("-", "").isalpha():
        return f"word:{written}"
    after = re.match(r"\s*([a-z]+)", text[cand.end:cand.end + 24].lower())
    if after:
        word = after.group(1)
        if word in ("dollar", "dollars", "usd"):
            return "money"
        singular = word[:-1] if word.endswith("s") else word
        if singular in _UNITS:
            return f"unit:{singular}"
    return "plain"


def positions(text: str) -> list[Position]:
    """The numbers of ``text`` grouped by where they are written, in order."""
    found: dict[int, Position] = {}
    for cand in find_candidates(text):
        pos = found.get(cand.start)
        if pos is None:
            found[cand.start] = Position(cand.start, cand.end, [cand], number_kind(text, cand))
        elif cand.value not in pos.values():
            pos.readings.append(cand)
    return sorted(found.values(), key=lambda p: p.start)


def stems(words: list[str]) -> list[str]:
    return [w[:5] for w in words if len(w) >= 3 and w not in _STOP]


def words_before(text: str, pos: Position, floor: int) -> list[str]:
    """Up to BEFORE words before a number, nearest first, not reaching back past ``floor`` (the end of
    the previous number): "current assets are $45,000 and current liabilities are $30,000" gives the
    second number "are, liabilities, current, and" and not the first number's words."""
    return _WORD.findall(text[max(floor, pos.start - 80):pos.start].lower())[::-1][:BEFORE]


def floors(pos: list[Position]) -> dict[int, int]:
    """For each position, where its words may begin: the end of the number before it."""
    return {p.start: (pos[i - 1].end if i else 0) for i, p in enumerate(pos)}


def cue_score(words: list[str], cues: set[str], weights: dict[str, float] | None = None) -> float:
    """How well the words before a number (nearest first) match ``cues``: a cue word right before
    the number scores 6, six words back 1, times its weight (1 unless given)."""
    return sum((BEFORE + 1 - d) * (weights or {}).get(w[:5], 1.0)
               for d, w in enumerate(words, start=1) if w not in _STOP and w[:5] in cues)


def learn_exemplar(template: list[Variable], text: str, values: dict[str, Any]) -> dict[str, Any] | None:
    """An exemplar from one validated (request text, values), or None if a value is not written exactly
    once in the text (then nobody can tell which number it was), a variable is text, or two
    variables took the same number."""
    pos = positions(text)
    floor = floors(pos)
    slots: dict[str, Any] = {}
    taken: set[int] = set()
    for var in template:
        if var.type == "string":
            return None  # text variables are left to the small model (see docs/hits.md)
        value = values.get(var.name)
        where = [(p, i) for p in pos for i, v in enumerate(p.values()) if v == value]
        if len(where) != 1 or where[0][0].start in taken:
            return None
        p, reading = where[0]
        taken.add(p.start)
        cues = set(stems(words_before(text, p, floor[p.start])))
        slots[var.name] = {"kind": p.kind, "scaled": reading == 1, "cues": sorted(cues)}
    constants = [[p.kind, p.values()[0]] for p in pos if p.start not in taken]
    return {"slots": slots, "constants": constants}


@dataclass
class Alignment:
    values: dict[str, Any]  # every slot that aligned on its own
    complete: bool  # all slots aligned, distinct, and nothing of a used kind left over
    reason: str = ""


def _weights(slots: dict[str, Any]) -> dict[str, float]:
    """A cue word shared by k slots ("current" in current assets / current liabilities) counts 1/k."""
    count: dict[str, int] = {}
    for slot in slots.values():
        for s in slot["cues"]:
            count[s] = count.get(s, 0) + 1
    return {s: 1.0 / n for s, n in count.items()}


def align(exemplar: dict[str, Any], text: str) -> Alignment:
    """Align ``text`` with ``exemplar`` (see the module docstring for the conditions)."""
    pos = positions(text)
    slots = exemplar.get("slots") or {}
    weights = _weights(slots)
    floor = floors(pos)
    words = {p.start: words_before(text, p, floor[p.start]) for p in pos}
    chosen: dict[str, Position] = {}
    reasons: list[str] = []
    for name, slot in slots.items():
        cues = set(slot["cues"])
        score = {p.start: cue_score(words[p.start], cues, weights) for p in pos}
        same = [p for p in pos if p.kind == slot["kind"] and (not slot["scaled"] or len(p.readings) > 1)]
        if not same:
            reasons.append(f"no {slot['kind']} number for {name}")
            continue
        same.sort(key=lambda p: -score[p.start])
        best = score[same[0].start]
        if len(same) > 1 and (best == 0 or best == score[same[1].start]):
            reasons.append(f"{len(same)} {slot['kind']} numbers could be {name}")
            continue
        elsewhere = max((score[p.start] for p in pos if p not in same), default=0.0)
        if elsewhere > best:
            reasons.append(f"the words around another number point to {name}")
            continue
        chosen[name] = same[0]
    starts = [p.start for p in chosen.values()]
    for name in [n for n, p in chosen.items() if starts.count(p.start) > 1]:
        reasons.append(f"{name} shares its number with another variable")
        del chosen[name]
    values = {name: p.readings[1 if slots[name]["scaled"] else 0].value for name, p in chosen.items()}
    if len(chosen) < len(slots):
        return Alignment(values, False, "; ".join(reasons))
    kinds = {slot["kind"] for slot in slots.values()}
    used = {p.start for p in chosen.values()}
    constants = [tuple(c) for c in exemplar.get("constants") or []]
    for p in pos:
        if p.start not in used and p.kind in kinds and (p.kind, p.values()[0]) not in constants:
            return Alignment(values, False, f"{p.readings[0].text.strip()!r} is left over, a {p.kind} number "
                                            "like the template's")
    return Alignment(values, True)


def check_exemplar(exemplar: dict[str, Any], validated: list[tuple[str, dict[str, Any]]]) -> bool:
    """An exemplar is kept only if every validated request it aligns with gets its validated values."""
    for text, values in validated:
        found = align(exemplar, text)
        if found.complete and any(found.values[k] != values.get(k) for k in found.values):
            return False
    return True


def learn_exemplars(template: list[Variable], validated: list[tuple[str, dict[str, Any]]],
                    limit: int = 3) -> list[dict[str, Any]]:
    """Up to ``limit`` exemplars, the first validated example's first; each one checked on the others."""
    out: list[dict[str, Any]] = []
    for text, values in validated:
        exemplar = learn_exemplar(template, text, values)
        if exemplar is not None and check_exemplar(exemplar, validated) and exemplar not in out:
            out.append(exemplar)
        if len(out) >= limit:
            break
    return out
