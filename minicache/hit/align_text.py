"""Text slots of an alignment exemplar: a stretch of the request, not a number (WebShop's keywords).

A slot records its region: from the start of the request (or from the words that follow the number
before it) to the words that lead to the next number ("..., and *price lower than* 30.00 dollars"),
and the region's words the example's value left out (its filler: "i need a", "which is"). A new
request's value is its own region, found by the same opening and closing words (the longest
beginning of the one and ending of the other, of at least two words, that occurs exactly once next
to a number), less the filler and those words. :mod:`minicache.hit.align` holds the numeric slots and
the whole alignment.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minicache.programs.numbers import Position

_TEXT_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(0), m.start(), m.end()) for m in _TEXT_WORD.finditer(text.lower())]


def learn_text_slot(
    text: str, value: str, pos: list[Position]
) -> tuple[dict[str, Any], int, int] | None:
    """The slot of a text value and where its region lies in ``text``. The slot holds the words that
    open the region (those between the number before the value and the value; none when no number
    comes before: the region opens at the request's start), the words that close it (between the
    value and the next number; none when no number follows), and the region's words the value left
    out. None unless the value's words occur in the request in order, with words between it and any
    number next to it."""
    want = [w for w, _, _ in _words(value)]
    toks = _words(text)
    if not want or not toks:
        return None
    best: tuple[int, int] | None = None
    for i, (w, _, _) in enumerate(toks):  # the shortest stretch holding the value's words in order
        if w != want[0]:
            continue
        j, k = i, 0
        while j < len(toks) and k < len(want):
            k += toks[j][0] == want[k]
            j += 1
        if k == len(want) and (best is None or j - i < best[1] - best[0]):
            best = (i, j)
    if best is None:
        return None
    start, end = toks[best[0]][1], toks[best[1] - 1][2]
    before = [p for p in pos if p.end <= start]
    after = [p for p in pos if p.start >= end]
    lo = before[-1].end if before else 0
    hi = after[0].start if after else len(text)
    opening = [w for w, a, b in toks if lo <= a and b <= start and not w[0].isdigit()]
    closing = [w for w, a, b in toks if end <= a and b <= hi and not w[0].isdigit()]
    if before and not opening or after and not closing:
        return (
            None  # nothing says where the number ends and the text begins, or the other way round
        )
    region = {w for w, a, b in toks if lo <= a and b <= hi}
    filler = sorted(
        w
        for w in region - set(want) - set(opening if before else []) - set(closing)
        if not w[0].isdigit()
    )
    return (
        {
            "kind": "text",
            "opening": opening if before else None,
            "closing": closing,
            "filler": filler,
        },
        lo,
        hi,
    )


def _anchor(
    words: list[str],
    toks: list[tuple[str, int, int]],
    text: str,
    pos: list[Position],
    closing: bool,
) -> list[int] | None:
    """Where the slot's opening words (their longest beginning) or closing words (their longest
    ending), at least two of them, occur next to a number: right after one, or right before one.
    Token indexes of every occurrence of the first length that occurs at all; None if none does."""

    def next_to_number(i: int, n: int) -> bool:
        if closing:
            gap_from = toks[i + n - 1][2]
            return any(
                p.start >= gap_from and not text[gap_from : p.start].strip(" ,:$") for p in pos
            )
        gap_to = toks[i][1]
        return any(p.end <= gap_to and not text[p.end : gap_to].strip(" ,:;.()\"'") for p in pos)

    for n in range(len(words), min(2, len(words)) - 1, -1):
        part = words[-n:] if closing else words[:n]
        found = [
            i
            for i in range(len(toks) - n + 1)
            if [w for w, _, _ in toks[i : i + n]] == part and next_to_number(i, n)
        ]
        if found:
            return [i + n - 1 if not closing else i for i in found]
    return None


def align_text(slot: dict[str, Any], text: str, pos: list[Position]) -> tuple[str, int, int] | str:
    """The value of a text slot in ``text`` and its region, or why there is none."""
    toks = _words(text)
    bounds = []
    for words, closing in ((slot.get("opening"), False), (slot["closing"], True)):
        if not words:
            bounds.append(len(text) if closing else 0)
            continue
        found = _anchor(words, toks, text, pos, closing)
        if found is None or len(found) != 1:
            where = "before" if closing else "after"
            return (
                f"the words {'closing' if closing else 'opening'} the text ({' '.join(words)}) are "
                f"{'not' if found is None else 'more than once'} {where} a number"
            )
        bounds.append(toks[found[0]][1] if closing else toks[found[0]][2])
    lo, hi = bounds
    if lo >= hi:
        return "the text's opening words come after its closing words"
    drop = set(slot["filler"]) | set(slot.get("opening") or []) | set(slot["closing"])
    kept = [text[a:b] for w, a, b in toks if lo <= a and b <= hi and w not in drop]
    if not kept:
        return "the text is empty once its filler is left out"
    return " ".join(kept), lo, hi
