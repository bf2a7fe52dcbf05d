"""Reading a request in an exemplar's words, where the two differ only in names or items.

With ``EngineConfig.route_word_slots``, routing joins requests of one template that differ in the
words naming a person, an item or a unit (:mod:`minicache.route.slots`). Their values are read by
comparing words: an exemplar's cue words and number kinds (:mod:`minicache.hit.cues`) with the
request's. A substituted name or item among the cue words ("*Tom* has 5 *apples*") is a cue the new
request lacks on every number alike, which leaves two numbers of one kind that only the names tell
apart untold apart.

So extraction reads such a request as the exemplar's request would have written it
(:func:`in_exemplar_words`): each numeric exemplar keeps its request's skeleton
(``exemplar["skeleton"]``, learned only with the option on,
:func:`minicache.hit.exemplars.learn_exemplar`); the request's skeleton is aligned with it word
by word as routing aligns two requests (:func:`minicache.route.slots.substitution`), and each
substituted word is written back as the exemplar's word, spelled as the exemplar's request spelled
it there. The numbers are the request's.

A substitution is read through only where every substituted pair is one of two things
(:func:`minicache.route.slots.slot_role`):

* a **name**: a Title-case word inside a sentence in both requests, as routing tells a name;
* an **item or unit**: a word that directly follows a number in both requests ("5 *apples*",
  "30 *laps*"), and only where the entry's program writes no number of its own but 0 and 1
  (:func:`constant_free`). A constant such as 60, 24, 12 or 100 may convert the unit or item a
  request names ("30 minutes" to hours is ``/ 60``, from seconds ``/ 3600``), so a request naming
  another unit or item cannot be read through the exemplar's;

and only where the rewriting leaves every number of the request its value and its kind; and only
where every place the request substitutes is one the entry's own examples varied. A build records,
for each exemplar, the places where an example the entry validated on (its program computed that
example's answer) aligns with the exemplar's request and has another word there
(``exemplar["varies"]``, :func:`varied_positions`; from every such example, a duplicate reading's
too). A role is told by where a word stands, which does not say what the word means: a comparison
word that follows a number and recurs ("5 *more* ... 3 *more*") stands where an item stands. The
record says whether the program was seen to answer right with another word in that place: where the
examples named "apples" and "pears", a request naming "books" is read as the exemplar's; where every
example had "more", a request with "fewer" is not read as one with "more". The same holds for names.

A request that aligns with an exemplar's request only through another pair (a recurring verb or
operation word: "spends" for "earns", "halve" for "triple", "monthly" for "quarterly"), through an
item or unit the program may convert, through a rewriting that would change a number ("30 points"
read as "30 percent" becomes a percentage, "30 seconds" as "30 minutes" a ``unit:minute``), or
through a word in a place the entry's examples never varied is refused (``Check.ALIGN``), and the
miss path answers it; that miss is an example of the group, so a later build's record shows the
variation where its program computes the request right. Read as written it is no better: the entry
was built on the exemplar's word, so rules and alignment would read its numbers and the entry's
program compute with them as if the word were the exemplar's (an entry that divides minutes by 60
would serve "1800 seconds" as 1800 minutes through a learned rule). Such a request reaches the entry
by routing's word slots, or by its embedding as without them; this is the one place that sees the
word it differs in.

Read as written: a request that already has an exemplar's words, one that aligns with no exemplar's
request word by word (another wording or length), and a request of an entry with a text variable (its
value is the request's own words: "Nike shoes" must not be read as "Adidas shoes"). A request whose
substituted word also occurs where the skeleton masks a value (inside a quotation, say), which the
alignment did not see, is refused. An exemplar without the record (an entry built before it
existed) reads no request through another word.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.cues import positions, same_word
from minicache.route.router import skeleton
from minicache.route.slots import slot_role, substitution, words
from minicache.store.base import Entry

__all__ = ["constant_free", "in_exemplar_words", "varied_positions"]


def _lower(seq: tuple[str, ...]) -> list[str]:
    return [w.lower() for w in seq]


def in_exemplar_words(entry: Entry, text: str) -> str:
    """``text`` with the words it substitutes for the first of ``entry``'s exemplars it may be read
    through written as that exemplar's words; ``text`` itself where it has an exemplar's words or
    aligns with none. Raises HitRefused (``Check.ALIGN``) where it aligns with an exemplar only
    through words it may not be read through (module docstring)."""
    if any(v.type == "string" for v in entry.template):
        return text
    exemplars: list[dict[str, Any]] = (entry.validation.get("profile") or {}).get("exemplars") or []
    theirs = [
        (words(ex["skeleton"]), frozenset(ex.get("varies") or ()))
        for ex in exemplars
        if isinstance(ex.get("skeleton"), str)
    ]
    if not theirs:
        return text
    mine = words(skeleton(text))
    if any(_lower(seq) == _lower(mine) for seq, _ in theirs):
        return text
    items = constant_free(entry.program)  # whether an item or unit may be read as the exemplar's
    unread: list[str] = []
    for seq, varied in theirs:
        pairs = substitution(mine, seq)
        if not pairs:
            continue
        named = ", ".join(f"{x!r} for {y!r}" for x, y in pairs.items())
        roles = {x: slot_role(mine, seq, x) for x in pairs}
        other = [x for x, role in roles.items() if role is None]
        if other:
            unread.append(f"{named}: {other[0]!r} names neither a person nor an item")
        elif "item" in roles.values() and not items:
            unread.append(f"{named}: the program writes a constant that may depend on the unit")
        else:
            read, why = _rewritten(text, mine, pairs, seq)
            unvaried = [i for i in _differing(mine, seq) if i not in varied]
            if read is not None and unvaried:
                word = seq[unvaried[0]]
                read, why = None, f"the entry's examples never had another word than {word!r} there"
            if read is not None:
                return read
            unread.append(f"{named}: {why}")
    if unread:
        raise HitRefused(
            Check.ALIGN, f"the request is an exemplar's but for {unread[0]}; read otherwise"
        )
    return text


def varied_positions(exemplar_skeleton: str, skeletons: list[str]) -> list[int]:
    """The places (word indices of :func:`minicache.route.slots.words`) where a skeleton of
    ``skeletons`` that aligns with ``exemplar_skeleton`` as routing aligns two requests
    (:func:`minicache.route.slots.substitution`) has another word than the exemplar's (not the same
    word in another number: :func:`minicache.hit.cues.same_word`): where the entry's own examples
    show its template answered right with other words. A build records them for each exemplar from
    the examples its entry validated on (:func:`minicache.hit.profile.learn_exemplars`)."""
    theirs = words(exemplar_skeleton)
    varied: set[int] = set()
    for other in skeletons:
        seq = words(other)
        if substitution(seq, theirs):
            varied.update(_differing(seq, theirs))
    return sorted(varied)


def _differing(a: tuple[str, ...], b: tuple[str, ...]) -> list[int]:
    """Where two aligned word sequences have other words: not alike but for case and a regular
    plural ending (:func:`minicache.hit.cues.same_word`), as the word after a number is told apart
    (minicache.hit.words_after). "apple" for "apples" shows no other item in that place."""
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not same_word(x, y)]


def constant_free(program: str) -> bool:
    """Whether ``program`` writes no number of its own but 0 and 1 (its parameters' defaults, which
    are a request's values, aside). A program that does not parse counts as writing one."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return False
    defaults = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for node in ast.walk(fn.args)
    }
    return all(
        n.value in (0, 1)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and id(n) not in defaults
        and isinstance(n.value, (int, float, complex))
        and not isinstance(n.value, bool)
    )


