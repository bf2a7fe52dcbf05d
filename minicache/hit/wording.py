"""The words every validated example writes, which a hit's request must write too.

Every other hit check reads a request's numbers and the words right beside them. A request that
keeps those and asks for something else passes them all: "How many *minutes* ..." to an entry whose
examples all asked "How many *hours* ..." (its program divides by 60), or "5 *fewer*" where every
example wrote "5 *more*". The entry was shown right on requests that wrote those words; one that
does not write them is a request it was never shown right for, so it is refused
(:attr:`~minicache.hit.checks.Check.WORDING`) and the miss path answers it.

The words are the content words every validated example's question writes (``profile["wording"]``;
a context, such as a table, is the request's data, not its question), compared in lower case with a
plural's final "s" dropped. Function words ("the", "what", "many") and names never count: requests
of one computation vary them freely; nor does the word right after a number, which the word-after
check reads. With fewer than two examples there is no record: one request's words are all its own.
The check runs after every other hit check (:meth:`minicache.hit.verify.HitVerifier.extract`), so a
request another check refuses is refused for that check's reason, and reviewed as its refusals are.

A refusal is reviewed like the others (:mod:`minicache.hit.refusals`): where the entry's program
on the request's values gives the miss path's answer, the words the request left out stop being
required ("exercises" where every example wrote "practices"); where it does not, nothing is learned and the
wording stays refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.request import CONTEXT_SEPARATOR

KEY = "wording"
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_AFTER_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?\s*-?\s*([A-Za-z]+)")
# Words that say nothing about what a request computes: articles, pronouns, auxiliaries,
# prepositions and question words. Words that do ("more", "fewer", "each", "left", "per", "total")
# are not here.
FUNCTION_WORDS = frozenset(
    """
    a an the and or but if then than that this these those there here it its it's they them their
    he him his she her hers we us our you your i me my mine who whom whose which what when where why
    how many much is are was were be been being am do does did done has have had having will would
    shall should can could may might must of in on at to for from by with about as into onto over
    under up down out off so such not no nor only also just very too all any some both either
    neither one's s let lets given give find calculate compute determine say suppose assume
    following based using use value values number numbers
    """.split()
)


def content_words(text: str, *, openers: bool = False) -> set[str]:
    """The content words of ``text``: lower case, at least three letters, a plural's "s" dropped.
    Left out: function words; names (capitalized words: a story told of "Anna" computes what one
    of "Tom" does); and the word right after a number, which the word-after check reads as its unit
    or scale ("30 *minutes*", "$5 *million*", :mod:`minicache.hit.words_after`). Acronyms ("CPI",
    "EBITDA") count. ``openers``: a capitalized word that opens a sentence counts too, in lower
    case. A request's words are read so ("Current ratio please" writes "current"); an example's are
    not, since the word may be a name ("Tom has 5 apples"), which no request need write."""
    after_number = {m.start(1) for m in _AFTER_NUMBER.finditer(text)}
    words = set()
    for match in _WORD.finditer(text):
        raw = match.group()
        if match.start() in after_number or _is_name(text, match.start(), raw, openers):
            continue
        word = raw.lower()
        if word in FUNCTION_WORDS or len(word) < 3:
            continue
        words.add(_singular(word))
    return words


def _is_name(text: str, start: int, word: str, openers: bool) -> bool:
    """A capitalized word ("Anna", "Monday"), but for one that opens a sentence where ``openers``."""
    if not word[0].isupper() or word.isupper():
        return False
    if not openers:
        return True
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i >= 0 and text[i] not in ".!?:\n\"'("


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def question_of(text: str) -> str:
    """The question of a request's text, without its context: a table or document is data the
    program reads, and each request brings its own (another company's report)."""
    return text.split(CONTEXT_SEPARATOR, 1)[0]


def learn_wording(texts: Iterable[str]) -> dict[str, list[str]]:
    """``{"wording": [...]}``: the content words every one of ``texts``' questions writes, for the
    profile; nothing from fewer than two."""
    sets = [content_words(question_of(t)) for t in texts]
    if len(sets) < 2:
        return {}
    return {KEY: sorted(set.intersection(*sets))}


def missing_words(profile: dict[str, Any], text: str) -> list[str]:
    """The recorded words ``text`` does not write (none for a profile without a record)."""
    required = profile.get(KEY) or []
    if not required:
        return []
    written = content_words(question_of(text), openers=True)
    return [w for w in required if w not in written]


def check_wording(profile: dict[str, Any], text: str, values: dict[str, Any]) -> None:
    """Refuse a request that leaves out a word every validated example wrote; the refusal carries
    the values the hit would have served and the words it left out (for the review)."""
    missing = missing_words(profile, text)
    if missing:
        raise HitRefused(
            Check.WORDING,
            "every validated example wrote "
            + ", ".join(repr(w) for w in missing)
            + "; this request does not",
            readings={"hit": dict(values), "wording": {"missing": missing}},
        )


def without(profile: dict[str, Any], words: Iterable[str]) -> list[str]:
    """The recorded words less ``words``: what a reviewed refusal leaves required."""
    dropped = set(words)
    return [w for w in profile.get(KEY) or [] if w not in dropped]


def merged_wording(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, list[str]]:
    """The record of two merged groups: the words both require (each group's requests write only
    its own wording, and the merged entry serves both)."""
    if KEY not in ours or KEY not in theirs:
        return {}
    return {KEY: sorted(set(ours[KEY]) & set(theirs[KEY]))}
