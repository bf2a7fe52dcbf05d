"""The numbers of a request and the words that describe them: what alignment and corroboration read.

Each number has a **kind**, from how it is written (a percentage, a money amount, a count followed
by a unit such as "5 years" or "5-year", a number word such as "twice", a word for how often a year:
"quarterly" and "monthly" are one kind, ``word:per-year``, or a plain number), and **cue words**:
the words around it, nearer ones weighing more, up to the separator between it and the next number.
The word right after a number is what it counts as the request states it (:func:`word_after`,
and the scale word of a number read as written, :func:`scale_word`;
:mod:`minicache.hit.words_after` compares them with the words the entry accepts).
An exemplar (:mod:`minicache.hit.exemplars`) keeps a slot's kind and cue words; alignment
(:mod:`minicache.hit.align`) and corroboration (:mod:`minicache.hit.corroboration`) score a
request's numbers against them.
"""

from __future__ import annotations

import re

from minicache.programs.numbers import Candidate, Position, find_candidates

_UNITS = {
    "year",
    "month",
    "day",
    "week",
    "quarter",
    "period",
    "hour",
    "minute",
    "share",
    "unit",
    "item",
    "employee",
    "customer",
    "time",
    "installment",
    "payment",
    "person",
    "people",
}
_STOP = set(
    "a an the and or of for is are was were be by at to in on with from as if its it this that what how "
    "much many per each given has have had will would which who its their our your".split()
)
BEFORE, AFTER = 6, 4  # words before and after a number that may describe it
# Words for how many times a year: one kind, so that an example's "quarterly" teaches where "monthly"
# goes (Effective Annual Rate requests that only the small model could read align with it).
PER_YEAR = {"annually", "semi-annually", "semiannually", "quarterly", "monthly", "weekly", "daily"}


def number_kind(text: str, cand: Candidate) -> str:
    """What sort of number this is, from how it is written: pct | money | unit:<unit> | word:per-year |
    word:<word> | plain.

    A number with letters glued to it ("1tb", "32gb", "4g") is a size or a model name: ``unit:`` those
    letters, whatever they are. Read as plain, the 1 of "1tb" passed for WebShop's price."""
    written = cand.text.lower()
    if "%" in written or "percent" in written:
        return "pct"
    if re.search(r"[$€£¥]", written):
        return "money"
    if written.isalpha() or "-" in written and written.replace("-", "").isalpha():
        return "word:per-year" if written in PER_YEAR else f"word:{written}"
    after = re.match(
        r"(?:\s*|-)([a-z]+)", text[cand.end : cand.end + 24].lower()
    )  # "5 years", "5-year"
    if after:
        word = after.group(1)
        if word in ("dollar", "dollars", "usd"):
            return "money"
        singular = word[:-1] if word.endswith("s") else word
        if singular in _UNITS:
            return f"unit:{singular}"
        if text[cand.end : cand.end + 1].isalpha():
            return f"unit:{word}"
    return "plain"


def positions(text: str) -> list[Position]:
    """The numbers of ``text`` grouped by where they are written, in order."""
    found: dict[int, Position] = {}
    for cand in find_candidates(text):
        pos = found.get(cand.start)
        if pos is None:
            found[cand.start] = Position(cand.start, cand.end, [cand], number_kind(text, cand))
        elif cand.value not in pos.values():
            pos.readings.append(cand)
    return sorted(found.values(), key=lambda p: p.start)


def stem(word: str) -> str:
    """A word's first five letters; a symbol (``r_p``, ``σ_p``) whole: it names one variable exactly."""
    return word if "_" in word else word[:5]


def stems(words: list[str]) -> list[str]:
    return [stem(w) for w in words if (len(w) >= 3 or "_" in w) and w not in _STOP]


SEPARATORS = {
    ",",
    ";",
    ".",
    ":",
    "!",
    "?",
    "and",
    "while",
    "whereas",
    "but",
    "with",
    "against",
    "versus",
    "compared",
}  # "$222,000 in current assets compared to $127,000 in current liabilities"
# Words, and symbols written with an underscore, in any script ("(R_p)", "(σ_p)": a request that names
# its variables so says which number is which, where the words around two numbers are alike).
TOKEN = re.compile(r"[^\W\d_]+(?:_[^\W_]+)+|[a-z]+|[,;.:!?]")


# What a number counts is the word right after it ("30 minutes", "5-year", "$2.4 million loan"):
# spaces or one hyphen between them; no punctuation, no line break, no tab (a table's next cell).
_WORD_AFTER = re.compile(r"(?: *|-)([a-z]+)")
_PER_WHAT = re.compile(r" +([a-z]+)")
_LAST_DIGIT = re.compile(r"\d(?=\D*$)")
_ORDINAL = {"st", "nd", "rd", "th"}  # glued to a number ("5th"), a suffix, no word
_SCALE = re.compile(r"[a-z]+$")