def _rewritten(
    text: str, mine: tuple[str, ...], pairs: dict[str, str], theirs: tuple[str, ...]
) -> tuple[str | None, str]:
    """``text`` with every word ``pairs`` names replaced by the exemplar's word at the same place,
    spelled as there ("McDonald" stays "McDonald"); or None, with why, where a replaced word also
    occurs outside the skeleton's words, the result's skeleton is not the exemplar's, or a number
    would read otherwise (another value or another kind)."""
    letters = "[^\\W\\d_]"  # the word boundaries of minicache.route.slots.words
    found = re.compile(
        f"(?<!{letters})(?:{'|'.join(map(re.escape, pairs))})(?!{letters})", re.IGNORECASE
    )
    low = _lower(mine)
    at = [i for i, w in enumerate(low) if w in pairs]
    matches = list(found.finditer(text))
    if len(matches) != len(at) or any(
        m.group().lower() != low[i] for m, i in zip(matches, at, strict=True)
    ):
        return None, "a substituted word also occurs where a value is masked"
    spelled = iter([theirs[i] for i in at])
    read = found.sub(lambda m: next(spelled), text)
    if _lower(words(skeleton(read))) != _lower(theirs):
        return None, "the rewritten request is not the exemplar's"
    numbers = [(p.kind, p.values()) for p in positions(text)]
    if [(p.kind, p.values()) for p in positions(read)] != numbers:
        return None, "a number would read as another value or kind"
    return read, ""
