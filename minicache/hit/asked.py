"""What a question asks for: the words of its asked quantity ("How many *minutes* ...", "What is
the *gross margin* of ...", "Calculate the *perimeter* ...").

Two requests can write the same numbers beside the same words and still ask for different quantities
of them: the minutes a practice takes and its hours, a plot's area and its perimeter, a product's
markup and its margin. The words that name the quantity stand in a few places in an English
question: after "how many" or "how much" ("how long", "how old": the adjective is a word of it),
after "what is (the)" and its tenses, and after an imperative such as "calculate (the)".
:func:`asked_phrase` reads the words from there to the first number, punctuation mark or stop word
(a preposition, auxiliary or conjunction: "the NPV *of* the project" asks for "npv"), on past "of"
after a word that names no quantity ("the number of hours") and with the unit of a closing "in"
("time in hours"); :func:`minicache.hit.wording.asked_words` keeps its words but function words, in
lower case. A possessive's owner is no part of it ("the project's NPV" asks for "npv" too).

A question with no such phrase ("Current ratio, please") asks for nothing this module can read; the
wording check looks for an entry's asked words anywhere in a request's question, so such a request
may still write them (:mod:`minicache.hit.wording`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Where an asked quantity starts: right after one of these (case-insensitive); after "how" the
# adjective ("how *long*", "how *old*") is the phrase's first word.
_OPENER = re.compile(
    r"\b(?:(?:how\s+(?:many|much)(?:\s+(?:is|was|are|were))?"
    r"|what(?:['’]s|\s+(?:is|was|are|were|will\s+be|would\s+be))"
    r"|calculate|compute|find|determine|estimate)\b"
    r"(?:\s+(?:the|its|their|his|her|a|an|total\s+of\s+the))?\s+"
    r"|how\s+(?=(?:long|far|old|big|tall|large)\b))",
    re.I,
)
# A phrase's words: letters, with inner apostrophes, hyphens, slashes and brackets ("P/E",
# "(FV)", "year-end", "project's").
_TOKEN = re.compile(r"[A-Za-z(][A-Za-z'’/()\-]*")
# Words that end the asked quantity: prepositions, auxiliaries and conjunctions ("the NPV *of*",
# "How many apples *does*", "the difference *between*").
STOPS = frozenset(
    """
    of for if in on at to from by with after before between during over under into since until
    using given when where while that which who whom whose than as
    does do did is are was were be been will would can could should shall may might must has have
    had and or but so then this these those it they he she we you i there what how why
    """.split()
)
_POSSESSIVE = re.compile(r"(?:['’]s|s['’])$")
# Words that name no quantity of their own: "the number *of* hours" asks for hours, so the phrase
# reads on past "of" after them.
GENERIC = frozenset("number value amount total sum count quantity".split())
MAX_WORDS = 6  # an asked quantity is a short noun phrase; longer runs are a clause


def asked_phrase(question: str) -> str | None:
    """The asked quantity's text in ``question`` (its last one: a question's ask comes last, after
    the story), or None where no opener stands before a word. A possessive owner is left out ("the
    project's NPV" asks for "NPV")."""
    return next(asked_phrases(question), None)


def asked_phrases(question: str) -> Iterator[str]:
    """Every asked phrase of ``question``, the last first: a caller skips one that names no
    quantity ("Compute *your answer* to 2 decimals" after the question)."""
    for opener in reversed(list(_OPENER.finditer(question))):
        kept = [w for w in _phrase_at(question, opener.end()) if not _POSSESSIVE.search(w)]
        if kept:
            yield " ".join(kept)


def _phrase_at(question: str, start: int) -> list[str]:
    """The phrase's words from ``start``: up to a stop word, a number or a punctuation mark, on past
    "of" after generic words only ("the total number of hours"), and with the unit of a closing "in
    <unit>" ("How much time in hours does ...")."""
    words: list[str] = []
    end = start
    tokens = _TOKEN.finditer(question, start)
    for token in tokens:
        if question[end : token.start()].strip() or len(words) == MAX_WORDS:
            break  # a number or a punctuation mark ends the phrase
        word = token.group()
        lower = word.lower().strip("()")
        end = token.end()
        if lower == "of" and words and all(w.lower() in GENERIC for w in words):
            continue
        if lower == "in" and words:
            unit = next(tokens, None)
            if unit and not question[end : unit.start()].strip() and _closes(question, unit.end()):
                words.append(unit.group())
            break
        if lower in STOPS:
            break
        words.append(word)
    return words


def _closes(question: str, at: int) -> bool:
    """Whether the phrase ends at ``at``: the question ends, or a punctuation mark or a stop word
    follows."""
    first = re.match(r"[A-Za-z]+", question[at : at + 40].lstrip())
    return first is None or first.group().lower() in STOPS
