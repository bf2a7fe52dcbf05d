"""A request's table, as routing and the table reader both read it: the context's one block of
``|``-separated lines with a header of years, the row the question names, and the question with
that row's words masked (what routing compares).

Why here, in the first stage: routing reads the row a question names as a value of the request
(:func:`without_row`), and the hit path's table reader (:mod:`minicache.hit.tables`) reads the
row's cells; both must find the same row, and routing imports no later stage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from minicache.programs.numbers import find_candidates
from minicache.request import CONTEXT_SEPARATOR

_YEAR = re.compile(r"(?<![\d.,])(19[5-9]\d|20[0-4]\d)(?![\d.,]\d)")
_WORD = re.compile(r"[a-z]+")
_STOP = set(
    "a an the and or of for is are was were be by at to in on with from as its it this that what how much "
    "many per each amount value change percentage percent between answer".split()
)
_GLUE = set(
    "a an the and or of for is are was were be by at to in on with from as its it this that what how "
    "much many per each between during over than".split()
)
MIN_COVER = 0.5  # share of a row label's content words the question must name


@dataclass
class Table:
    years: list[int | None]  # the year each column's header holds (None: none, or several)
    labels: list[str]  # each data row's label (its first cell)
    cells: list[list[str]]  # each data row's cells, the label's included


def split_request(text: str) -> tuple[str, str] | None:
    """A request text's question and context, or None when it has no context."""
    question, sep, context = text.partition(CONTEXT_SEPARATOR)
    return (question, context) if sep else None


def question_years(question: str) -> list[int]:
    """The distinct years the question names, ascending."""
    return sorted({int(y) for y in _YEAR.findall(question)})


def parse_table(context: str) -> Table | None:
    """The context's table, when it has exactly one block of ``|`` lines with a header of years."""
    lines = context.split("\n")
    blocks: list[list[str]] = []
    for i, line in enumerate(lines):
        if "|" in line:
            if i and "|" in lines[i - 1]:
                blocks[-1].append(line)
            else:
                blocks.append([line])
    if len(blocks) != 1:
        return None
    rows = [[cell.strip() for cell in line.split("|")] for line in blocks[0]]
    for h, row in enumerate(rows):  # the first row with a year in a column's header
        years = [set(_YEAR.findall(cell)) for cell in row]
        if any(years[1:]):
            column_years: list[int | None] = [None]
            column_years += [int(next(iter(y))) if len(y) == 1 else None for y in years[1:]]
            data = [r for r in rows[h + 1 :] if r and r[0]]
            return Table(column_years, [r[0] for r in data], data)
    return None


def word_stems(
    text: str, min_len: int = 1, drop: set[str] | frozenset[str] = frozenset()
) -> set[str]:
    """The first five letters of each word of ``text`` at least ``min_len`` long and not in ``drop``."""
    return {w[:5] for w in _WORD.findall(text.lower()) if len(w) >= min_len and w not in drop}


def _content(text: str) -> set[str]:
    return word_stems(text, 2, _STOP)


def frame_words(question: str, label: str) -> list[str]:
    """The question's words that do not name its row: what it asks of the row ("percentage change",
    "average", "answer as a percentage"). A request asks the same only if it has all of them."""
    return sorted(word_stems(question, 2, _GLUE) - word_stems(label))


def question_row(table: Table, question: str) -> int | None:
    """The data row the question names (module doc), or None when no row, or more than one, fits."""
    asked = _content(question)
    scored = []
    for i, label in enumerate(table.labels):
        words = _content(label)
        hit = len(words & asked)
        if (
            words
            and hit
            and hit / len(words) >= MIN_COVER
            and any(cell_value(c) for c in table.cells[i][1:])
        ):
            scored.append((hit / len(words), hit, i))
    scored.sort(reverse=True)
    if not scored or len(scored) > 1 and scored[0][:2] == scored[1][:2]:
        return None
    return scored[0][2]


ROW = "ROW"  # what :func:`without_row` writes in place of the words that name the table's row
_NAMED = "\x00"  # a word that names the row, before runs of them become one mask
# Named words joined by marks or glue words ("Income *on* investments", "Property, Plant, *and*
# Equipment") are one run
_ROW_RUN = re.compile(
    rf"{_NAMED}(?:(?:[^\w{_NAMED}]+|[^\w{_NAMED}]*\b(?:{'|'.join(sorted(_GLUE))})\b)+{_NAMED})*"
)


def without_row(question: str, context: str | None, mask: str = ROW) -> str:
    """``question`` with the words that name its table's row (:func:`question_row`) written as
    ``mask`` (``ROW``), once per run of them; ``question`` itself where the context has no table or
    the question names no row of it.

    Why routing reads this: questions over a table ask one thing of whichever row they name
    ("the percentage change in *deferred revenue*", "... in *Total Communications Solutions*"), and
    the row's words, often more of them than the frame's, made each line item a group of its own
    (TAT-QA's dev split: 133 groups for 23 computations). The row is a value of the request like
    its numbers; what the question asks of it (the frame) is what groups it. Which row a hit reads
    is still :func:`align_table`'s to find, and a request whose frame differs from the example's
    is still refused there."""
    table = parse_table(context) if context else None
    row = question_row(table, question) if table else None
    if table is None or row is None:
        return question
    named = _content(table.labels[row])

    def masked(word: re.Match[str]) -> str:
        w = word.group().lower()
        return _NAMED if len(w) >= 2 and w not in _STOP and w[:5] in named else word.group()

    return _ROW_RUN.sub(mask, re.sub(r"[A-Za-z]+", masked, question))


def cell_value(cell: str) -> tuple[float | int, bool] | None:
    """The number a cell writes and whether it is in parentheses; None for an empty cell ("—") or
    one that writes several numbers."""
    found = [c for c in find_candidates(cell) if not c.text.strip().isalpha()]
    starts = {c.start for c in found}
    if len(starts) != 1:
        return None
    reading = found[0]
    paren = "(" in cell[: reading.start] and ")" in cell[reading.end :]
    return reading.value, paren
