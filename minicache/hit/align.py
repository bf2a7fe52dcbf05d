"""Zero-model extraction by alignment with one validated example.

A validated example of a group says, for each variable, *which* number of its request the variable
took. That number has a **kind** (a percentage, a money amount, a count followed by a unit such as
"5 years" or "5-year", a number word such as "twice", or a word for how often a year: "quarterly" and
"monthly" are one kind, ``word:per-year``), or a plain number), an optional scale reading ("2.4
million" read as 2,400,000) and **cue words** around it ("annual cash *inflows* of $6,000"). An
*exemplar* keeps exactly that, with the numbers masked, so it is learned from a single example,
where a learned rule (:func:`minicache.hit.rules.learn_rules`) needs two that agree.

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

import re
from dataclasses import dataclass
from typing import Any

from minicache.hit.align_text import align_text, learn_text_slot
from minicache.hit.tables import align_table, learn_table_exemplar
from minicache.programs.numbers import Candidate, Position, find_candidates
from minicache.programs.signature import words_match
from minicache.store.base import Variable

_WORD = re.compile(r"[a-z]+")
_UNITS = {
    "year",
    "month",
    "day",
    "week",
    "quarter",
    "period",
    "hour",
    "minute",
    "share",
    "unit",
    "item",
    "employee",
    "customer",
    "time",
    "installment",
    "payment",
    "person",
    "people",
}
_STOP = set(
    "a an the and or of for is are was were be by at to in on with from as if its it this that what how "
    "much many per each given has have had will would which who its their our your".split()
)
BEFORE, AFTER = 6, 4  # words before and after a number that may describe it
# Words for how many times a year: one kind, so that an example's "quarterly" teaches where "monthly"
# goes (on formula-v23, 10 Effective Annual Rate requests the small model read, 8 hits and 2 refusals,
# align with it: scripts/align_replay.py).
PER_YEAR = {"annually", "semi-annually", "semiannually", "quarterly", "monthly", "weekly", "daily"}


def number_kind(text: str, cand: Candidate) -> str:
    """What sort of number this is, from how it is written: pct | money | unit:<unit> | word:per-year |
    word:<word> | plain.

    A number with letters glued to it ("1tb", "32gb", "4g") is a size or a model name: ``unit:`` those
    letters, whatever they are. Read as plain, the 1 of "1tb" passed for WebShop's price."""
    written = cand.text.lower()
    if "%" in written or "percent" in written:
        return "pct"
    if re.search(r"[$€£¥]", written):
        return "money"
    if written.isalpha() or "-" in written and written.replace("-", "").isalpha():
        return "word:per-year" if written in PER_YEAR else f"word:{written}"
    after = re.match(
        r"(?:\s*|-)([a-z]+)", text[cand.end : cand.end + 24].lower()
    )  # "5 years", "5-year"
    if after:
        word = after.group(1)
        if word in ("dollar", "dollars", "usd"):
            return "money"
        singular = word[:-1] if word.endswith("s") else word
        if singular in _UNITS:
            return f"unit:{singular}"
        if text[cand.end : cand.end + 1].isalpha():
            return f"unit:{word}"
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


def stem(word: str) -> str:
    """A word's first five letters; a symbol (``r_p``, ``σ_p``) whole: it names one variable exactly."""
    return word if "_" in word else word[:5]


def stems(words: list[str]) -> list[str]:
    return [stem(w) for w in words if (len(w) >= 3 or "_" in w) and w not in _STOP]


_SEPARATORS = {
    ",",
    ";",
    ".",
    ":",
    "!",
    "?",
    "and",
    "while",
    "whereas",
    "but",
    "with",
    "against",
    "versus",
    "compared",
}  # "$222,000 in current assets compared to $127,000 in current liabilities"
# Words, and symbols written with an underscore, in any script ("(R_p)", "(σ_p)": a request that names
# its variables so says which number is which, where the words around two numbers are alike).
_TOKEN = re.compile(r"[^\W\d_]+(?:_[^\W_]+)+|[a-z]+|[,;.:!?]")


def _is_word(token: str) -> bool:
    return token[0].isalpha()


