"""Zero-model readings served only where something independent of them tells the slots apart.

A learned rule is learned from two or three examples and an alignment from one; on wording they
were not learned from, both can carry the wrong reading, and the likeliest wrong reading is a swap:
two slots that take numbers of the same kind (two money amounts, two rates) given each other's
number. Nothing in the reading itself can see that, so a rule's or an alignment's reading
(:meth:`minicache.hit.verify.HitVerifier.extract`) is served only where every set of slots that could
be swapped is told apart. Two slots *collide* when their numbers are of the same kind
(:func:`minicache.hit.cues.number_kind`) and the group's record does not set them apart by size
(:func:`apart_by_size`); a value written at several places collides through each of them
(:func:`minicache.hit.corroboration.collisions`). Each set of colliding slots is told apart when
the other zero-model reader (aligned slots for a rule reading, rule readings for an alignment)
reads every one of them the same, or when the words around the numbers fit the reading's order
strictly better than every other order of them and no slot's number fits another slot better than
its own (the cue reader, :func:`minicache.hit.corroboration.tell_apart`: each variable's
name, acronym, description, exemplar and learned cue words,
:func:`minicache.hit.corroboration.variable_cues`).

The cue reader counts only words that can tell the slots apart. Cue words are learned from the
same stretches of text that alignment reads, so the words of a stretch between two numbers that no
separator splits, which :func:`minicache.hit.cues.number_words` gives to the later number, and cue
words two slots share say nothing about which number is which
(:func:`minicache.hit.corroboration.telling_words`,
:func:`minicache.hit.corroboration.telling_cues`). Counted, they made the
reader agree with the alignment it checks: exemplars written "Tom shares 12 cookies equally among
4 friends" learned "cookies equally among" as the divisor's, and "12 kids get 3 oranges equally"
was read and corroborated as 12 / 3.

Otherwise the hit is refused: as ``rule``, with both readings, where the other reader reads one of
the slots otherwise (the refusal review drops the rule the miss answer shows wrong); else as
``uncorroborated``, where another order fits the words better or none is told apart. The review
learns from the miss answer (:mod:`minicache.hit.refusals`). A partial reader's contradiction that
the words settle for the reading is outvoted: replayed on a Formula run's zero-model hits, partial
rules (a keyword rule that took "earnings per share" for the dividend per share) contradicted 35
right readings, which the words confirmed.

A slot of a kind no other slot takes, one whose value is written nowhere (the profile checks
refuse it), and slots whose values are equal (a swap changes nothing) collide with nothing. An
entry read from tables only is exempt: its reading names a row and a column, which tell same-kind
cells apart by construction (:mod:`minicache.hit.tables`).
"""

from __future__ import annotations

from typing import Any

from minicache.errors import HitRefused
from minicache.hit.align import same_value
from minicache.hit.checks import Check
from minicache.hit.corroboration import (
    MAX_ORDERED,
    MIN_RECORD,
    apart_by_size,
    collisions,
    refuse_untold,
    telling_words,
    variable_cues,
)
from minicache.hit.cues import positions
from minicache.hit.extraction import Method
from minicache.store.base import Entry

__all__ = ["MAX_ORDERED", "MIN_RECORD", "apart_by_size", "corroborate_reading"]


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
        v
        for v in entry.template
        if v.type != "string" and isinstance(values.get(v.name), (int, float))
    ]
    pos = positions(text)
    at = {v.name: [p for p in pos if values[v.name] in p.values()] for v in numeric}
    groups = collisions(at, values, profile.get("values") or {})
    cues = {v.name: variable_cues(v, profile) for v in numeric} if groups else {}
    words = telling_words(text, pos)
    for group in groups:
        if all(n in other and same_value(other[n], values[n]) for n in group):
            continue
        try:
            refuse_untold(
                f"the {key} reading", True, group, at, values, words, cues, {key: dict(values)}
            )
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