def scale_word(pos: Position, value: object) -> str | None:
    """The scale ``value`` counts in where read at ``pos``: the scale word the number is written
    with ("2.4 *million*"), which the number parser read into a second, scaled reading, where
    ``value`` is the number as written (2.4). None where no scale word is written, or where the value
    is the scaled one (2,400,000), which carries its scale itself."""
    if len(pos.readings) < 2 or pos.readings[0].value != value:
        return None
    found = _SCALE.search(pos.readings[0].text.lower())
    return found.group() if found else None


def word_after(text: str, pos: Position) -> str | None:
    """The word written right after a number, lower case: its unit or item as the request states it
    ("30 *minutes*", "5-*year*", "1*tb*", "$2.4 million *loan*": a scale word the number parser
    reads as part of the number is passed over, so "$2,400,000 *loan*" has the same word;
    :func:`scale_word` tells the scales apart). None where punctuation, a symbol ("5%"), a tab or
    the end of a line follows, for a number written as a word, for an ordinal's suffix ("5th"),
    and where the word is a function word ("$2 *and* ...", "5 *of* them"), which says nothing about
    what the number counts. "per" is read with the word it takes ("0.05 *per quarter*"): a rate's
    period is its unit."""
    last = _LAST_DIGIT.search(pos.readings[0].text)
    if last is None:
        return None
    end = pos.end if len(pos.readings) > 1 else pos.start + last.end()
    after = text[end : end + 40].lower()
    found = _WORD_AFTER.match(after)
    if found is None:
        return None
    word = found.group(1)
    if word == "per":
        period = _PER_WHAT.match(after, found.end())
        return f"per {period.group(1)}" if period and period.group(1) not in _STOP else None
    if word in _STOP or word in SEPARATORS or (found.start(1) == 0 and word in _ORDINAL):
        return None
    return word


def _singulars(word: str) -> set[str]:
    """``word`` and what it is the regular English plural of: "minutes" of "minute", "boxes" of
    "box", "inches" of "inch", "berries" of "berry". A singular is three letters at least, and
    "ss" is no plural ending: "ms" is no plural of "m" (milliseconds, metres), "tbs" none of "tb"
    (tablespoons, terabytes), and "bass" no plural of "bas", which "bases" would also strip to."""
    w = word.lower()
    out = set()
    if w.endswith("s") and not w.endswith("ss"):
        out.add(w[:-1])
    if re.search(r"(?:s|x|z|ch|sh|o)es$", w):
        out.add(w[:-2])
    if w.endswith("ies"):
        out.add(w[:-3] + "y")
    return {w} | {s for s in out if len(s) >= 3}


def same_word(a: str, b: str) -> bool:
    """Two words after a number that name one thing: alike but for case and a regular plural ending
    ("s", "es", "ies"). An irregular plural ("geese") is no same word; a refusal the miss answer
    shows unfounded teaches it (minicache.hit.words_after)."""
    return not _singulars(a).isdisjoint(_singulars(b))


def _is_word(token: str) -> bool:
    return token[0].isalpha()


def number_words(text: str, pos: list[Position]) -> dict[int, list[tuple[str, int]]]:
    """For each number, the words that describe it with their weight (nearer weighs more).

    Words before a number count (up to BEFORE, weights 6..1), and so do words right after it up to
    the next separator (up to AFTER, weights 4..1): between two numbers, the words before the first
    separator ("," "and" "while" ...) describe the earlier number ("$750,000 *in total liabilities*
    and $250,000 in shareholders' equity"), the rest the later one ("... assets are $45,000 and
    *current liabilities are* $30,000")."""
    out: dict[int, list[tuple[str, int]]] = {p.start: [] for p in pos}
    for i, p in enumerate(pos):
        gap = text[pos[i - 1].end if i else max(0, p.start - 80) : p.start].lower()
        tokens = TOKEN.findall(gap)
        if i:  # the part before the first separator belongs to the previous number
            cut = next((k for k, t in enumerate(tokens) if t in SEPARATORS), None)
            after_prev = [t for t in (tokens[:cut] if cut is not None else []) if _is_word(t)][
                :AFTER
            ]
            out[pos[i - 1].start] += [(w, AFTER + 1 - d) for d, w in enumerate(after_prev, start=1)]
            tokens = tokens[cut + 1 :] if cut is not None else tokens
        before = [t for t in tokens if _is_word(t)][::-1][:BEFORE]
        out[p.start] += [(w, BEFORE + 1 - d) for d, w in enumerate(before, start=1)]
    if pos:  # the last number's words after it, up to a separator
        tail = TOKEN.findall(text[pos[-1].end : pos[-1].end + 60].lower())
        cut = next((k for k, t in enumerate(tail) if t in SEPARATORS), len(tail))
        out[pos[-1].start] += [
            (w, AFTER + 1 - d) for d, w in enumerate(tail[:cut][:AFTER], start=1)
        ]
    return out


def cue_score(
    words: list[tuple[str, int]], cues: set[str], weights: dict[str, float] | None = None
) -> float:
    """How well a number's describing words match ``cues``: each matching content word adds its
    nearness weight, times the cue's weight (1 unless given)."""
    return sum(
        near * (weights or {}).get(stem(w), 1.0)
        for w, near in words
        if w not in _STOP and stem(w) in cues
    )
