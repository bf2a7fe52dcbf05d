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

from typing import Any

from minicache.programs.tables import (
    Table,
    cell_value,
    frame_words,
    parse_table,
    question_row,
    question_years,
    split_request,
    word_stems,
)
from minicache.store.base import Variable


def _question_and_table(text: str) -> tuple[str, Table] | None:
    parts = split_request(text)
    table = parse_table(parts[1]) if parts else None
    return (parts[0], table) if parts and table else None


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
    asked = word_stems(question)
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
