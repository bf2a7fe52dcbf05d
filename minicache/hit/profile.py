"""A group's profile: what a build learns for the hit checks, and the plausibility checks against it.

The profile (``entry.validation["profile"]``) holds the exemplars alignment reads with (each checked
on the group's other validated examples), each numeric variable's observed values and written kinds,
the words the entry accepts after a variable's number (``"words_after"``,
:mod:`minicache.hit.words_after`), the unit every example wrote a variable's number in
(``"units"``), the content words and the asked quantity's words every example wrote (``"wording"``,
``"asked"``, :mod:`minicache.hit.wording`), the variables the examples always had equal, and the
group's numeric answers. Layer 3 of the hit checks (:mod:`minicache.hit.verify`, docs/hits.md) holds
every hit to it: each value in the sign, magnitude and written form (percent or not) the examples
show, written in the request where the examples wrote it, followed by no other word than one the
entry accepts there, and in the unit every example wrote it in; the answer in their sign and
magnitude.

The word after a number refuses only a word it does not accept: a request that names its unit
elsewhere ("In seconds, Tom practices 1800 on Monday") writes no word after 1800, and a learned
rule reading by position served an entry built on "30 minutes ... 45 minutes" (its program divides
by 60) 75.0 hours, where the answer is 1.25. The unit is the number's kind
(:func:`minicache.hit.cues.number_kind`, ``unit:minute``), read from the word right after it:
"5 years" and "5-year" are one kind. Where every example wrote a variable's number in one unit,
the build records it, and a request writing that number in no unit, or another, is refused
(``Check.UNIT``, :func:`check_units`).
"""

from __future__ import annotations

from typing import Any

from minicache.errors import HitRefused
from minicache.hit.align import align, same_value
from minicache.hit.checks import Check
from minicache.hit.cues import positions, same_word, word_after
from minicache.hit.exemplars import learn_exemplar
from minicache.hit.word_slots import varied_positions
from minicache.hit.wording import learn_wording
from minicache.hit.words_after import accepted, check_written, learn_written
from minicache.programs.numbers import Position
from minicache.route.router import skeleton
from minicache.store.base import Variable

WORDS = ("skeleton", "varies")  # what an exemplar keeps of its request's words, for word slots


def learn_profile(
    template: list[Variable],
    validated: list[tuple[str, dict[str, Any]]],
    answers: list[Any],
    exemplars: int = 3,
    *,
    word_slots: bool = False,
) -> dict[str, Any]:
    """Exemplars for alignment, each numeric variable's observed values and written kinds, the
    group's numeric answers, the word after each variable's number where every example wrote one
    (:func:`minicache.hit.words_after.learn_written`), and the unit each variable's number was
    written in where every example wrote it in one (:func:`learn_units`). ``word_slots``: each
    numeric exemplar keeps its request's skeleton (:func:`minicache.hit.exemplars.learn_exemplar`)
    and where the examples varied its words (:func:`learn_exemplars`)."""
    values: dict[str, list[Any]] = {}
    kinds: dict[str, list[str]] = {}
    for text, vals in validated:
        pos = positions(text)
        for var in template:
            v = vals.get(var.name)
            if var.type == "string" or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            values.setdefault(var.name, []).append(v)
            kinds.setdefault(var.name, []).extend(p.kind for p in pos if v in p.values())
    equal = [
        [a.name, b.name]
        for i, a in enumerate(template)
        for b in template[i + 1 :]
        if validated and all(vals.get(a.name) == vals.get(b.name) for _, vals in validated)
    ]
    numeric = [a for a in answers if isinstance(a, (int, float)) and not isinstance(a, bool)]
    return {
        "exemplars": learn_exemplars(template, validated, exemplars, word_slots=word_slots),
        "values": {k: v[:20] for k, v in values.items()},
        "kinds": {k: sorted(set(v)) for k, v in kinds.items()},
        **learn_written(template, validated),
        "units": learn_units(template, validated),
        **learn_wording(text for text, _ in validated),
        "equal": equal,
        "answers": numeric[:20],
    }


def _unit(pos: list[Position], value: Any) -> str | None:
    """The unit kind (``unit:minute``) a text writes ``value`` in, where it writes it at every place
    in that one unit; None where it writes it in none, in two, or not at all."""
    kinds = {p.kind for p in pos if value in p.values()}
    return kinds.pop() if len(kinds) == 1 and next(iter(kinds)).startswith("unit:") else None


