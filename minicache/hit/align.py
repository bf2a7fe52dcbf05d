"""Zero-model extraction by alignment with one validated example.

A validated example of a group says, for each variable, *which* number of its request the variable
took. That number has a **kind** (a percentage, a money amount, a count followed by a unit such as
"5 years" or "5-year", a number word such as "twice", or a word for how often a year: "quarterly" and
"monthly" are one kind, ``word:per-year``), or a plain number), an optional scale reading ("2.4
million" read as 2,400,000) and **cue words** around it ("annual cash *inflows* of $6,000"). An
*exemplar* keeps exactly that, with the numbers masked, so it is learned from a single example
(:mod:`minicache.hit.exemplars`; kinds and cue words: :mod:`minicache.hit.cues`), where a learned
rule (:func:`minicache.hit.rules.learn_rules`) needs two that agree.

A new request aligns with an exemplar when:

* every slot finds a number of its kind, and, where the request holds several of that kind, the cue
  words pick one of them strictly better than the others;
* no number of another kind has better cues for the slot (the words point elsewhere);
* no two slots take the same number;
* no number is left over of a kind the template uses (an extra "$13,000 upfront" next to the cash
  inflow means the request may not be the computation the entry does), unless the exemplar's own
  request held the same number unused (a constant of the wording).

**By elimination** (:attr:`Alignment.by_elimination`): where the cue words settle every slot but one
of some kind (a slot that took a number only by cue words it shares with a slot that has a word of
its own there is unsettled: ``_sharing``), and exactly one number of that kind is left, that number
is the slot's, if no number of another kind has better cues for it and no other symbol ("P_1 =") is
written beside it. One exemplar's reading alone is not enough (a slot it settled may be wrong, and
the leftover follows it): the hit path takes it only when every exemplar of the entry, two at
least, reads the request the same way (:meth:`minicache.hit.verify.HitVerifier.aligned`).

A **text variable** (WebShop's search keywords) is a stretch of the request, not a number
(:mod:`minicache.hit.align_text`). Numbers inside its region belong to the text ("18 inch hair
extensions") and are never read as a numeric slot or left over.

Anything less is not an alignment: the caller asks the small model instead, or refuses the hit. The
slots that did align on their own are still returned, so that a model's choice can be checked
against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minicache.hit.align_text import align_text
from minicache.hit.cues import PER_YEAR, cue_score, number_words, positions
from minicache.hit.tables import align_table
from minicache.programs.numbers import Position
from minicache.programs.signature import words_match

__all__ = ["Alignment", "align", "same_value", "same_values"]


@dataclass
class Alignment:
    values: dict[str, Any]  # every slot that aligned on its own
    complete: bool  # all slots aligned, distinct, and nothing of a used kind left over
    reason: str = ""
    # Not complete, but every slot the cue words left open takes the one number of its kind left
    # (module docstring, "By elimination"): the whole reading, which the caller may take only when
    # every exemplar reads the same.
    by_elimination: dict[str, Any] | None = None


def _weights(slots: dict[str, Any]) -> dict[str, float]:
    """A cue word shared by k slots ("current" in current assets / current liabilities) counts 1/k."""
    count: dict[str, int] = {}
    for slot in slots.values():
        for s in slot["cues"]:
            count[s] = count.get(s, 0) + 1
    return {s: 1.0 / n for s, n in count.items()}


def align(exemplar: dict[str, Any], text: str) -> Alignment:
    """Align ``text`` with ``exemplar`` (see the module docstring for the conditions)."""
    if "table" in exemplar:  # minicache.hit.tables
        read, why = align_table(exemplar, text)
        return Alignment(read, not why, why)
    pos = positions(text)
    every = exemplar.get("slots") or {}
    reasons: list[str] = []
    texts: dict[str, Any] = {}
    for name, slot in every.items():
        if slot.get("kind") != "text":
            continue
        found = align_text(slot, text, pos)
        if isinstance(found, str):
            reasons.append(f"{name}: {found}")
            continue
        texts[name], lo, hi = found
        pos = [p for p in pos if not lo <= p.start < hi]  # numbers inside the text are the text's
    slots = {
        name: {**slot, "kind": _kind_now(slot["kind"])}
        for name, slot in every.items()
        if slot.get("kind") != "text"
    }
    weights = _weights(slots)
    words = number_words(text, pos)
    chosen: dict[str, Position] = {}
    ambiguous: set[str] = (
        set()
    )  # slots whose cue words could not pick among several numbers of their kind
    for name, slot in slots.items():
        cues = set(slot["cues"])
        score = {p.start: cue_score(words[p.start], cues, weights) for p in pos}
        same = [p for p in pos if _fits(slot, p)]
        if not same:
            reasons.append(f"no {slot['kind']} number for {name}")
            continue
        same.sort(key=lambda p: -score[p.start])
        best = score[same[0].start]
        if len(same) > 1 and (best == 0 or best == score[same[1].start]):
            reasons.append(f"{len(same)} {slot['kind']} numbers could be {name}")
            ambiguous.add(name)
            continue
        elsewhere = max((score[p.start] for p in pos if p not in same), default=0.0)
        if elsewhere > best:
            reasons.append(f"the words around another number point to {name}")
            continue
        chosen[name] = same[0]
    dropped, left_open = _sharing(slots, chosen, words, weights)
    for name in dropped + left_open:
        reasons.append(f"{name} shares its number with another variable")
        del chosen[name]
    ambiguous |= set(left_open)
    values = _read(slots, chosen) | texts
    constants = [tuple(c) for c in exemplar.get("constants") or []]
    if len(values) < len(every):
        whole = None
        if len(texts) + len(slots) == len(every) and set(slots) - set(chosen) <= ambiguous:
            whole = _eliminated(slots, chosen, pos, words, weights, constants)
        return Alignment(
            values,
            False,
            "; ".join(reasons),
            None if whole is None else _read(slots, whole) | texts,
        )
    left = _left_over(slots, chosen, pos, constants)
    if left is not None:
        return Alignment(
            values,
            False,
            f"{left.readings[0].text.strip()!r} is left over, a {left.kind} number "
            "no variable reads",
        )
    return Alignment(values, True)


def _sharing(
    slots: dict[str, Any],
    chosen: dict[str, Position],
    words: dict[int, list[tuple[str, int]]],
    weights: dict[str, float],
) -> tuple[list[str], list[str]]:
    """Of the slots that took a number another slot took too: those to drop, and those to leave open
    for elimination. Where exactly one of them has a cue word of its own beside that number and the
    others only cue words they share with other slots ("current" of current assets and current
    liabilities, in "current assets worth $65,000 and owes $45,000 to its creditors"), the one keeps
    the number and the others are left open, as if their cues had not chosen; otherwise all are
    dropped (each has words of its own there, or none has: nothing says whose the number is)."""
    dropped: list[str] = []
    left_open: list[str] = []
    starts = [p.start for p in chosen.values()]
    for start in sorted({s for s in starts if starts.count(s) > 1}):
        names = [n for n, p in chosen.items() if p.start == start]
        own = [
            n
            for n in names
            if cue_score(words[start], {c for c in slots[n]["cues"] if weights.get(c) == 1.0})
        ]
        if len(own) == 1:
            left_open += [n for n in names if n != own[0]]
        else:
            dropped += names
    return dropped, left_open


def _kind_now(kind: str) -> str:
    """A slot's kind as :func:`number_kind` names it now: exemplars stored before ``word:per-year``
    name the word itself ("word:quarterly")."""
    return "word:per-year" if kind.startswith("word:") and kind[5:] in PER_YEAR else kind


def _fits(slot: dict[str, Any], p: Position) -> bool:
    """Whether ``p`` may be the slot's number: of its kind, and, where the example kept a scale word's
    number as written (2.4 for "2.4 million"), written with one too: a number written without a
    scale word cannot be read in the units of one written with it."""
    return p.kind == slot["kind"] and (slot["scale"] != "raw" or len(p.readings) > 1)


def _read(slots: dict[str, Any], chosen: dict[str, Position]) -> dict[str, Any]:
    """The chosen numbers' values: "$1.2 million" where the example wrote "$450,000" or "2.4 million"
    read in full is the full amount."""
    return {
        name: p.readings[-1 if slots[name]["scale"] != "raw" else 0].value
        for name, p in chosen.items()
    }


def _left_over(
    slots: dict[str, Any],
    chosen: dict[str, Position],
    pos: list[Position],
    constants: list[tuple[Any, ...]],
) -> Position | None:
    """A number no slot took, of a kind the template uses, that is not a constant of the wording.
    A number of a kind the template does not use is not counted, though it may say what a slot's
    value is per (a plain "3 bikes at $400 *each*"): counting plain numbers refused "Company 2",
    "March 15" and "to 2 decimal places" too, and such a refusal teaches nothing (its reading gives
    the miss path's answer)."""
    kinds = {slot["kind"] for slot in slots.values()}
    used = {p.start for p in chosen.values()}
    return next(
        (
            p
            for p in pos
            if p.start not in used and p.kind in kinds and (p.kind, p.values()[0]) not in constants
        ),
        None,
    )


def left_beside(exemplar: dict[str, Any], text: str, values: dict[str, Any]) -> Position | None:
    """A number of ``text`` that none of ``values`` reads and that ``exemplar``'s own alignment
    would leave over (:func:`_left_over`); None for a table exemplar, which reads cells, not every
    number. Why: a reading another reader made (a keyword rule) passed where alignment saw "a
    further *10%* off" beside the discount it read, and the entry's program has no place for it."""
    if "table" in exemplar:
        return None
    slots = {n: s for n, s in (exemplar.get("slots") or {}).items() if s.get("kind") != "text"}
    pos = positions(text)
    read = [v for v in values.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    chosen = {str(p.start): p for p in pos if any(v in p.values() for v in read)}
    constants = [tuple(c) for c in exemplar.get("constants") or []]
    return _left_over(slots, chosen, pos, constants)


def _eliminated(
    slots: dict[str, Any],
    chosen: dict[str, Position],
    pos: list[Position],
    words: dict[int, list[tuple[str, int]]],
    weights: dict[str, float],
    constants: list[tuple[Any, ...]],
) -> dict[str, Position] | None:
    """Every slot the cue words left open given the one number of its kind no slot took (one open
    slot per kind), if no number of another kind has better cues for it, no symbol the slot's cues
    lack is written beside it, and nothing is left over."""
    open_slots = [name for name in slots if name not in chosen]
    used = {p.start for p in chosen.values()}
    whole = dict(chosen)
    for name in open_slots:
        slot = slots[name]
        if sum(slots[other]["kind"] == slot["kind"] for other in open_slots) != 1:
            return None
        left = [
            p
            for p in pos
            if p.start not in used and _fits(slot, p) and (p.kind, p.values()[0]) not in constants
        ]
        if len(left) != 1:
            return None
        score = {p.start: cue_score(words[p.start], set(slot["cues"]), weights) for p in pos}
        if (
            max((score[p.start] for p in pos if p.kind != slot["kind"]), default=0.0)
            > score[left[0].start]
        ):
            return None
        if {w for w, _ in words[left[0].start] if "_" in w} - set(slot["cues"]):
            return (
                None  # written beside another symbol ("P_1 = 310" left for S_1): it is that one's
            )
        whole[name] = left[0]
    return whole if open_slots and _left_over(slots, whole, pos, constants) is None else None


def same_value(a: Any, b: Any) -> bool:
    """Equal numbers; text by :func:`minicache.programs.signature.words_match`, the rule answers are compared
    by: text taken from a request is written in more than one way."""
    if isinstance(a, str) and isinstance(b, str):
        return words_match(a, b)
    return bool(a == b)


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return set(a) == set(b) and all(same_value(a[k], b[k]) for k in a)
