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

A question that writes an operation word none of the examples wrote ("How many *more* pages" of an
entry that adds them: ``OPERATION_WORDS``, recorded as ``profile["operations"]``) is refused, and so
is one that does not write the words of the quantity every example asked for (``profile["asked"]``,
read from each example's asked phrase by :mod:`minicache.hit.asked`: "How many *hours*", "What is
its *area*"), or whose own asked phrase shares none of them ("What is the *sale price*" where the
examples asked for "the discount", even where its story writes "a 20% discount").
``VerifyConfig.wording`` chooses what is checked: ``operations`` the operation words only; ``asked``
(the default) the asked quantity's words as well; ``full`` every content word as well. Learned from
the two or three examples a build validates on, the content words hold words the examples share by
chance ("company", "portfolio"), and on the Formula stream the full check refused most early
would-be hits (docs/hits.md); the asked quantity's words are few and seldom incidental.

A refusal is reviewed like the others (:mod:`minicache.hit.refusals`): where the entry's program
on the request's values gives the miss path's answer, that answer is evidence for each word the
request left out or added (``profile["wording_evidence"]``), and a word with evidence from two
refusals that answered differently stops being required, or joins the operation words ("exercises"
where every example wrote "practices"). One match is not enough: a 6 by 3 plot's perimeter is 18,
as its area is, and learned from it an area entry would serve every later perimeter request. Where
the answers differ, nothing is learned and the wording stays refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from minicache.config.engine import Wording
from minicache.errors import HitRefused
from minicache.hit.asked import (
    ASKED_OF,
    OTHER_OPERANDS,
    asked_by_verb,
    asked_phrases,
    common_operands,
    other_operands,
)
from minicache.hit.checks import Check
from minicache.programs.tables import without_row
from minicache.request import CONTEXT_SEPARATOR

KEY = "wording"
OPERATIONS = "operations"  # the operation words the examples' questions wrote (any of them)
ASKED = "asked"  # the words of the asked quantity every example's question wrote
ASKED_ALSO = "asked_also"  # other words a request's asked quantity was shown to name (reviews)
# Words of an asked phrase that name no quantity: "dollars *per* day" asks what "each day" does,
# "apples in *total*" what "apples" does, and "your *answer*" in "Compute your answer to 2
# decimals" is no quantity at all.
ASKED_IGNORED = frozenset("per each total all answer result known".split())
# What a question that asks "how much" of a verb ("How much does the buyer pay") asks for, as an
# asked word: no noun of a record names it, and a review can learn that it is the entry's quantity.
BY_VERB = "(named by a verb)"
EVIDENCE = "wording_evidence"  # word -> the miss answers of refusals its review matched
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
# Possessive, and never started inside a number: a run of thousands of digits or spaces is read once.
_AFTER_NUMBER = re.compile(r"(?<![\d,])\d[\d,]*+(?:\.\d++)?+\s*+-?\s*+([A-Za-z]+)")
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
# Words that name an operation: a question that writes one no example wrote asks another
# computation of the same numbers ("How many *more* pages" of an entry that adds them). Only words
# that seldom mean anything else: "total" is also a verb ("liabilities total $16,000"), "each" and
# "per" describe a price as often as they divide.
OPERATION_WORDS = frozenset(
    """
    more less fewer difference twice half double triple average remaining increase decrease
    change percent percentage combined altogether loss deficit decline negative
    """.split()
)
# Reviewed refusals whose answers matched that a word needs before the review trusts it: one match
# can be a coincidence (a 6 by 3 plot's perimeter is its area, 18).
EVIDENCE_NEEDED = 2