def learn_units(
    template: list[Variable], validated: list[tuple[str, dict[str, Any]]]
) -> dict[str, str]:
    """For each numeric variable, the unit kind every validated example wrote its number in
    (:func:`_unit`), where two examples at least wrote it and each one in that unit, as
    :func:`minicache.hit.words_after.learn_written` asks of a word: one example, or examples that
    wrote the number in two units or plainly, do not say what unit a request must write it in."""
    found: dict[str, list[str | None]] = {}
    for text, vals in validated:
        pos = positions(text)
        for var in template:
            v = vals.get(var.name)
            if var.type != "string" and not isinstance(v, bool) and isinstance(v, (int, float)):
                found.setdefault(var.name, []).append(_unit(pos, v))
    return {
        name: units[0]
        for name, units in found.items()
        if len(units) >= 2 and units[0] and all(u == units[0] for u in units)
    }


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
    template: list[Variable],
    validated: list[tuple[str, dict[str, Any]]],
    limit: int = 3,
    *,
    word_slots: bool = False,
) -> list[dict[str, Any]]:
    """Up to ``limit`` exemplars, the first validated example's first; each one checked on the others.
    One that reads as a kept one does (its skeleton aside: other names, the same slots) is not kept.
    ``word_slots``: each exemplar with a skeleton also keeps, as ``"varies"``, the places where an
    example of ``validated`` aligns with its request and has another word
    (:func:`minicache.hit.word_slots.varied_positions`): a request is read in its words only where
    they varied."""
    out: list[dict[str, Any]] = []
    for text, values in validated:
        exemplar = learn_exemplar(template, text, values, word_slots=word_slots)
        if (
            exemplar is not None
            and check_exemplar(exemplar, validated)
            and exemplar_reading(exemplar) not in map(exemplar_reading, out)
        ):
            out.append(exemplar)
        if len(out) >= limit:
            break
    if word_slots:
        # From every example: those a duplicate reading or the limit leaves out are evidence too.
        skeletons = [skeleton(text) for text, _ in validated]
        for exemplar in out:
            if "skeleton" in exemplar:
                exemplar["varies"] = varied_positions(exemplar["skeleton"], skeletons)
    return out


def exemplar_reading(exemplar: dict[str, Any]) -> dict[str, Any]:
    """What an exemplar reads with: all of it but its request's words (the skeleton and where the
    examples varied it, minicache.hit.word_slots). Two exemplars of one reading are one exemplar:
    kept twice, a duplicate would count twice where every exemplar must read a request alike
    (minicache.hit.verify.HitVerifier.aligned)."""
    return {k: v for k, v in exemplar.items() if k not in WORDS}


# ---------------------------------------------------------------------------------------------
# The checks


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _outside(value: float, seen: list[float], factor: float) -> str | None:
    """Why ``value`` does not fit the sign and magnitude of ``seen``, or None if it does.

    A positive or negative value is plausible when a nonzero example had its sign; zero when an
    example was zero or the examples had both signs. Zeros among the examples add zero to what is
    plausible instead of switching the checks off: a Balance of Trade group, its answers all
    negative, admitted every positive answer once a 0 had joined them. Examples that are all zero
    say nothing about sign or magnitude."""
    if not seen:
        return None
    signs, sign = {_sign(s) for s in seen}, _sign(value)
    if signs != {0} and sign not in signs and not (sign == 0 and {-1, 1} <= signs):
        return f"{value} has another sign than every example ({min(seen)} to {max(seen)})"
    nonzero = [abs(s) for s in seen if s]
    if nonzero and value:
        lo, hi = min(nonzero), max(nonzero)
        if abs(value) < lo / factor or abs(value) > hi * factor:
            return f"{value} is far outside the examples' magnitude ({lo:g} to {hi:g})"
    return None


def check_values(
    profile: dict[str, Any],
    template: list[Variable],
    values: dict[str, Any],
    text: str,
    factor: float,
) -> None:
    """Each value in the sign, magnitude and written form (percent or not) of the group's examples,
    written in the request when it was written in theirs; then, all of them passing, each written
    with a word the entry accepts there (:func:`minicache.hit.words_after.check_written`: "1800
    *seconds*" for an entry whose examples wrote "30 *minutes*" is refused), and in the unit every
    example wrote it in (:func:`check_units`: "In seconds, ... 1800 on Monday" is refused). The
    word check goes first: its refusal of a word the entry has not learned ("30 *mins*") is
    reviewed and may teach it (minicache.hit.refusals), where the unit check's is not. These hold
    for every reading, the small model's choice too (this runs on all of them)."""
    pos = positions(text)
    for var in template:
        v = values.get(var.name)
        if var.type == "string" or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        why = _outside(v, profile.get("values", {}).get(var.name, []), factor)
        if why:
            raise HitRefused(Check.RANGE, f"{var.name}: {why}", variable=var.name)
        seen_kinds = set(profile.get("kinds", {}).get(var.name, []))
        here = {p.kind for p in pos if v in p.values()}
        if seen_kinds and not here:
            # Only the small model can give a number the request does not write. On WebShop it gave
            # max_price 140 (an entry's default) to requests with no price, twice: both wrong hits.
            raise HitRefused(
                Check.UNWRITTEN,
                f"{var.name} was written in the examples' requests; {v} is not written in this one",
                variable=var.name,
            )
        if seen_kinds and here:
            if seen_kinds == {"pct"} and "pct" not in here:
                raise HitRefused(
                    Check.UNIT,
                    f"{var.name} was a percentage in every example; {v} is not written as one",
                    variable=var.name,
                )
            if seen_kinds == {"money"} and all(k.startswith(("unit:", "word:")) for k in here):
                # Written plainly ("assets 64,000") it may still be the amount; with a unit it is not.
                # On WebShop a wrong choice hit gave max_price ($ in every example) the 1 of "1tb".
                raise HitRefused(
                    Check.UNIT,
                    f"{var.name} was a money amount in every example; {v} is written "
                    f"as {', '.join(sorted(k.split(':', 1)[1] for k in here))}",
                    variable=var.name,
                )
            if "pct" not in seen_kinds and here == {"pct"}:
                raise HitRefused(
                    Check.UNIT,
                    f"{var.name} was never a percentage in the examples; {v} is written as one",
                    variable=var.name,
                )
    check_written(profile, values, text)
    check_units(profile, template, values, text, pos)


