"""Zero-model readings served only where something independent of them tells the slots apart.

A learned rule is learned from two or three examples and an alignment from one; on wording they
were not learned from, both can carry the wrong reading, and the likeliest wrong reading is a swap:
two slots that take numbers of the same kind (two money amounts, two rates) given each other's
number. Nothing in the reading itself can see that, so a rule's or an alignment's reading
(:meth:`minicache.hit.verify.HitVerifier.extract`) is served only where every set of slots that could
be swapped is told apart. Two slots *collide* when their numbers
are of the same kind (:func:`minicache.hit.cues.number_kind`) and the group's record does not set
them apart by size (:func:`apart_by_size`). Each set of colliding slots is told apart when the
other zero-model reader (aligned slots for a rule reading, rule readings for an alignment) reads
every one of them the same, or when the words around the numbers (the cue reader: each variable's
name, acronym, description, exemplar and learned cue words,
:func:`minicache.hit.corroboration.variable_cues`) fit the reading's order strictly better than every
other order of those numbers. Otherwise the hit is refused: as ``rule``, with both readings, where
the other reader reads one of the slots otherwise (the refusal review drops the rule the miss answer
shows wrong); else as ``uncorroborated``, where another order fits the words better or none fits
better (nothing in the request's words tells the slots apart). The review learns from the miss
answer (:mod:`minicache.hit.refusals`). A partial reader's contradiction that the words settle for
the reading is outvoted: replayed on a Formula run's zero-model hits, partial rules (a keyword rule
that took "earnings per share" for the dividend per share) contradicted 35 right readings, which the
words confirmed, and the check refused every reading with two same-kind slots swapped.

A slot of a kind no other slot takes, one whose value is written at several places (or none, which
the profile checks refuse), and slots whose values are equal (a swap changes nothing) collide with
nothing. An entry read from tables only is exempt: its reading names a row and a column, which
tell same-kind cells apart by construction (:mod:`minicache.hit.tables`).
"""

from __future__ import annotations

import itertools
from typing import Any

from minicache.errors import HitRefused
from minicache.hit.align import same_value
from minicache.hit.checks import Check
from minicache.hit.corroboration import variable_cues
from minicache.hit.cues import cue_score, number_words, positions, stems
from minicache.hit.extraction import Method
from minicache.programs.numbers import Position
from minicache.store.base import Entry

__all__ = ["MAX_ORDERED", "MIN_RECORD", "apart_by_size", "corroborate_reading"]

# Observed values each slot needs before its sizes can set it apart from another: with two each,
# two slots of one distribution look separated one time in three; with three, one in ten.
MIN_RECORD = 3
# Colliding slots whose orders are compared (7! = 5,040); a larger set is refused as not told apart.
MAX_ORDERED = 7


def corroborate_reading(
    entry: Entry, method: Method, values: dict[str, Any], text: str, other: dict[str, Any]
) -> None:
    """Refuse a zero-model reading (``method`` is ``rule`` or ``align``) that an independent reader
    contradicts or that leaves colliding slots untold apart (see the module docstring). ``other``:
    what the other zero-model reader reads in ``text`` (aligned slots for a rule reading, rule
    readings for an alignment), only the slots it reads."""
    profile = entry.validation.get("profile") or {}
    exemplars = profile.get("exemplars") or []
    if exemplars and all("table" in ex for ex in exemplars):
        return
    key = "rule" if method == Method.RULE else "align"
    numeric = [
        v.name
        for v in entry.template
        if v.type != "string" and isinstance(values.get(v.name), (int, float))
    ]
    pos = positions(text)
    at: dict[str, Position] = {}
    for name in numeric:
        places = [p for p in pos if values[name] in p.values()]
        if len(places) == 1:
            at[name] = places[0]
    record = profile.get("values") or {}
    for group in _collisions(at, values, record):
        if all(n in other and same_value(other[n], values[n]) for n in group):
            continue
        try:
            _told_apart(entry, key, group, at, values, text, pos, profile)
        except HitRefused:
            _not_contradicted(key, group, values, other)
            raise


def _not_contradicted(
    key: str, group: list[str], values: dict[str, Any], other: dict[str, Any]
) -> None:
    """Refuse where the other zero-model reader reads a colliding slot otherwise, with both readings
    (the refusal review drops the rule the miss answer shows wrong). Called only where the words did
    not tell the slots apart: where they did, a partial reader's contradiction is outvoted."""
    for name in group:
        said = other.get(name)
        if said is not None and not same_value(said, values[name]):
            mine, theirs = dict(values), {**values, **other}
            raise HitRefused(
                Check.RULE,
                f"the {key} reads {name}={values[name]}, "
                f"the {'alignment' if key == 'rule' else 'rule'} reads {said}",
                readings={"rule": mine, "align": theirs}
                if key == "rule"
                else {"rule": theirs, "align": mine},
            )


def _collisions(
    at: dict[str, Position], values: dict[str, Any], record: dict[str, list[Any]]
) -> list[list[str]]:
    """The sets (two slots or more) joined by collisions: same kind, different values, not set apart
    by the group's record of their sizes."""
    names = list(at)
    joined: dict[str, str] = {n: n for n in names}

    def root(n: str) -> str:
        while joined[n] != n:
            n = joined[n]
        return n

    for a, b in itertools.combinations(names, 2):
        if (
            at[a].kind == at[b].kind
            and at[a].start != at[b].start
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


def _told_apart(
    entry: Entry,
    key: str,
    group: list[str],
    at: dict[str, Position],
    values: dict[str, Any],
    text: str,
    pos: list[Position],
    profile: dict[str, Any],
) -> None:
    """Refuse unless the words around the group's numbers fit the reading's order strictly better
    than any other order of them."""
    words = number_words(text, pos)
    around = {n: sorted(set(stems([w for w, _ in words[at[n].start]]))) for n in group}
    readings: dict[str, dict[str, Any]] = {"hit": dict(values), key: dict(values), "words": around}
    names = ", ".join(group)
    if len(group) > MAX_ORDERED:
        raise HitRefused(
            Check.UNCORROBORATED, f"{names}: too many slots of one kind to order", readings=readings
        )
    variables = {v.name: v for v in entry.template}
    cues = {n: variable_cues(variables[n], profile) for n in group}
    places = [at[n] for n in group]

    def fit(order: tuple[Position, ...]) -> float:
        return sum(cue_score(words[p.start], cues[n]) for n, p in zip(group, order, strict=True))

    mine = fit(tuple(places))
    others = [o for o in itertools.permutations(places) if list(o) != places]
    best = max(others, key=fit)
    if fit(best) < mine:
        return
    if fit(best) > mine:
        value_at = {at[n].start: values[n] for n in group}
        readings["cues"] = {
            **values,
            **{n: value_at[p.start] for n, p in zip(group, best, strict=True)},
        }
        why = f"the words around the numbers fit {names} better in another order"
    else:
        why = f"nothing in the request's words tells {names} apart"
    raise HitRefused(Check.UNCORROBORATED, f"the {key} reading: {why}", readings=readings)