def content_words(text: str, *, openers: bool = False) -> set[str]:
    """The content words of ``text``: lower case, at least three letters, a plural's "s" dropped.
    Left out: function words; names (a capitalized word standing alone inside a sentence: a story
    told of "Anna" computes what one of "Tom" does; capitalized words side by side are a term and
    count, "Gross Margin"); and the word right after a number, which the word-after check reads as
    its unit or scale ("30 *minutes*", "$5 *million*", :mod:`minicache.hit.words_after`). Acronyms
    ("CPI", "EBITDA") count. ``openers``: a capitalized word that opens a sentence counts too, in
    lower case. A request's words are read so ("Current ratio please" writes "current"); an
    example's are not, since the word may be a name ("Tom has 5 apples"), which no request need
    write."""
    after_number = {m.start(1) for m in _AFTER_NUMBER.finditer(text)}
    matches = list(_WORD.finditer(text))
    words = set()
    for i, match in enumerate(matches):
        raw = match.group()
        if match.start() in after_number:
            continue
        if _capitalized(raw) and not _in_term(text, matches, i):
            if not (openers and _opens_sentence(text, match.start())):
                continue
        word = raw.lower()
        if word in FUNCTION_WORDS or len(word) < 3:
            continue
        words.add(_singular(word))
    return words


def operation_words(text: str) -> set[str]:
    """The operation words of ``text``, wherever they stand ("3 *more*" too)."""
    return {_singular(w.lower()) for w in _WORD.findall(text)} & OPERATION_WORDS


def asked_words(question: str) -> set[str] | None:
    """The content words of ``question``'s asked quantity (:mod:`minicache.hit.asked`: "How many
    *minutes*"), from its last asked phrase that names one, or None where none does."""
    for phrase in asked_phrases(question):
        words = plain_words(phrase) - ASKED_IGNORED
        if words:  # a phrase of function words only ("the value") names no quantity
            return words
    return None


def plain_words(text: str) -> set[str]:
    """Every word of ``text`` but function words and words under three letters, in lower case with
    a plural's "s" dropped: names, capitalized words and words right after a number count too."""
    return {
        _singular(w.lower())
        for w in _WORD.findall(text)
        if w.lower() not in FUNCTION_WORDS and len(w) >= 3
    }


def _capitalized(word: str) -> bool:
    return word[0].isupper() and not word.isupper()


def _in_term(text: str, matches: list[re.Match[str]], i: int) -> bool:
    """Whether the capitalized word ``matches[i]`` stands beside another capitalized word (only a
    space or a hyphen between them): a term such as "Net Present Value", not a name alone."""
    for j in (i - 1, i + 1):
        if 0 <= j < len(matches) and _capitalized(matches[j].group()):
            a, b = sorted((matches[i], matches[j]), key=lambda m: m.start())
            if text[a.end() : b.start()] in (" ", "-"):
                return True
    return False


def _opens_sentence(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in ".!?:\n\"'("


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("xes", "ches", "shes", "sses")):
        return word[:-2]  # taxes, inches, dishes, classes
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def question_of(text: str) -> str:
    """The question of a request's text, without its context: a table or document is data the
    program reads, and each request brings its own (another company's report). The words that name
    a row of its table are left out too (:func:`minicache.programs.tables.without_row`): "the
    change in *net loss*" asks what "the change in *revenue*" does, as routing reads it."""
    question, _, context = text.partition(CONTEXT_SEPARATOR)
    return without_row(question, context or None, mask="")


def learn_wording(texts: Iterable[str]) -> dict[str, list[str]]:
    """The profile's records: the content words every one of ``texts``' questions writes
    (``"wording"``), the operation words any of them writes (``"operations"``) and the words of the
    asked quantity every one that has an asked phrase writes (``"asked"``); nothing from fewer
    than two."""
    questions = [question_of(t) for t in texts]
    if len(questions) < 2:
        return {}
    required = set.intersection(*(content_words(q) for q in questions))
    operations = set().union(*(operation_words(q) for q in questions))
    of = common_operands(questions)
    return {
        KEY: sorted(required),
        OPERATIONS: sorted(operations),
        ASKED: sorted(_common_asked(questions)),
        **({ASKED_OF: of} if of is not None else {}),
    }


def _common_asked(questions: list[str]) -> set[str]:
    """The asked words every question with an asked phrase writes; none from fewer than two such
    questions (one question's asked words may be its own)."""
    sets = [w for w in map(asked_words, questions) if w is not None]
    return set.intersection(*sets) if len(sets) >= 2 else set()


