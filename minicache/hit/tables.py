"""Zero-model extraction from a request's table: the cell in the row the question names, in the
column of a year the question names.

Financial questions over a table ("What was the percentage change in deferred revenue in 2019 from
2018?") take their values from cells, and the words around a cell (its neighbours in the row, the
row above) say nothing the cue words of :mod:`minicache.hit.align` could learn. The relation is
structural instead, and it is learned from one validated example:

* the **row** is the table's row whose label the question names: the row whose label's content
  words the question covers best (a share of the label's words, then their number), strictly better
  than every other row. Two rows labelled alike ("Other" under assets and under liabilities) name
  no row;
* the **column** is the one whose header holds the k-th of the question's years in ascending order,
  and exactly one column must hold it. The question must name as many years as the example's did;
* a cell written in parentheses ("(4,970)", accountants' negative) is read the way the example read
  one: negated, or as written. When the example's cell had none, a new one in parentheses is not
  read at all.

A slot learns only where this relation holds for the example: its value must sit in that row, in a
column of one of its question's years, exactly once. Otherwise there is no table exemplar and
alignment falls back to cue words (or the small model). The table is the context's one block of
``|``-separated lines; a context with none, or with several, has no table here.

The 0.5B model reads these tables badly: asked for its own example's values (the lifted program's
defaults), it chose them on 4 of 17 TAT-QA percentage-change requests, often a number of the
question's instructions ("e.g. 12.5 for 12.5%") for every variable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from minicache.programs.numbers import find_candidates
from minicache.request import CONTEXT_SEPARATOR
from minicache.store.base import Variable

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


def _question_and_table(text: str) -> tuple[str, Table] | None:
    parts = split_request(text)
    table = parse_table(parts[1]) if parts else None
    return (parts[0], table) if parts and table else None


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


def _stems(text: str, min_len: int = 1, drop: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The first five letters of each word of ``text`` at least ``min_len`` long and not in ``drop``."""
    return {w[:5] for w in _WORD.findall(text.lower()) if len(w) >= min_len and w not in drop}


def _content(text: str) -> set[str]:
    return _stems(text, 2, _STOP)


def frame_words(question: str, label: str) -> list[str]:
    """The question's words that do not name its row: what it asks of the row ("percentage change",
    "average", "answer as a percentage"). A request asks the same only if it has all of them."""
    return sorted(_stems(question, 2, _GLUE) - _stems(label))


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
# ROW words joined by marks or glue words ("Income *on* investments", "Property, Plant, *and*
# Equipment") are one run
_ROW_RUN = re.compile(rf"\b{ROW}(?:(?:[^\w]+|[^\w]*\b(?:{'|'.join(sorted(_GLUE))})\b)+{ROW}\b)+")


def without_row(question: str, context: str | None) -> str:
    """``question`` with the words that name its table's row (:func:`question_row`) written as
    ``ROW``, once per run of them; ``question`` itself where the context has no table or the
    question names no row of it.

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
        return ROW if len(w) >= 2 and w not in _STOP and w[:5] in named else word.group()

    return _ROW_RUN.sub(ROW, re.sub(r"[A-Za-z]+", masked, question))


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


def _cell(table: Table, row: int, year: int) -> tuple[float | int, bool] | None:
    """What the row's cell in the one column of ``year`` writes (:func:`cell_value`); None when no
    column, or several, hold that year."""
    columns = [c for c, y in enumerate(table.years) if y == year]
    if len(columns) != 1 or columns[0] >= len(table.cells[row]):
        return None
    return cell_value(table.cells[row][columns[0]])


def learn_table_exemplar(
    template: list[Variable], text: str, values: dict[str, Any]
) -> dict[str, Any] | None:
    """A table exemplar from one validated (request text, values), or None where the module's
    relation does not hold for every variable."""
    read = _question_and_table(text)
    if read is None or not template:
        return None
    question, table = read
    years, row = question_years(question), question_row(table, question)
    if not years or row is None:
        return None
    slots: dict[str, Any] = {}
    for var in template:
        value = values.get(var.name)
        if var.type == "string" or not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        where = []
        for year in years:
            cell = _cell(table, row, year)
            if cell is None:
                continue
            written, paren = cell
            if written == value:
                where.append({"year": years.index(year), "paren": "as written" if paren else None})
            elif paren and -written == value:
                where.append({"year": years.index(year), "paren": "negative"})
        if len(where) != 1:
            return None
        slots[var.name] = where[0]
    if len({s["year"] for s in slots.values()}) < len(slots):
        return None  # two variables in one cell
    return {
        "table": {
            "years": len(years),
            "slots": slots,
            "frame": frame_words(question, table.labels[row]),
        }
    }


def align_table(exemplar: dict[str, Any], text: str) -> tuple[dict[str, Any], str]:
    """The values a table exemplar reads from ``text``, and why not all of them ("" when all)."""
    learned = exemplar["table"]
    found = _question_and_table(text)
    if found is None:
        return {}, "the request has no table"
    question, table = found
    years = question_years(question)
    if len(years) != learned["years"]:
        return {}, f"the question names {len(years)} years, the example's named {learned['years']}"
    row = question_row(table, question)
    if row is None:
        return {}, "no single row of the table is the one the question names"
    asked = _stems(question)
    missing = [w for w in learned.get("frame", []) if w not in asked]
    if missing:
        return {}, f"the question does not ask what the example's did (no {', '.join(missing[:4])})"
    values: dict[str, Any] = {}
    reasons = []
    for name, slot in learned["slots"].items():
        read = _cell(table, row, years[slot["year"]])
        if read is None:
            reasons.append(
                f"{name}: no single number in the {years[slot['year']]} column of {table.labels[row]!r}"
            )
        elif read[1] and slot["paren"] is None:
            reasons.append(f"{name}: written in parentheses, where the example's was not")
        else:
            values[name] = -read[0] if read[1] and slot["paren"] == "negative" else read[0]
    return values, "; ".join(reasons)
