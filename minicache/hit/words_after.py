"""The words a request writes with a number, held to the words the entry accepts there.

What a number counts is written next to it: the word right after it ("30 *minutes*", "a 5-*year*
bond", "$2.4 million *loan*": :func:`minicache.hit.cues.word_after`). An entry built on "30 minutes
... 45 minutes" divides by 60, and a request reaching it by its embedding with "1800 seconds ... 2700
seconds" was served by a learned rule, reading by position, as 75.0 hours (the answer is 1.25).
"seconds" is no kind that the written-form checks know, so only the word itself tells. A number
taken as written before its scale word (2.4 of "$2.4 million", for a program in millions) counts in
that scale (:func:`minicache.hit.cues.scale_word`): 6.1 of "$6.1 billion" is what such a program
takes for 6.1 million, and no range check sees it. A scaled value (2,400,000) carries its scale
itself, and the range check holds it to the examples' magnitude; "$2,400,000 loan" and "$2.4
million loan" have one word after them.

A build records, for each numeric variable, the word every validated example wrote after its number
and the scale every one counted its value in, where two examples at least wrote one and all alike
(:func:`minicache.hit.cues.same_word`): the variable's accepted words (``profile["words_after"]``,
``profile["scales"]``, a list each). A reading whose number the request writes only with other
words is refused (``Check.WORD_AFTER``), whoever read it, the small model too. Nothing is refused
where the request writes no word there (no scale, for one), where the examples wrote different words
or none, or for an entry built before the record existed.

Such a refusal is reviewed as the learnable ones are (:mod:`minicache.hit.refusals`): the miss path
answers the refused request, and where the entry's program on the refused reading's values gives
that answer, and an answer that changes with the refused variables' values all scaled up, and all
scaled down, by one factor (so it depends on the unit they are written in, :func:`learn`), the
request's words are learned in the entry's next version, so one miss teaches a word the examples
did not write ("mins", "geese"). One refused variable's word, every other recorded variable written
with its examples' own word, joins that variable's accepted words. The words of several variables
(or of one beside a number written with no word) are learned as one set
(``profile["learned_words"]``: by record and variable, the word, or None for none written), and a
request passes with them only where its words that no variable accepts are that set, all of it
(:func:`check_written`): "4 kg of flour and 4 kg of sugar" gives a grams sum's 8 because a sum
counts in the request's own unit, and "500 grams of flour and 2 kg of sugar" is still refused. Where
the answer does not show the words (1800 seconds read as minutes gives 75.0, the answer is 1.25; a
share, "1800 seconds of a 5400 seconds film", is one number in any one unit; how many full hours
"20 seconds and 30 seconds" make is 0 read as minutes too, though 7 times as many minutes make 5),
the record stays; so it does for a number the request writes with two words ("5 pears ... 5
miles"). The refusal does not refute the value for a second choice
(:data:`minicache.hit.verify.REFUTING`): a right value wrongly refused would be taken out of the
model's choices, and another number chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.cues import positions, same_word, scale_word, word_after
from minicache.programs.numbers import Position
from minicache.programs.signature import answers_match
from minicache.store.base import Variable

Pair = tuple[str, dict[str, Any]]  # a request's text and its values by variable
Records = dict[str, dict[str, list[str]]]  # accepted words by record and variable
Words = dict[str, dict[str, str | None]]  # one word by record and variable (None: no word written)
LEARNED = "learned_words"  # the profile's word sets that reviews learned together


@dataclass(frozen=True)
class Record:
    """One thing a request writes with a number, and the profile's record of it."""

    key: str  # the profile's record
    says: str  # how a refusal names it
    read: Callable[[str, Position, Any], str | None]  # the word, for a value read at a position


RECORDS = (
    Record("words_after", "is followed by", lambda text, pos, value: word_after(text, pos)),
    Record("scales", "is counted in", lambda text, pos, value: scale_word(pos, value)),
)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _written(record: Record, text: str, spots: list[Position], value: Any) -> list[str | None]:
    """The words the request writes with ``value``, one per place it writes it (None: no word);
    ``spots`` are the request's numbers (:func:`minicache.hit.cues.positions`), read once a request
    whatever the number of variables and records."""
    return [record.read(text, p, value) for p in spots if value in p.values()]