def unexpected_words(
    profile: dict[str, Any], text: str, mode: Wording = Wording.FULL
) -> tuple[list[str], list[str]]:
    """The recorded words ``text``'s question does not write, and the operation words it writes
    that no example wrote (none for a profile without the records). ``mode`` says which recorded
    words count: ``FULL`` every content word, ``ASKED`` the asked quantity's, ``OPERATIONS`` none."""
    return _unexpected(profile, question_of(text), mode)


def _unexpected(
    profile: dict[str, Any], question: str, mode: Wording
) -> tuple[list[str], list[str]]:
    """:func:`unexpected_words` of a question already read (:func:`question_of`)."""
    missing: list[str] = []
    if mode == Wording.FULL:
        written = content_words(question, openers=True)
        missing = [w for w in profile.get(KEY) or [] if w not in written]
    if mode in (Wording.FULL, Wording.ASKED):
        missing += [w for w in _unasked(profile, question) if w not in missing]
    extra: list[str] = []
    if OPERATIONS in profile and mode != Wording.OFF:
        extra = sorted(operation_words(question) - set(profile[OPERATIONS]))
    return missing, extra


def _unasked(profile: dict[str, Any], question: str) -> list[str]:
    """The recorded asked words that ``question`` does not write; none where its own asked phrase
    names the quantity as a review learned it may (``profile["asked_also"]``). They are looked for
    anywhere in the question, not only in its own asked phrase: requests of one computation name
    their quantity in many ways ("the NPV", "the accumulation at the term end"), and requiring the
    words in the request's own asked phrase refuses many more of them (docs/hits.md). Any word of
    the question counts, names and words after a number included ("What was the 2019 *revenue*",
    "the plot's *Area*"): the word after a number and its unit are the other checks'."""
    words = profile.get(ASKED) or []
    if not words:
        return []
    also = set(profile.get(ASKED_ALSO) or [])
    if also & (asked_words(question) or set()):
        return []
    written = plain_words(question)
    return [w for w in words if w not in written]


def other_quantity(profile: dict[str, Any], question: str) -> list[str]:
    """The words of the quantity ``question`` (:func:`question_of`) asks for where they share none
    with the recorded asked words (or those a review accepted, ``profile["asked_also"]``); none
    where it names no quantity or there is no record. A question that asks for "the sale price" is
    refused by an entry whose examples asked for "the discount" even where its story writes
    "discount", as word problems do ("a 20% discount ..."), and so is one that asks it of a verb
    ("How much does the buyer pay", :data:`BY_VERB`)."""
    recorded = set(profile.get(ASKED) or [])
    own = asked_words(question) if recorded else None
    if own is None and recorded and asked_by_verb(question):
        own = {BY_VERB}  # a review may learn it as any asked word (two different answers)
    if own is None or own & (recorded | set(profile.get(ASKED_ALSO) or [])):
        return []
    return sorted(own)


def missing_words(profile: dict[str, Any], text: str) -> list[str]:
    """The recorded words (every content word and the asked quantity's) ``text`` does not write."""
    return unexpected_words(profile, text)[0]


def check_wording(
    profile: dict[str, Any], text: str, values: dict[str, Any], mode: Wording = Wording.FULL
) -> None:
    """Refuse a request that writes an operation word no validated example wrote, or leaves out a
    word ``mode`` holds it to (``ASKED``: the asked quantity's words every example wrote; ``FULL``:
    every content word every one wrote); the refusal carries the values the hit would have served
    and those words (for the review)."""
    question = question_of(text)  # read once: it parses the request's table
    missing, extra = _unexpected(profile, question, mode)
    asked = mode in (Wording.ASKED, Wording.FULL)
    other = other_quantity(profile, question) if asked else []
    of = other_operands(profile, question) if asked else []
    if not missing and not extra and not other and not of:
        return
    said = []
    if missing:
        said.append(
            f"every validated example wrote {', '.join(map(repr, missing))}; this request does not"
        )
    if extra:
        said.append(
            f"this request writes {', '.join(map(repr, extra))}, which no validated example wrote"
        )
    if other:
        said.append(
            f"this request asks for {', '.join(map(repr, other))}, which no validated example "
            "asked for"
        )
    if of:
        said.append(f"this request asks it of {of}, every validated example of {profile[ASKED_OF]}")
    words = {
        "missing": missing,
        "extra": extra,
        **({"asked": other} if other else {}),
        **({"of": [OTHER_OPERANDS]} if of else {}),
    }
    raise HitRefused(
        Check.WORDING, "; ".join(said), readings={"hit": dict(values), "wording": words}
    )


