"""Routing reads the row a question names in its table as a value (minicache.programs.tables.without_row):
questions that ask one thing of different line items route to one group.

On TAT-QA's dev split each line item's words ("the percentage change in *Total Communications
Solutions*", "... in *deferred revenue*") made a group of its own: 133 groups for 23 computations, and
most groups never reached a build. The row is what the question reads its values from, not what it
computes; the frame around it is. Which row a hit reads, and whether the request asks what the
entry's examples asked, stay the table reader's to decide (tests/hit/test_tables.py).
"""

from __future__ import annotations

import pytest

from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.models import FakeBackend
from minicache.programs.tables import ROW, without_row
from minicache.route.lexical import LexicalEmbedder
from minicache.store import SQLiteStore

TABLE = """ | 2019 | 2018
 |  | (in millions)
Deferred revenue | 4,023 | 2,316
Total Communications Solutions | 1,842 | 1,673
Property, plant, and equipment, net | 3,574 | 3,497
Aerospace, defense, oil, and gas | 1,306 | 1,157
Income on investments held to maturity | 210 | 150
Other | 8 | 13

The table shows the company's balances at year end."""
CELLS = {
    "deferred revenue": (4023, 2316),
    "Total Communications Solutions": (1842, 1673),
    "Property, Plant, and Equipment, Net": (3574, 3497),
    "aerospace, defense, oil, and gas": (1306, 1157),
    "income on investments held to maturity": (210, 150),
}
PCT = "What was the percentage change in {row} in 2019 from 2018? Answer in percent."
CHANGE = "What was the change in {row} in 2019 from 2018? Answer in millions."
# Rows whose questions the skeleton alone sent to three groups (cosine 0.69 to 0.79 with the
# lexical embedder, whose threshold is 0.82), and two more
BUILT = [
    "deferred revenue",
    "Property, Plant, and Equipment, Net",
    "income on investments held to maturity",
]
MORE = ["Total Communications Solutions", "aerospace, defense, oil, and gas"]


def test_the_words_that_name_the_row_are_one_mask_and_the_frame_stays():
    assert without_row(PCT.format(row="Property, Plant, and Equipment, Net"), TABLE) == (
        PCT.format(row=ROW)
    )
    assert without_row(PCT.format(row="income on investments held to maturity"), TABLE) == (
        PCT.format(row=ROW)
    )
    assert without_row(CHANGE.format(row="the deferred revenue"), TABLE) == CHANGE.format(
        row=f"the {ROW}"
    )


def test_a_question_without_a_table_or_naming_no_single_row_is_routed_as_written():
    asked = PCT.format(row="goodwill")
    assert without_row(asked, TABLE) == asked  # no row of that name
    assert without_row(asked, None) == asked
    assert without_row(PCT.format(row="deferred revenue"), "No table here.") == PCT.format(
        row="deferred revenue"
    )


def program(row: str, new: float, old: float, percent: bool) -> str:
    name = "_".join(w for w in row.lower().replace(",", "").split() if w != "and")[:30]
    result = (
        f"({name}_2019 - {name}_2018) / {name}_2018 * 100"
        if percent
        else (f"{name}_2019 - {name}_2018")
    )
    return (
        f"```python\ndef solve():\n    {name}_2019 = {new}\n    {name}_2018 = {old}\n"
        f"    return {result}\n```"
    )


def target(messages, options) -> str:
    """Writes each question's own program: the percentage change or the change of its row."""
    asked = messages[-1].content
    for row, cells in CELLS.items():
        if PCT.format(row=row) in asked:
            return program(row, *cells, percent=True)
        if CHANGE.format(row=row) in asked:
            return program(row, *cells, percent=False)
    raise AssertionError(f"unexpected request: {asked[:200]}")


@pytest.fixture
def engine(tmp_path, sandbox):
    def small(messages, options):
        raise AssertionError("the table is read without the small model")

    mc = MiniCache(
        FakeBackend(target),
        FakeBackend(small),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=LexicalEmbedder(),  # the default route embedder, at its own threshold
        sandbox=sandbox,
        config=EngineConfig(
            background_builds=False,
            build_after=3,
            build_early=0,
            audit_rate=0.0,
            verify=VerifyConfig(probation=0),
        ),
    )
    yield mc
    mc.close()


def test_questions_asking_one_thing_of_different_rows_route_to_one_group_and_hit_the_named_row(
    engine,
):
    first = [engine.solve(CHANGE.format(row=row), TABLE) for row in BUILT]
    assert [r.route for r in first] == ["miss"] * 3
    assert len({r.group for r in first}) == 1
    assert engine.store.active_entry("default", first[0].group) is not None
    for row in MORE:
        hit = engine.solve(CHANGE.format(row=row), TABLE)
        new, old = CELLS[row]
        assert (hit.route, hit.group) == ("hit", first[0].group), hit.fallback_reason
        assert hit.answer == pytest.approx(new - old)


def test_a_question_asking_another_thing_of_a_row_is_not_served_the_groups_answer(engine):
    for row in BUILT:
        engine.solve(CHANGE.format(row=row), TABLE)
    new, old = CELLS[MORE[0]]
    built = engine.solve(CHANGE.format(row=BUILT[0]), TABLE).group
    percent = engine.solve(PCT.format(row=MORE[0]), TABLE)
    # routed to the group (its frame differs by one word), and refused there: the miss answers
    assert (percent.route, percent.group) == ("fallback", built), percent.fallback_reason
    assert percent.answer == pytest.approx(round((new - old) / old * 100, 2), abs=0.01)
