"""What a question asks for: the words of its asked quantity ("How many *minutes* ...", "What is
the *gross margin* of ...", "Calculate the *perimeter* ...").

Two requests can write the same numbers beside the same words and still ask for different
quantities of them: the minutes a practice takes and its hours, a plot's area and its perimeter, a
product's markup and its margin. The words that name the quantity stand in a few places in an
English question: after "how many" or "how much", after "what is (the)" and its tenses, and after
an imperative such as "calculate (the)". :func:`asked_phrase` reads the words from there to the
first function word, number or punctuation mark ("the NPV *of* the project" asks for "npv"), and
:func:`minicache.hit.wording.asked_words` keeps its content words. A possessive's owner is no part
of it ("the project's NPV" asks for "npv" too).

A question with no such phrase ("Current ratio, please") asks for nothing this module can read; the
wording check then looks for the asked words anywhere in its question (:mod:`minicache.hit.wording`).
"""

from __future__ import annotations

import re

# Where an asked quantity starts: right after one of these (case-insensitive).
_OPENER = re.compile(
    r"\b(?:how\s+(?:many|much)"
    r"|what(?:'s|\s+(?:is|was|are|were|will\s+be|would\s+be))"
    r"|calculate|compute|find|determine|estimate)\b"
    r"(?:\s+(?:the|its|their|his|her|a|an|total\s+of\s+the))?\s+",
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
MAX_WORDS = 6  # an asked quantity is a short noun phrase; longer runs are a clause


def asked_phrase(question: str) -> str | None:
    """The asked quantity's text in ``question`` (its last one: a question's ask comes last, after
    the story), or None where no opener stands before a word. A possessive owner is left out ("the
    project's NPV" asks for "NPV")."""
    for opener in reversed(list(_OPENER.finditer(question))):
        words: list[str] = []
        end = opener.end()
        for token in _TOKEN.finditer(question, opener.end()):
            if question[end : token.start()].strip() or len(words) == MAX_WORDS:
                break  # a number or a punctuation mark ends the phrase
            word = token.group()
            if word.lower().strip("()") in STOPS:
                break
            words.append(word)
            end = token.end()
        kept = [w for w in words if not _POSSESSIVE.search(w)]
        if kept:
            return " ".join(kept)
    return None