def number_words(text: str, pos: list[Position]) -> dict[int, list[tuple[str, int]]]:
    """For each number, the words that describe it with their weight (nearer weighs more).

    Words before a number count (up to BEFORE, weights 6..1), and so do words right after it up to
    the next separator (up to AFTER, weights 4..1): between two numbers, the words before the first
    separator ("," "and" "while" ...) describe the earlier number ("$750,000 *in total liabilities*
    and $250,000 in shareholders' equity"), the rest the later one ("... assets are $45,000 and
    *current liabilities are* $30,000")."""
    out: dict[int, list[tuple[str, int]]] = {p.start: [] for p in pos}
    for i, p in enumerate(pos):
        gap = text[pos[i - 1].end if i else max(0, p.start - 80) : p.start].lower()
        tokens = _TOKEN.findall(gap)
        if i:  # the part before the first separator belongs to the previous number
            cut = next((k for k, t in enumerate(tokens) if t in _SEPARATORS), None)
            after_prev = [t for t in (tokens[:cut] if cut is not None else []) if _is_word(t)][
                :AFTER
            ]
            out[pos[i - 1].start] += [(w, AFTER + 1 - d) for d, w in enumerate(after_prev, start=1)]
            tokens = tokens[cut + 1 :] if cut is not None else tokens
        before = [t for t in tokens if _is_word(t)][::-1][:BEFORE]
        out[p.start] += [(w, BEFORE + 1 - d) for d, w in enumerate(before, start=1)]
    if pos:  # the last number's words after it, up to a separator
        tail = _TOKEN.findall(text[pos[-1].end : pos[-1].end + 60].lower())
        cut = next((k for k, t in enumerate(tail) if t in _SEPARATORS), len(tail))
        out[pos[-1].start] += [
            (w, AFTER + 1 - d) for d, w in enumerate(tail[:cut][:AFTER], start=1)
        ]
    return out


def cue_score(
    words: list[tuple[str, int]], cues: set[str], weights: dict[str, float] | None = None
) -> float:
    """How well a number's describing words match ``cues``: each matching content word adds its
    nearness weight, times the cue's weight (1 unless given)."""
    return sum(
        near * (weights or {}).get(stem(w), 1.0)
        for w, near in words
        if w not in _STOP and stem(w) in cues
    )


def learn_exemplar(
    template: list[Variable], text: str, values: dict[str, Any]
) -> dict[str, Any] | None:
    """An exemplar from one validated (request text, values), or None if a number is not written
    exactly once in the text (then nobody can tell which number it was), two variables took the same
    number, or a text value is not the request's words in order (see :func:`learn_text_slot`).
    Values that are cells of the request's table are learned by their row and column instead."""
    table = learn_table_exemplar(template, text, values)
    if table is not None:
        return table
    pos = positions(text)
    slots: dict[str, Any] = {}
    texts = [var for var in template if var.type == "string"]
    if len(texts) > 1:
        return None  # two stretches of text: which words belong to which is not learned from one example
    region = pos
    for var in texts:
        learned = learn_text_slot(text, str(values.get(var.name, "")), pos)
        if learned is None:
            return None
        slots[var.name], lo, hi = learned
        region = [
            p for p in pos if not lo <= p.start < hi
        ]  # numbers inside the text are the text's
    numbers = _learn_number_slots([v for v in template if v.type != "string"], text, region, values)
    if numbers is None:
        return None
    numeric, taken = numbers
    slots.update(numeric)
    constants = [[p.kind, p.values()[0]] for p in region if p.start not in taken]
    return {"slots": slots, "constants": constants}


def _learn_number_slots(
    template: list[Variable], text: str, pos: list[Position], values: dict[str, Any]
) -> tuple[dict[str, Any], set[int]] | None:
    described = number_words(text, pos)
    slots: dict[str, Any] = {}
    taken: set[int] = set()
    for var in template:
        value = values.get(var.name)
        where = [(p, i) for p in pos for i, v in enumerate(p.values()) if v == value]
        if len(where) != 1 or where[0][0].start in taken:
            return None
        p, reading = where[0]
        taken.add(p.start)
        cues = set(stems([w for w, _ in described[p.start]]))
        # How the example wrote its size: a plain amount ("$450,000"), a scale word read in full
        # ("2.4 million" as 2,400,000) or a scale word taken as written (2.4, a program in millions).
        scale = "none" if len(p.readings) == 1 else "scaled" if reading == 1 else "raw"
        slots[var.name] = {"kind": p.kind, "scale": scale, "cues": sorted(cues)}
    return slots, taken


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
            "like the template's",
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
    """A number no slot took, of a kind the template uses, that is not a constant of the wording."""
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


def check_exemplar(exemplar: dict[str, Any], validated: list[tuple[str, dict[str, Any]]]) -> bool:
    """An exemplar is kept only if every validated request it aligns with gets its validated values."""
    for text, values in validated:
        found = align(exemplar, text)
        if found.complete and any(
            not same_value(found.values[k], values.get(k)) for k in found.values
        ):
            return False
    return True


def learn_exemplars(
    template: list[Variable], validated: list[tuple[str, dict[str, Any]]], limit: int = 3
) -> list[dict[str, Any]]:
    """Up to ``limit`` exemplars, the first validated example's first; each one checked on the others."""
    out: list[dict[str, Any]] = []
    for text, values in validated:
        exemplar = learn_exemplar(template, text, values)
        if exemplar is not None and check_exemplar(exemplar, validated) and exemplar not in out:
            out.append(exemplar)
        if len(out) >= limit:
            break
    return out
