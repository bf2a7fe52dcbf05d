"""Corroboration: a value the small model chose is served only when no independent signal contradicts it.

Layer 2 of the hit checks (:mod:`minicache.hit.verify`, docs/hits.md): the model's choice must agree with
every learned rule and aligned slot that applies; no number may fill two variables unless the
request writes it twice or the group's examples always had them equal; the words around each chosen
number must not describe another variable better (the variable's cues: its name, the name's
acronym, its description and the words its exemplars wrote around it); the chosen numbers in
another order must not fit their words better; and the decoder's margin (log-probability gap to the
runner-up) must be large enough where the backend reports it.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.cues import cue_score, number_words, positions, stems
from minicache.hit.extraction import Extraction
from minicache.hit.rules import acronym, apply_rule, name_stems
from minicache.programs.lifting import EXAMPLE_MARK
from minicache.store.base import Entry, Variable


def variable_cues(var: Variable, profile: dict[str, Any]) -> set[str]:
    """Words that say what a variable is: its name and the name's acronym ("eps"), its description
    (with the example's own words, which lifting records after EXAMPLE_MARK), its cue words in each
    exemplar, and those learned from context refusals the miss path showed unfounded
    (``profile["cues"]``, :mod:`minicache.hit.refusals`)."""
    said = var.name.replace("_", " ") + " " + var.description.replace(EXAMPLE_MARK, " ")
    words = re.findall(r"[a-z]+", said.lower())
    found = set(stems(words)) | {a for a in [acronym(name_stems(var.name))] if a}
    for ex in profile.get("exemplars", []):
        found |= set((ex.get("slots", {}).get(var.name) or {}).get("cues", []))
    return found | set((profile.get("cues") or {}).get(var.name, []))


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
    """Refuse when the chosen numbers, given to the variables in another order, fit their words better."""
    if not 2 <= len(numeric) <= 7 or any(len(at[v.name]) != 1 for v in numeric):
        return  # a value written at several places (or not at all) has no single place to swap
    names = [v.name for v in numeric]
    places = [at[n][0].start for n in names]
    if len(set(places)) < len(places):
        return

    def total(order: tuple[int, ...]) -> float:
        return sum(score[n, s] for n, s in zip(names, order, strict=True))

    mine = total(tuple(places))
    best = max(itertools.permutations(places), key=total)
    if total(best) > mine:
        moved = [n for n, a, b in zip(names, places, best, strict=True) if a != b]
        raise HitRefused(
            Check.SWAP,
            f"the words around the chosen numbers fit {', '.join(moved)} better in another order",
        )