def _one_word(said: list[str | None]) -> str | None:
    """The word a request writes with a value (``said``, :func:`_written`), where it writes that one
    word at every place it writes the value; None where it writes other words ("5 apples ... 5
    miles": which one the value counts, the text does not say) or none."""
    words = set(said)
    return words.pop() if len(words) == 1 else None


def _is_scale(word: str) -> bool:
    """Whether the number parser reads ``word`` as a number's scale ("million", "bn")."""
    return any(scale_word(p, 1) == word.lower() for p in positions(f"1 {word}"))


def accepted(profile: dict[str, Any], key: str) -> dict[str, list[str]]:
    """The accepted words of one record by variable; an entry built when a record held one word per
    variable reads as that word alone. An entry built before the ``scales`` record recorded a scale
    word as the word after its number ("$5.2 *million*"): there a scale word of ``words_after`` is
    the variable's scale, and no word after it, so that such an entry still refuses "$6.1 billion"
    and does not refuse "$6.1 million loan"."""
    if "scales" in profile:
        return _listed(profile.get(key))
    return {
        name: kept
        for name, words in _listed(profile.get("words_after")).items()
        if (kept := [w for w in words if _is_scale(w) == (key == "scales")])
    }


def _listed(record: dict[str, Any] | None) -> dict[str, list[str]]:
    return {k: [w] if isinstance(w, str) else list(w) for k, w in (record or {}).items()}


def learn_written(template: list[Variable], validated: list[Pair]) -> Records:
    """For each record and numeric variable, the word every validated example wrote with its number,
    where two examples at least wrote its number and each one wrote that word (as the first wrote
    it). A variable whose examples write other words, or none, or its number twice with different
    words, gets none: they do not say what a request must write."""
    out: Records = {}
    spots = [positions(text) for text, _ in validated]
    for record in RECORDS:
        found = out.setdefault(record.key, {})
        for var in template:
            said: list[str | None] = []
            for (text, vals), at in zip(validated, spots, strict=True):
                v = vals.get(var.name)
                if var.type != "string" and _numeric(v):
                    said.append(_one_word(_written(record, text, at, v)))
            first = said[0] if said else None
            if len(said) >= 2 and first and all(w and same_word(w, first) for w in said):
                found[var.name] = [first]
    return out


def _unaccepted(
    profile: dict[str, Any], values: dict[str, Any], text: str
) -> tuple[Words | None, list[str], list[str]]:
    """What the request writes with each recorded variable's number where it writes no word the
    entry accepts there at any place: by record, the one word it writes at every place, or None
    where it writes none (a learned set must say so too, :func:`_fits`). The first is None where one
    such number is written with two words ("5 apples ... 5 miles": which one the value counts, the
    text does not say), or with a word at one place and none at another: no learned set fits it,
    and nothing is learned from it. Then the variables whose number every place writes with a word
    the entry does not accept (the refused ones), and why, one line per such variable."""
    shape: Words | None = {}
    names: list[str] = []
    why: list[str] = []
    held = [(record, accepted(profile, record.key)) for record in RECORDS]
    spots = positions(text) if any(by_name for _, by_name in held) else []
    for record, by_name in held:
        for name, words in by_name.items():
            v = values.get(name)
            said = _written(record, text, spots, v) if _numeric(v) else []
            if not said or any(w and any(same_word(w, a) for a in words) for w in said):
                continue  # not written, or written with an accepted word
            one = _one_word(said)
            if all(said):
                names.append(name)
                new = ", ".join(sorted(repr(w) for w in set(said) if w))
                known = ", ".join(map(repr, words))
                why.append(f"{name} {record.says} {new}, the entry's examples say {known}")
            if shape is not None and (one is not None or not any(said)):
                shape.setdefault(record.key, {})[name] = one
            else:
                shape = None
    return shape, names, why


