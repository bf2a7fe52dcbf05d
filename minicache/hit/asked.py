"""What a question asks for: the words of its asked quantity ("How many *minutes* ...", "What is
the *gross margin* of ...", "Calculate the *perimeter* ...").

Two requests can write the same numbers beside the same words and still ask for different quantities
of them: the minutes a practice takes and its hours, a plot's area and its perimeter, a product's
markup and its margin. The words that name the quantity stand in a few places in an English
question: after "how many" or "how much" ("how long", "how old": the adjective is a word of it),
after "what is (the)" and its tenses or a noun right after "what" ("What *price* ..."), and after
an imperative such as "calculate (the)", "find out" or "tell me (the)".
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
    r"|calculate|compute|find(?:\s+out)?|determine|estimate|tell\s+me|give(?:\s+me)?)\b"
    r"(?:\s+(?:the|its|their|his|her|a|an|total\s+of\s+the))?\s+"
    r"|how\s+(?=(?:long|far|old|big|tall|large)\b)"
    # "What *price* does she pay", "What *percentage* of ...": the noun right after "what"
    r"|what\s+(?!(?:is|was|are|were|will|would|does|do|did|has|have|had|can|could|should|if)\b)"
    r"(?=[A-Za-z]))",
    re.I,
)
# "How much *does* the buyer pay": the quantity is named by the verb, which no noun record names.
_BY_VERB = re.compile(
    r"\bhow\s+(?:many|much)\s+(?:does|do|did|will|would|can|could|should|must|has|have|had)\b",
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


def asked_by_verb(question: str) -> bool:
    """Whether ``question`` asks "how much/many" of a verb ("How much *does the buyer pay*", "How
    much *will* Tom have"): a quantity no asked phrase names, so no recorded noun can vouch that it
    is the one the entry computes."""
    return _BY_VERB.search(question) is not None


def asked_phrase(question: str) -> str | None:
    """The asked quantity's text in ``question`` (its last one: a question's ask comes last, after
    the story), or None where no opener stands before a word. A possessive owner is left out ("the
    project's NPV" asks for "NPV")."""
    return next(asked_phrases(question), None)


def asked_phrases(question: str) -> Iterator[str]:
    """Every asked phrase of ``question``, the last first: a caller skips one that names no
    quantity ("Compute *your answer* to 2 decimals" after the question)."""
    for kept, _end in _phrases(question):
        yield " ".join(kept)


def _phrases(question: str) -> Iterator[tuple[list[str], int]]:
    """Each asked phrase's words but a possessive owner, and where the phrase ends, the last first;
    openers before no word are skipped."""
    for opener in reversed(list(_OPENER.finditer(question))):
        words, end = _phrase_at(question, opener.end())
        kept = [w for w in words if not _POSSESSIVE.search(w)]
        if kept:
            yield kept, end


def asked_of(question: str) -> list[str] | None:
    """What ``question``'s asked quantity is asked of, in order: the words after its phrase's "of"
    ("the ratio of *boys to girls*", "What percentage of *the selling price*"), up to a number, a
    punctuation mark or a stop word other than "to" and "and", lower case; ``[]`` where the phrase
    is not followed by "of", None where no phrase names a quantity. Two requests asking for one
    quantity of other things, or of the same things the other way round ("girls to boys"), ask
    for another number."""
    for kept, end in _phrases(question):
        if not {w.lower() for w in kept} - _FUNCTION - _NO_QUANTITY:
            continue  # "Give *your answer* as a decimal" after the question names nothing
        of = _OF.match(question, end)
        if of is None:
            return []
        operands: list[str] = []
        at = of.end()
        for token in _TOKEN.finditer(question, of.end()):
            lower = token.group().lower().strip("()")
            if question[at : token.start()].strip() or len(operands) == MAX_WORDS:
                break
            at = token.end()
            if lower == "of" and operands and operands[-1] in GENERIC:
                operands.pop()  # "the number of boys to the number of girls": boys to girls
                continue
            if lower in STOPS and lower not in ("to", "and"):
                break
            if not _POSSESSIVE.search(lower):  # "Yew's boys": the owner is no operand
                operands.append(lower)
        return operands
    return None


_OF = re.compile(r"\s*of\s+", re.I)


def _phrase_at(question: str, start: int) -> tuple[list[str], int]:
    """The phrase's words from ``start``: up to a stop word, a number or a punctuation mark, on past
    "of" after generic words only ("the total number of hours"), and with the unit of a closing "in
    <unit>" ("How much time in hours does ..."); and where the phrase ends."""
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
                end = unit.end()
            break
        if lower in STOPS:
            end = token.start()
            break
        words.append(word)
    return words, end


def _closes(question: str, at: int) -> bool:
    """Whether the phrase ends at ``at``: the question ends, or a punctuation mark or a stop word
    follows."""
    first = re.match(r"[A-Za-z]+", question[at : at + 40].lstrip())
    return first is None or first.group().lower() in STOPS


ASKED_OF = "asked_of"  # a profile's record: what every example asked its quantity of, in order
OTHER_OPERANDS = "(of other things)"  # a refusal's word for them: one review key, whatever they are
_FUNCTION = STOPS | {"the", "a", "an", "all", "its", "their", "his", "her", "our", "your"}
_NO_QUANTITY = {"answer", "result"}


def operands(question: str) -> list[str] | None:
    """The words of what ``question``'s asked quantity is asked of (:func:`asked_of`), without
    function words, lower case and singular ("boys to girls": ["boy", "girl"]); [] for nothing,
    None where no phrase names a quantity."""
    found = asked_of(question)
    if found is None:
        return None
    return [re.sub(r"(?<=[a-z]{3})s$", "", w) for w in found if w not in _FUNCTION and len(w) > 2]


def common_operands(questions: list[str]) -> list[str] | None:
    """What every one of ``questions`` that asks for a quantity asked it of, where two or more ask
    and all alike name the same things; None otherwise. Examples that asked it of nothing record
    nothing: a request that adds an owner ("the current ratio *of a pet supply shop*") asks for the
    same number, and refusing those refused 50 of Formula's 849 later requests (5.9%) and 45 of
    TAT-QA dev's 635 (7.1%), on the datasets' own groups, where a named record refused none."""
    found = [o for o in map(operands, questions) if o is not None]
    same = len(found) >= 2 and all(o == found[0] for o in found)
    return found[0] if same and found[0] else None


def other_operands(profile: dict[str, list[str]], question: str) -> list[str]:
    """What ``question`` asks its quantity of where that is not what every example named, in
    order: "the ratio of *girls to boys*" or "of *boys to all students*" where they asked "of boys
    to girls". None where the question names nothing (the "of" may be left out: "the project's
    NPV") or there is no record."""
    record = profile.get(ASKED_OF)
    own = operands(question) if record is not None else None
    return own if own and own != record else []