def reviewed(profile: dict[str, Any], words: dict[str, list[str]], answer: Any) -> dict[str, Any]:
    """What a refusal whose values gave the miss answer ``answer`` teaches: each of its words
    (``{"missing": [...], "extra": [...], "asked": [...]}``) gains the answer as evidence, and a
    word whose evidence holds ``EVIDENCE_NEEDED`` different answers stops being required (a missing
    word), joins the operation words (an extra one) or names the entry's quantity too (a word of
    the request's own asked phrase: ``profile["asked_also"]``; the recorded asked words it left out
    are then kept, so the check stays on). Returns the changes: ``"learned"`` and ``"evidence"``."""
    evidence: dict[str, list[str]] = {k: list(v) for k, v in (profile.get(EVIDENCE) or {}).items()}
    key = repr(answer)
    learned: list[str] = []
    asked = set(profile.get(ASKED) or [])
    for kind in ("missing", "extra", "asked", "of"):
        for word in words.get(kind) or []:
            if kind == "missing" and word in asked and words.get("asked"):
                continue  # the request named the quantity otherwise: that is what is learned
            seen = evidence.setdefault(f"{kind}:{word}", [])
            if key not in seen:
                seen.append(key)
            if len(seen) >= EVIDENCE_NEEDED:
                learned.append(f"{kind}:{word}")
    for item in learned:
        kind, word = item.split(":", 1)
        evidence.pop(item, None)
        if kind == "missing":
            for record in (KEY, ASKED):
                if record in profile:
                    profile[record] = [w for w in profile[record] if w != word]
        elif kind == "asked":
            profile[ASKED_ALSO] = sorted({*(profile.get(ASKED_ALSO) or []), word})
        elif kind == "of":
            profile.pop(ASKED_OF, None)  # the entry answers other things asked of alike
        else:
            profile[OPERATIONS] = sorted({*(profile.get(OPERATIONS) or []), word})
    profile[EVIDENCE] = evidence
    return {"learned": learned, "evidence": sorted(evidence)}


def merged_wording(
    ours: dict[str, Any], theirs: dict[str, Any], our_texts: list[str], their_texts: list[str]
) -> dict[str, Any]:
    """The records of two merged groups: the words both require (of every content word and of the
    asked quantity), and the operation words either wrote. A group without a record (one example:
    a join) brings the words its examples' questions all write, so the survivor's records narrow
    instead of vanishing."""
    if KEY not in ours and KEY not in theirs:
        return {}
    operations = set(ours.get(OPERATIONS) or []) | set(theirs.get(OPERATIONS) or [])
    for text in (*our_texts, *their_texts):
        operations |= operation_words(question_of(text))
    also = set(ours.get(ASKED_ALSO) or []) | set(theirs.get(ASKED_ALSO) or [])
    of = ours.get(ASKED_OF)  # kept where both asked of the same things
    return {
        KEY: sorted(_required(ours, our_texts, KEY) & _required(theirs, their_texts, KEY)),
        OPERATIONS: sorted(operations),
        ASKED: sorted(_required(ours, our_texts, ASKED) & _required(theirs, their_texts, ASKED)),
        **({ASKED_ALSO: sorted(also)} if also else {}),
        **({ASKED_OF: of} if of is not None and of == theirs.get(ASKED_OF) else {}),
    }


def _required(profile: dict[str, Any], texts: list[str], record: str) -> set[str]:
    """``profile``'s record, else the words every one of ``texts``' questions writes (in its asked
    phrase for the asked record, where it has one)."""
    if record in profile:
        return set(profile[record])
    questions = [question_of(t) for t in texts]
    sets = [content_words(q) for q in questions]
    if record == ASKED:
        sets = [asked_words(q) or words for q, words in zip(questions, sets, strict=True)]
    return set.intersection(*sets) if sets else set()