def learned_sets(profile: dict[str, Any]) -> list[Words]:
    """The word sets reviews learned together (``profile["learned_words"]``); none for an entry
    stored before the record existed."""
    return [
        {key: dict(by_name) for key, by_name in found.items() if isinstance(by_name, dict)}
        for found in profile.get(LEARNED) or []
        if isinstance(found, dict)
    ]


def _same_set(a: Words, b: Words) -> bool:
    """Whether two word sets name the same variables, each with the same word (or both none)."""
    flat_a = {(k, n): w for k, by_name in a.items() for n, w in by_name.items()}
    flat_b = {(k, n): w for k, by_name in b.items() for n, w in by_name.items()}
    return flat_a.keys() == flat_b.keys() and all(
        w == o if w is None or o is None else same_word(w, o)
        for w, o in ((w, flat_b[at]) for at, w in flat_a.items())
    )


def _fits(profile: dict[str, Any], shape: Words) -> bool:
    """Whether the words a request writes where the entry accepts none (:func:`_unaccepted`) are,
    all together, one set a review learned: each variable of the set written with its word, and
    every other recorded variable written with one its examples wrote. "500 grams of flour and 2 kg
    of sugar" fits no set learned from "4 kg of flour and 4 kg of sugar"."""
    return any(_same_set(shape, found) for found in learned_sets(profile))


def check_written(profile: dict[str, Any], values: dict[str, Any], text: str) -> None:
    """Refuses (``Check.WORD_AFTER``) a reading with a variable whose number the request writes, at
    every place it writes it, with a word the entry does not accept there, unless the request's
    words where the entry accepts none are one set a review learned (:func:`_fits`). The refusal
    carries those words (``readings["written"]``, :func:`_unaccepted`; empty where a number is
    written with two words), which :func:`learn` learns where the miss answer shows them right."""
    shape, names, why = _unaccepted(profile, values, text)
    if why and (shape is None or not _fits(profile, shape)):
        raise HitRefused(
            Check.WORD_AFTER,
            "; ".join(why),
            variable=names[0],
            readings={"hit": dict(values), "written": shape or {}},
        )


SCALE = 7  # the common factor that tells an answer that depends on its numbers' unit


def _unit_shown(
    values: dict[str, Any], names: set[str], run: Callable[[dict[str, Any]], Any]
) -> bool:
    """Whether the program's answer on ``values`` changes with the ``names`` values all scaled up by
    :data:`SCALE` and, apart, all scaled down by it: a run that fails or gives the same answer shows
    nothing. One way is not enough: how many full hours "20 seconds and 30 seconds" make is 0 read
    as minutes too, and 7 times as many minutes make 5."""
    answer = run(values) if names else None
    if answer is None:
        return False
    for factor in (SCALE, 1 / SCALE):
        other = run({k: v * factor if k in names and _numeric(v) else v for k, v in values.items()})
        if other is None or answers_match(answer, other):
            return False
    return True


def learn(
    profile: dict[str, Any],
    written: Words,
    values: dict[str, Any],
    run: Callable[[dict[str, Any]], Any],
) -> Records:
    """Learns ``written`` (a refusal's words where the entry accepts none, by record and variable,
    :func:`_unaccepted`), in place, where the entry's program (``run``) gave the right answer on
    ``values``, the caller's evidence, and that answer shows the words right: it changes with the
    worded variables' values all scaled by one factor, up and down (:func:`_unit_shown`), so it
    depends on the unit they are written in. Where it does not (a share, a ratio, a percent change,
    a floor that is 0 either way), the answer comes out alike in the request's unit: "1800 seconds
    of a 5400 seconds film" gives the minutes' answer, and learning "seconds" would pass "30 minutes
    of a 5400 seconds film", served 30/5400.

    One variable's word, every other recorded variable written with its examples' own, is a word
    for what the examples wrote ("mins", "geese"): it joins the variable's accepted words
    (:func:`accept`). Words of several variables (or one beside a number written with no word) are
    learned as one set (``profile["learned_words"]``), which a later request must write all
    together (:func:`_fits`): "4 kg of flour and 4 kg of sugar" gives a grams sum's 8 because the sum
    counts in the request's own unit, which shows nothing about 500 grams of flour beside 2 kg of
    sugar. Returns what was new, by record and variable."""
    names = {name for by_name in written.values() for name, w in by_name.items() if w}
    if not _unit_shown(values, names, run):
        return {}
    said = {k: {n: [w] for n, w in by_name.items() if w} for k, by_name in written.items()}
    said = {k: by_name for k, by_name in said.items() if by_name}
    if len([w for by_name in written.values() for w in by_name.values()]) == 1:
        return accept(profile, said)
    records = {record.key: accepted(profile, record.key) for record in RECORDS}
    known = learned_sets(profile)
    held = all(n in records.get(k, {}) for k, by_name in written.items() for n in by_name)
    if not held or any(_same_set(written, found) for found in known):
        return {}  # a record or variable this version does not keep, or a set already learned
    profile.update(records)  # an older entry's records as they read (:func:`accepted`)
    profile[LEARNED] = [*known, {k: dict(by_name) for k, by_name in written.items()}]
    return said


