"""Corroboration: a value the small model chose is served only when no independent signal contradicts it.

Layer 2 of the hit checks (:mod:`minicache.hit.verify`, docs/hits.md): the model's choice must agree with
every learned rule and aligned slot that applies; no number may fill two variables unless the
request writes it twice or the group's examples always had them equal; the words around each chosen
number must not describe another variable better (the variable's cues: its name, the name's
acronym, its description and the words its exemplars wrote around it); the chosen numbers in
another order must not fit their words better; slots of one kind (:func:`collisions`) must be told
apart by the words that can tell them apart (:func:`tell_apart`); and the decoder's margin
(log-probability gap to the runner-up) must be large enough where the backend reports it.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.cues import (
    AFTER,
    BEFORE,
    SEPARATORS,
    TOKEN,
    cue_score,
    number_words,
    positions,
    stems,
)
from minicache.hit.extraction import Extraction
from minicache.hit.rules import acronym, apply_rule, name_stems
from minicache.programs.lifting import EXAMPLE_MARK
from minicache.programs.numbers import Position
from minicache.store.base import Entry, Variable

Words = list[tuple[str, int]]  # a number's describing words with their nearness weights
# Observed values each slot needs before its sizes can set it apart from another: with two each,
# two slots of one distribution look separated one time in three; with three, one in ten.
MIN_RECORD = 3
# Colliding slots whose orders are compared (7! = 5,040); a larger set is refused as not told apart.
MAX_ORDERED = 7


def variable_cues(var: Variable, profile: dict[str, Any]) -> set[str]:
    """Words that say what a variable is: its name and the name's acronym ("eps"), its description
    (with the example's own words, which lifting records after EXAMPLE_MARK), its cue words in each
    exemplar, and those learned from context refusals the miss path showed unfounded
    (``profile["cues"]``, :mod:`minicache.hit.refusals`). Never a word of another variable's name
    that its own name lacks: the example's words in a description ("... 12 boys and 8 girls")
    hold the neighbour's name, and "boys" as a cue of girls made the word that tells boys from girls
    one they share, so incidental words decided their order."""
    said = var.name.replace("_", " ") + " " + var.description.replace(EXAMPLE_MARK, " ")
    words = re.findall(r"[a-z]+", said.lower())
    found = set(stems(words)) | {a for a in [acronym(name_stems(var.name))] if a}
    others: set[str] = set()
    for ex in profile.get("exemplars", []):
        slots = ex.get("slots") or {}
        found |= set((slots.get(var.name) or {}).get("cues", []))
        others |= {s for name in slots if name != var.name for s in name_stems(name)}
    found |= set((profile.get("cues") or {}).get(var.name, []))
    return found - (others - set(name_stems(var.name)))


def telling_words(text: str, pos: list[Position]) -> dict[int, Words]:
    """The words around each number (:func:`minicache.hit.cues.number_words`) that can tell it from
    its neighbours. Between two numbers that no separator splits, number_words gives every word to
    the later number, yet the words there may describe either, and an exemplar learned them the
    same way: "12 *kids get* 3 oranges" gave "kids", what the 12 counts, to the 3, and a request
    naming its numbers in another order than the exemplars' was read against the wrong slots. Of
    such a stretch only its ends tell: the word right after the earlier number is what that number
    counts, the word right before the later one its label ("assets 64,000 over *liabilities*
    16,000"); the words between them, and a stretch of one word, belong to neither."""
    words = number_words(text, pos)
    for prev, p in zip(pos, pos[1:], strict=False):
        gap = TOKEN.findall(text[prev.end : p.start].lower())
        if any(t in SEPARATORS for t in gap):
            continue
        said = [t for t in gap if t[0].isalpha()]
        # number_words lists a number's words before it first, nearest first, at most BEFORE.
        words[p.start] = words[p.start][min(BEFORE, len(said)) :]
        if len(said) > 1:
            words[prev.start].append((said[0], AFTER))
            words[p.start].insert(0, (said[-1], BEFORE))
    return words


def telling_cues(cues: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each variable's cue words less those another variable's cues share: a word both slots
    learned ("equally" around both numbers of a sharing request) cannot tell them apart."""
    seen: dict[str, int] = {}
    for said in cues.values():
        for w in said:
            seen[w] = seen.get(w, 0) + 1
    return {name: {w for w in said if seen[w] == 1} for name, said in cues.items()}


def collisions(
    at: dict[str, list[Position]], values: dict[str, Any], record: dict[str, list[Any]]
) -> list[list[str]]:
    """The sets (two slots or more) joined by collisions: slots whose numbers (``at``: where each
    slot's value is written, one place or several) are of one kind, with different values, not
    set apart by the group's record of their sizes. A slot whose value is written nowhere (the
    profile checks refuse it) and two slots read at one place (a swap moves nothing) do not
    collide."""
    names = [n for n in at if at[n]]
    joined: dict[str, str] = {n: n for n in names}

    def root(n: str) -> str:
        while joined[n] != n:
            n = joined[n]
        return n

    for a, b in itertools.combinations(names, 2):
        starts_a, starts_b = {p.start for p in at[a]}, {p.start for p in at[b]}
        if (
            starts_a.isdisjoint(starts_b)
            and {p.kind for p in at[a]} & {p.kind for p in at[b]}
            and values[a] != values[b]
            and not apart_by_size(values[a], values[b], record.get(a, []), record.get(b, []))
        ):
            joined[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    return [g for g in groups.values() if len(g) > 1]


def apart_by_size(a: float, b: float, seen_a: list[Any], seen_b: list[Any]) -> bool:
    """Whether the group's record tells two slots apart by size: each has at least MIN_RECORD
    observed values, every one of one slot's magnitudes lies below every one of the other's, and the
    reading's two values keep that order. Swapped, they would not."""
    mags_a = [abs(x) for x in seen_a if isinstance(x, (int, float))]
    mags_b = [abs(x) for x in seen_b if isinstance(x, (int, float))]
    if len(mags_a) < MIN_RECORD or len(mags_b) < MIN_RECORD:
        return False
    if max(mags_a) < min(mags_b):
        return abs(a) < abs(b)
    if max(mags_b) < min(mags_a):
        return abs(b) < abs(a)
    return False


def tell_apart(
    group: list[str], heard: dict[str, Words], cues: dict[str, set[str]]
) -> tuple[bool, bool, dict[str, str] | None]:
    """What the words say of a reading of a set of colliding slots: whether its order fits them
    strictly better than every other order (a tie or no evidence tells nothing); whether a slot's
    own number fits another slot of the set better than its own, which a sum over the slots could
    outweigh ("12 *kids* get 3 oranges equally" says the 12 is the people's however well "oranges
    equally" fits the 3); and the other order that fits strictly better than the reading's, as the
    slot whose number each slot takes (None where none does). ``heard``: each slot's number's
    telling words, at every place its value is written; ``cues``: each slot's telling cues."""

    def fit(order: tuple[str, ...]) -> float:
        return sum(cue_score(heard[o], cues[n]) for n, o in zip(group, order, strict=True))

    best = max((o for o in itertools.permutations(group) if list(o) != group), key=fit)
    better = dict(zip(group, best, strict=True)) if fit(best) > fit(tuple(group)) else None
    own = {n: cue_score(heard[n], cues[n]) for n in group}
    contradicted = any(cue_score(heard[n], cues[m]) > own[n] for n in group for m in group)
    return fit(tuple(group)) > fit(best), contradicted, better


def refuse_untold(
    what: str,
    ties: bool,
    group: list[str],
    at: dict[str, list[Position]],
    values: dict[str, Any],
    words: dict[int, Words],
    cues: dict[str, set[str]],
    readings: dict[str, dict[str, Any]],
) -> None:
    """Refuse (``uncorroborated``) ``what`` ("the align reading") where the telling words
    (``words``, :func:`telling_words`) do not tell the colliding slots ``group`` apart
    (:func:`tell_apart`): where another order fits them better or a slot's number fits another
    slot better, and, with ``ties``, where the reading's order fits no better than every other (a
    zero-model reading needs the words' support; the model's choice, another reader, needs only
    that they do not contradict it). With ``readings``, the reading's values as ``hit``, the words
    around each slot's number (the refusal review teaches them where the miss answer confirms the
    reading) and, where another order fits better, that order as ``cues``."""
    heard = {n: [w for p in at[n] for w in words[p.start]] for n in group}
    around = {n: sorted(set(stems([w for w, _ in heard[n]]))) for n in group}
    readings = {**readings, "hit": dict(values), "words": around}
    names = ", ".join(group)
    if len(group) > MAX_ORDERED:
        why = f"{names}: too many slots of one kind to order"
        raise HitRefused(Check.UNCORROBORATED, why, readings=readings)
    best, contradicted, better = tell_apart(group, heard, telling_cues({n: cues[n] for n in group}))
    if not contradicted and better is None and (best or not ties):
        return
    if better is not None:
        readings["cues"] = {**values, **{n: values[o] for n, o in better.items()}}
        why = f"the words around the numbers fit {names} better in another order"
    elif contradicted:
        why = f"the words around a number of {names} fit another of them better"
    else:
        why = f"nothing in the request's words tells {names} apart"
    raise HitRefused(Check.UNCORROBORATED, f"{what}: {why}", readings=readings)


def rule_readings(entry: Entry, text: str) -> dict[str, Any]:
    """What each of the entry's learned rules reads in ``text``, for the variables a rule reads
    (None where it finds nothing)."""
    return {
        var.name: apply_rule(entry.rules[var.name], text)
        for var in entry.template
        if var.type != "string" and entry.rules.get(var.name)
    }


def corroborate(
    entry: Entry, extraction: Extraction, text: str, partial: dict[str, Any], min_margin: float
) -> None:
    """Refuse a model's choice that any independent signal contradicts (see the module docstring)."""
    values = extraction.variables
    numeric = [
        v
        for v in entry.template
        if v.type != "string" and isinstance(values.get(v.name), (int, float))
    ]
    names = {var.name for var in numeric}
    said_by_rules = {k: v for k, v in rule_readings(entry, text).items() if k in names}
    for var in numeric:
        said = said_by_rules.get(var.name)
        if said is not None and said != values[var.name]:
            read = {k: v for k, v in said_by_rules.items() if v is not None}
            raise HitRefused(
                Check.RULE,
                f"the rule reads {var.name}={said}, the model chose {values[var.name]}",
                readings={"rule": {**values, **read}, "model": dict(values)},
            )
        if var.name in partial and partial[var.name] != values[var.name]:
            raise HitRefused(
                Check.ALIGN,
                f"alignment reads {var.name}={partial[var.name]}, "
                f"the model chose {values[var.name]}",
            )
    pos = positions(text)
    profile = entry.validation.get("profile") or {}
    cues = {var.name: variable_cues(var, profile) for var in numeric}
    words = number_words(text, pos)
    score = {
        (var.name, p.start): cue_score(words[p.start], cues[var.name])
        for var in numeric
        for p in pos
    }
    equal = {frozenset(pair) for pair in profile.get("equal", [])}
    for i, a in enumerate(numeric):
        for b in numeric[i + 1 :]:
            v = values[a.name]
            if values[b.name] == v and frozenset((a.name, b.name)) not in equal:
                written = [p for p in pos if v in p.values()]
                if len(written) < 2:
                    # The value stays with the variable its words describe better (a tie: the first).
                    fit = {
                        n: max((score[n, p.start] for p in written), default=0.0)
                        for n in (a.name, b.name)
                    }
                    worse = b.name if fit[a.name] >= fit[b.name] else a.name
                    raise HitRefused(
                        Check.DUPLICATE,
                        f"{a.name} and {b.name} both took {v}, written once",
                        variable=worse,
                    )
    at = {var.name: [p for p in pos if values[var.name] in p.values()] for var in numeric}
    taken = {p.start for ps in at.values() for p in ps}
    for var in numeric:
        mine, chosen = max(
            ((score[var.name, p.start], p.start) for p in at[var.name]), default=(0.0, None)
        )
        # A number written as a word ("one year", "quarterly") competes only for a variable the
        # examples wrote that way: otherwise right Free Cash Flow choices were refused because the
        # words around "one"/"quarterly" ("operating", "cash flow") fit the cash flow better.
        kinds = (profile.get("kinds") or {}).get(
            var.name
        )  # None: not learned, every number competes
        worded = kinds is None or any(k.startswith("word:") for k in kinds)
        other = max(
            (
                (score[var.name, p.start], p)
                for p in pos
                if p.start not in taken and (worded or not p.kind.startswith("word:"))
            ),
            key=lambda t: t[0],
            default=(0.0, None),
        )
        if other[1] is not None and other[0] > mine:
            around = sorted(set(stems([w for w, _ in words[chosen]]))) if chosen is not None else []
            raise HitRefused(
                Check.CONTEXT,
                f"the words around {other[1].readings[0].text.strip()!r} match {var.name} "
                f"better than those around the chosen {values[var.name]}",
                readings={"hit": dict(values)},
                variable=var.name,
                cues=around,
            )
    _check_swaps(numeric, at, score)
    told = telling_words(text, pos)
    for group in collisions(at, values, profile.get("values") or {}):
        refuse_untold("the model's choice", False, group, at, values, told, cues, {})
    margins = extraction.detail.get("margins") or {}
    low = {k: m for k, m in margins.items() if m is not None and m < min_margin}
    if low:
        name, margin = min(low.items(), key=lambda t: t[1])
        raise HitRefused(
            Check.MARGIN,
            f"the model chose {name} by a log-probability margin of {margin:.2f} "
            f"(at least {min_margin} needed)",
        )


def _check_swaps(
    numeric: list[Variable], at: dict[str, list[Any]], score: dict[tuple[str, int], float]
) -> None:
    """Refuse when the chosen values, given to the variables in another order, fit their words
    better: a value's words are those at every place it is written."""
    if not 2 <= len(numeric) <= MAX_ORDERED:
        return
    names = [v.name for v in numeric]

    def total(order: tuple[str, ...]) -> float:
        return sum(
            score[n, p.start] for n, source in zip(names, order, strict=True) for p in at[source]
        )

    best = max(itertools.permutations(names), key=total)
    if total(best) > total(tuple(names)):
        moved = [n for n, source in zip(names, best, strict=True) if n != source]
        raise HitRefused(
            Check.SWAP,
            f"the words around the chosen numbers fit {', '.join(moved)} better in another order",
        )
