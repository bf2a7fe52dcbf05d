"""Reading a request in an exemplar's words, where the two differ only in names, items or units.

With ``EngineConfig.route_word_slots``, routing joins requests of one template that differ in the
words naming a person, an item or a unit (:mod:`minicache.route.slots`). Their values are read by
comparing words: an exemplar's cue words and number kinds (:mod:`minicache.hit.cues`) with the
request's. A substituted name or item among the cue words ("*Tom* has 5 *apples*") is a cue the new
request lacks, which leaves two numbers of one kind untold apart; a substituted unit the kinds know
("5 *hours*" against "5 *minutes*") changes the number's kind, and the exemplar finds no number of
its own kind.

So extraction reads such a request as the exemplar's request would have written it
(:func:`in_exemplar_words`): each exemplar keeps its request's skeleton (``exemplar["skeleton"]``,
:func:`minicache.hit.exemplars.learn_exemplar`); the request's skeleton is aligned with it word by
word as routing aligns two requests (:func:`minicache.route.slots.substitution`), and each word the
alignment substituted is written back as the exemplar's word. Rules, alignment, the value checks and
the corroboration of the reading then compare words as for a request with the exemplar's own names,
and ask the same of it: nothing is waived. The numbers are not touched: a rewriting that would change
any number's value ("quarterly" for "monthly", "million" for "billion") is not made.

Not rewritten: a request that already has an exemplar's words, a request of an entry with a text
variable (its value is the request's own words: "Nike shoes" must not be read as "Adidas shoes"),
and a request whose substituted word also occurs where the skeleton masks a value (inside a
quotation, say), which the alignment did not see.
"""

from __future__ import annotations

import re
from typing import Any

from minicache.hit.cues import positions
from minicache.route.router import skeleton
from minicache.route.slots import substitution, words
from minicache.store.base import Entry

__all__ = ["in_exemplar_words"]


def _lower(seq: tuple[str, ...]) -> list[str]:
    return [w.lower() for w in seq]


def in_exemplar_words(entry: Entry, text: str) -> str:
    """``text`` with the words it substitutes for the first of ``entry``'s exemplars it aligns with
    written as that exemplar's words; ``text`` itself where none is to be rewritten (module
    docstring)."""
    if any(v.type == "string" for v in entry.template):
        return text
    exemplars: list[dict[str, Any]] = (entry.validation.get("profile") or {}).get("exemplars") or []
    theirs = [words(ex["skeleton"]) for ex in exemplars if isinstance(ex.get("skeleton"), str)]
    if not theirs:
        return text
    mine = words(skeleton(text))
    if any(_lower(seq) == _lower(mine) for seq in theirs):
        return text
    for seq in theirs:
        pairs = substitution(mine, seq)
        if pairs:
            read = _rewritten(text, mine, pairs, seq)
            if read is not None:
                return read
    return text


def _rewritten(
    text: str, mine: tuple[str, ...], pairs: dict[str, str], theirs: tuple[str, ...]
) -> str | None:
    """``text`` with every word ``pairs`` names replaced by its partner (its first letter's case
    kept), or None where a replaced word also occurs outside the skeleton's words, the result's
    skeleton is not the exemplar's, or a number would read otherwise."""
    letters = "[^\\W\\d_]"  # the word boundaries of minicache.route.slots.words
    found = re.compile(
        f"(?<!{letters})(?:{'|'.join(map(re.escape, pairs))})(?!{letters})", re.IGNORECASE
    )
    low = _lower(mine)
    if len(found.findall(text)) != sum(low.count(x) for x in pairs):
        return None

    def partner(m: re.Match[str]) -> str:
        y = pairs[m.group().lower()]
        return y[:1].upper() + y[1:] if m.group()[:1].isupper() else y

    read = found.sub(partner, text)
    if _lower(words(skeleton(read))) != _lower(theirs):
        return None
    if [p.values() for p in positions(read)] != [p.values() for p in positions(text)]:
        return None
    return read
