"""A group's profile: what a build learns for the hit checks, and the plausibility checks against it.

The profile (``entry.validation["profile"]``) holds the exemplars alignment reads with (each checked
on the group's other validated examples), each numeric variable's observed values and written kinds,
the word every example wrote right after a variable's number where they all wrote one
(``"words_after"``), the variables the examples always had equal, and the group's numeric answers.
Layer 3 of the hit checks (:mod:`minicache.hit.verify`, docs/hits.md) holds every hit to it: each
value in the sign, magnitude and written form (percent or not) the examples show, followed by the
word the examples followed it with where the request follows it with a word, and written in the
request where the examples wrote it; the answer in their sign and magnitude.
"""

from __future__ import annotations

from typing import Any

from minicache.errors import HitRefused
from minicache.hit.align import align, same_value
from minicache.hit.checks import Check
from minicache.hit.cues import positions, same_word, word_after
from minicache.hit.exemplars import learn_exemplar
from minicache.hit.word_slots import varied_positions
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
    """Exemplars for alignment, each numeric variable's observed values and written kinds, and the
    group's numeric answers, and the word after each variable's number where every example wrote one
    (:func:`learn_words_after`). ``word_slots``: each numeric exemplar keeps its request's skeleton
    (:func:`minicache.hit.exemplars.learn_exemplar`) and where the examples varied its words
    (:func:`learn_exemplars`)."""
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
        "words_after": learn_words_after(template, validated),
        "equal": equal,
        "answers": numeric[:20],
    }


def learn_words_after(
    template: list[Variable], validated: list[tuple[str, dict[str, Any]]]
) -> dict[str, str]:
    """For each numeric variable, the word every validated example wrote right after its number
    (:func:`minicache.hit.cues.word_after`: "30 *minutes*"), where two examples at least wrote its
    number and every one followed it with that word (as the first wrote it). A variable whose
    examples follow it with other words, or with none, or write its number twice with different
    words after it, gets none: they do not say what a request must follow it with."""
    out: dict[str, str] = {}
    for var in template:
        if var.type == "string":
            continue
        said: list[str | None] = []
        for text, vals in validated:
            v = vals.get(var.name)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            words = {word_after(text, p) for p in positions(text) if v in p.values()}
            said.append(words.pop() if len(words) == 1 else None)
        first = said[0] if said else None
        if len(said) >= 2 and first and all(w and same_word(w, first) for w in said):
            out[var.name] = first
    return out


def merged_words_after(
    ours: dict[str, str], theirs: dict[str, str], names: dict[str, str]
) -> dict[str, str]:
    """The words after a number that two merged groups' examples all wrote: each of ``ours`` that
    ``theirs`` (renamed by ``names``) records alike. A variable one group followed with "cookies"
    and the other with "marbles" has no one word after it in the merged group."""
    renamed = {names.get(k, k): w for k, w in theirs.items()}
    return {k: w for k, w in ours.items() if k in renamed and same_word(w, renamed[k])}


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
    written in the request when it was written in theirs, and not followed by another word than the
    one every example followed it with (``profile["words_after"]``).

    The word after a number is what it counts as the request states it: an entry built on "30
    minutes ... 45 minutes" divides by 60, and a request reaching it by its embedding with "1800
    seconds ... 2700 seconds" was served by a learned rule, reading by position, as 75.0 hours (the
    answer is 1.25). "seconds" is no kind that the written-form checks know, so only the word itself
    tells. It holds for every reading, the small model's choice too (this runs on all of them): a
    number followed by another unit is not the variable's, whoever chose it; a model choice refused
    here is chosen again without it where ``VerifyConfig.second_choice`` asks (``Check.UNIT``
    refutes the value). A request with no word after the number, or a function word ("$2 and"), or
    examples that followed it with different words, refuse nothing: they do not say the unit
    differs. An entry built before the record existed has none and refuses nothing by it."""
    pos = positions(text)
    words_after = profile.get("words_after") or {}
    for var in template:
        v = values.get(var.name)
        if var.type == "string" or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        why = _outside(v, profile.get("values", {}).get(var.name, []), factor)
        if why:
            raise HitRefused(Check.RANGE, f"{var.name}: {why}", variable=var.name)
        seen_kinds = set(profile.get("kinds", {}).get(var.name, []))
        written = [p for p in pos if v in p.values()]
        here = {p.kind for p in written}
        if seen_kinds and not here:
            # Only the small model can give a number the request does not write. On WebShop it gave
            # max_price 140 (an entry's default) to requests with no price, twice: both wrong hits.
            raise HitRefused(
                Check.UNWRITTEN,
                f"{var.name} was written in the examples' requests; {v} is not written in this one",
                variable=var.name,
            )
        agreed = words_after.get(var.name)
        after = [word_after(text, p) for p in written]
        if agreed and after and all(w and not same_word(w, agreed) for w in after):
            said = ", ".join(repr(w) for w in sorted(set(map(str, after))))
            raise HitRefused(
                Check.UNIT,
                f"{var.name} is followed by {said}, the entry's examples say {agreed!r}",
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