def accept(profile: dict[str, Any], written: Records) -> Records:
    """Adds ``written`` (words by record and variable) to the profile's accepted words, in place;
    returns what was new."""
    new: Records = {}
    records = {record.key: accepted(profile, record.key) for record in RECORDS}
    for key, by_name in written.items():
        record = records.get(key)
        if record is None:  # a record this version does not keep: nothing to widen
            continue
        for name, words in by_name.items():
            known = record.get(name)
            if known is None:  # the record no longer holds the variable: nothing to widen
                continue
            added = [w for w in words if not any(same_word(w, a) for a in known)]
            if added:
                record[name] = sorted({*known, *added})
                new.setdefault(key, {})[name] = added
    profile.update(records)  # an older entry's records as they read (:func:`accepted`)
    return new


def merged_written(
    ours: dict[str, Any], theirs: dict[str, Any], names: dict[str, str]
) -> dict[str, Any]:
    """The accepted words of two merged groups (``theirs`` renamed by ``names``): a variable both
    records hold accepts every word either accepts ("cookies" and "marbles"), since a merge joins
    groups of one computation and each group's words were validated against it; a word neither
    accepts is still refused. A variable only one records holds none: the other group's examples
    wrote other words there, or too few to record one. The word sets either group learned
    (:func:`learn`) stay sets, each where the merged records still hold all its variables."""
    out: dict[str, Any] = {}
    for record in RECORDS:
        mine = accepted(ours, record.key)
        other = {names.get(k, k): w for k, w in accepted(theirs, record.key).items()}
        out[record.key] = {k: sorted({*w, *other[k]}) for k, w in mine.items() if k in other}
    sets: list[Words] = []
    renamed = [
        {k: {names.get(n, n): w for n, w in by_name.items()} for k, by_name in found.items()}
        for found in learned_sets(theirs)
    ]
    for found in [*learned_sets(ours), *renamed]:
        held = all(n in out.get(k, {}) for k, by_name in found.items() for n in by_name)
        if held and not any(_same_set(found, kept) for kept in sets):
            sets.append(found)
    out[LEARNED] = sets
    return out


def with_pairs(
    profile: dict[str, Any], pairs: list[Pair], run: Callable[[dict[str, Any]], Any]
) -> dict[str, Any]:
    """The profile's accepted words and learned word sets, and with them the words ``pairs`` write
    with the recorded variables' numbers that :func:`learn` learns. For a join
    (minicache.build.join): each joined example was run through the entry's own program (``run``)
    in the sandbox and gave its answer, the evidence a reviewed refusal has for a request's words.
    Learned from the joined examples alone, the record would be empty (one example records nothing,
    :func:`learn_written` asks for two), and a merge keeps a variable's words only where both groups
    record some (:func:`merged_written`): the entry's words would be lost."""
    out: dict[str, Any] = {record.key: accepted(profile, record.key) for record in RECORDS}
    out[LEARNED] = learned_sets(profile)
    for text, vals in pairs:
        shape, _names, why = _unaccepted(out, vals, text)
        if why and shape is not None and not _fits(out, shape):
            learn(out, shape, vals, run)
    return out