def check_units(
    profile: dict[str, Any],
    template: list[Variable],
    values: dict[str, Any],
    text: str,
    pos: list[Position],
) -> None:
    """Refuses (``Check.UNIT``) a value whose variable every example wrote in one unit
    (``profile["units"]``, :func:`learn_units`) where the request writes it in that unit at no
    place: "In seconds, Tom practices 1800 on Monday" has no word after 1800 for the word check to
    refuse, and an entry built on "30 minutes" serves it as 1800 minutes. A place is in the unit
    where its kind is that unit (``pos``, the request's numbers: "5 years" and "5-year" are one
    kind, :func:`minicache.hit.cues.number_kind`) or where the word after it is one the entry
    accepts there ("30 *mins*", once a reviewed refusal taught it, :mod:`minicache.hit.words_after`;
    the kind parser reads it as no unit). Where the request writes the value at a place in the unit
    and at another, the other is refused where it names a unit of its own (another unit kind, or a
    word after it the entry does not accept: "30 minutes ... 30 *seconds*", which the word check
    passes, as one place has the entry's word): which place is the variable's the text does not
    say. A bare number, a percentage or a number word there ("1 minute and 2 minutes on *two*
    days", "5 years at 5%") names no unit and is no refusal. Nothing is refused for an entry whose
    profile has no such record (stored before it, or whose examples wrote no one unit), nor where
    the variable's recorded kinds are not that unit alone: a merge with a group that wrote the
    number otherwise widens them (minicache.build.merge)."""
    units = profile.get("units") or {}
    words = accepted(profile, "words_after")
    for var in template:
        unit, v = units.get(var.name), values.get(var.name)
        if unit is None or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if set(profile.get("kinds", {}).get(var.name, [])) != {unit}:
            continue
        known = words.get(var.name) or []
        said = [(p.kind, word_after(text, p)) for p in pos if v in p.values()]
        fits = [w is not None and any(same_word(w, a) for a in known) for _, w in said]
        # Every place with a word the entry does not accept, and the word check passed: the words
        # are a set a review learned (minicache.hit.words_after), which that check answers for.
        vouched = bool(known) and all(w and not ok for (_, w), ok in zip(said, fits, strict=True))
        astray = [
            (kind, w)
            for (kind, w), ok in zip(said, fits, strict=True)
            if kind != unit and not ok and not vouched
        ]
        own = [w or kind.split(":", 1)[1] for kind, w in astray if w or kind.startswith("unit:")]
        if own or len(astray) == len(said):
            written = f"with {', '.join(sorted(set(own)))}" if own else "in no unit"
            raise HitRefused(
                Check.UNIT,
                f"{var.name} was written in {unit.split(':', 1)[1]} in every example; {v} is "
                f"written {written}",
                variable=var.name,
            )


def checked_values(
    profile: dict[str, Any],
    template: list[Variable],
    values: dict[str, Any],
    text: str,
    factor: float,
) -> None:
    """:func:`check_values`, its refusal carrying the values it refused (minicache.hit.refusals)."""
    try:
        check_values(profile, template, values, text, factor)
    except HitRefused as exc:
        exc.readings = exc.readings or {"hit": dict(values)}
        raise


def check_answer(profile: dict[str, Any], value: Any, factor: float) -> None:
    """The answer in the sign and magnitude of the answers the group's examples were served."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        why = _outside(value, profile.get("answers", []), factor)
        if why:
            raise HitRefused(Check.ANSWER, why)
