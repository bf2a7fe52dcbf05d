"""Zero-model extraction from a request's table (minicache.hit.tables): the row the question names, the
column of the k-th year it names, and a build whose examples name their parameters after their rows."""

from __future__ import annotations

import pytest

from fakes import HashEmbedder
from minicache.build.candidates import own_candidates
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.hit.align import align
from minicache.hit.exemplars import learn_exemplar
from minicache.models import FakeBackend
from minicache.programs.tables import parse_table, question_row
from minicache.request import request_text
from minicache.store import Example, SQLiteStore, Variable

TABLE = """ | 2019 | 2018
 |  | (in thousands)
Deferred revenue | 4,023 | 2,316
Net sales | $80,958 | $89,672
Other assets | 1,911 | 1,812
Valuation allowance | (4,970) | (2,191)
Other | 8 | 13

The table shows the company's balances at year end."""

PCT = "What was the percentage change in {row} between 2018 and 2019? Answer as a percentage (e.g. 12.5 for 12.5%)."
TEMPLATE = [Variable("a_2019", "number", "a 2019"), Variable("a_2018", "number", "a 2018")]


def text(question: str, context: str = TABLE) -> str:
    return request_text(question, context)


def test_the_row_is_the_one_whose_label_the_question_names_and_only_one():
    table = parse_table(TABLE)
    assert table is not None and table.years == [None, 2019, 2018]
    assert table.labels[question_row(table, PCT.format(row="net sales"))] == "Net sales"
    assert table.labels[question_row(table, PCT.format(row="the other assets"))] == "Other assets"
    assert question_row(table, PCT.format(row="inventories")) is None  # no row of that name


def test_an_exemplar_from_one_example_reads_another_rows_cells_by_the_questions_years():
    exemplar = learn_exemplar(
        TEMPLATE, text(PCT.format(row="deferred revenue")), {"a_2019": 4023, "a_2018": 2316}
    )
    assert exemplar is not None and "table" in exemplar
    found = align(exemplar, text(PCT.format(row="net sales")))
    assert found.complete and found.values == {"a_2019": 80958, "a_2018": 89672}
    # The years in the other order in the question: the slot is the later year, wherever it is written.
    found = align(
        exemplar,
        text(
            "What was the percentage change in net sales from 2019 to 2018? "
            "Answer as a percentage (e.g. 12.5 for 12.5%)."
        ),
    )
    assert found.values == {"a_2019": 80958, "a_2018": 89672}


def test_a_question_that_asks_something_else_of_the_row_does_not_align():
    exemplar = learn_exemplar(
        TEMPLATE, text(PCT.format(row="deferred revenue")), {"a_2019": 4023, "a_2018": 2316}
    )
    found = align(
        exemplar,
        text("What was the change in net sales between 2018 and 2019? Answer in thousands."),
    )
    assert not found.complete and "does not ask what the example's did" in found.reason


def test_a_question_naming_no_single_row_or_other_years_does_not_align():
    exemplar = learn_exemplar(
        TEMPLATE, text(PCT.format(row="deferred revenue")), {"a_2019": 4023, "a_2018": 2316}
    )
    found = align(exemplar, text(PCT.format(row="goodwill")))
    assert not found.complete and "no single row" in found.reason
    found = align(
        exemplar,
        text(
            "What was the percentage change in net sales in 2019? "
            "Answer as a percentage (e.g. 12.5 for 12.5%)."
        ),
    )
    assert not found.complete and "names 1 years" in found.reason
    assert not align(
        exemplar, "What was the percentage change in net sales between 2018 and 2019?"
    ).complete


def test_two_rows_labelled_alike_name_no_row():
    twice = TABLE.replace("Net sales", "Other")
    exemplar = learn_exemplar(
        TEMPLATE, text(PCT.format(row="deferred revenue"), twice), {"a_2019": 4023, "a_2018": 2316}
    )
    found = align(exemplar, text(PCT.format(row="other"), twice))
    assert not found.complete and "no single row" in found.reason


def test_a_cell_in_parentheses_is_read_as_the_example_read_one():
    negated = learn_exemplar(
        TEMPLATE, text(PCT.format(row="valuation allowance")), {"a_2019": -4970, "a_2018": -2191}
    )
    assert align(negated, text(PCT.format(row="the valuation allowance"))).values == {
        "a_2019": -4970,
        "a_2018": -2191,
    }
    plain = learn_exemplar(
        TEMPLATE, text(PCT.format(row="deferred revenue")), {"a_2019": 4023, "a_2018": 2316}
    )
    found = align(plain, text(PCT.format(row="valuation allowance")))
    assert (
        not found.complete and "parentheses" in found.reason
    )  # the example never said how to read one


def test_no_table_exemplar_when_a_value_is_not_in_the_questions_row_and_years():
    other_row = learn_exemplar(
        TEMPLATE, text(PCT.format(row="deferred revenue")), {"a_2019": 80958, "a_2018": 2316}
    )
    assert other_row is None or "table" not in other_row
    two_in_one_cell = [Variable("x", "number", "x"), Variable("y", "number", "y")]
    assert (
        learn_exemplar(
            two_in_one_cell, text(PCT.format(row="deferred revenue")), {"x": 4023, "y": 4023}
        )
        is None
    )


def pct_program(row: str, new: float, old: float) -> str:
    name = row.replace(" ", "_")
    return (
        f"def solve():\n    {name}_2019 = {new}\n    {name}_2018 = {old}\n"
        f"    return ({name}_2019 - {name}_2018) / {name}_2018 * 100\n"
    )


ROWS = {"deferred revenue": (4023, 2316), "net sales": (80958, 89672), "other assets": (1911, 1812)}


def test_examples_whose_parameters_are_named_after_their_rows_back_each_other_through_the_table(
    sandbox,
):
    examples = [
        Example(
            id=f"ex{i}",
            tenant="t",
            group_id="g",
            question=PCT.format(row=row),
            context=TABLE,
            program=pct_program(row, *cells),
            answer=(cells[0] - cells[1]) / cells[1] * 100,
            variables={},
        )
        for i, (row, cells) in enumerate(ROWS.items())
    ]
    candidates, split = own_candidates(examples, "", sandbox, 3)
    assert not split and candidates
    assert all(c.backed and c.score == 3 and c.checked == 3 for c in candidates)


def test_a_table_group_is_built_and_its_hits_read_the_table_without_the_small_model(
    tmp_path, sandbox
):
    def target(messages, options):
        asked = messages[-1].content
        for row, cells in ROWS.items():
            if PCT.format(row=row) in asked:
                return f"```python\n{pct_program(row, *cells)}```"
        if "change in goodwill" in asked:
            return "```python\ndef solve():\n    return 500 - 400\n```"
        raise AssertionError("no generalization expected: the miss programs lift")

    def small(messages, options):
        raise AssertionError("the table is read without the small model")

    mc = MiniCache(
        FakeBackend(target),
        FakeBackend(small),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(
            background_builds=False, verify=VerifyConfig(probation=0), build_early=0
        ),
    )
    try:
        for row in ROWS:
            assert mc.solve(PCT.format(row=row), TABLE, group="pct").route == "miss"
        assert mc.store.active_entry("default", "label:pct") is not None, mc.stats()
        other = TABLE.replace("Other assets", "Goodwill").replace("1,911 | 1,812", "500 | 400")
        hit = mc.solve(PCT.format(row="goodwill"), other, group="pct")
        assert hit.route == "hit" and hit.extraction == "align" and hit.tokens["small"] == 0, (
            hit.fallback_reason
        )
        assert hit.answer == pytest.approx(25.0)
        # A question that asks another computation of the same table is not served by this entry.
        other_ask = mc.solve(
            "What was the change in goodwill between 2018 and 2019? Answer in thousands.",
            other,
            group="pct",
        )
        assert other_ask.route != "hit"
    finally:
        mc.close()


LIFTED = "def solve(a_2019=4023, a_2018=2316):\n    return (a_2019 - a_2018) / a_2018 * 100\n"


def row_example(i: int, row: str, answer: float | None = None) -> Example:
    """An example of the percentage-change group for ``row`` (a row of ROWS, or goodwill: 500 and 400)."""
    new, old = ROWS[row] if row in ROWS else (500, 400)
    context = (
        TABLE
        if row in ROWS
        else TABLE.replace("Other | 8 | 13", f"Other | 8 | 13\n{row} | {new} | {old}")
    )
    return Example(
        id=f"ex{i}",
        tenant="default",
        group_id="g",
        question=PCT.format(row=row),
        context=context,
        program=pct_program(row, new, old),
        variables={},
        answer=(new - old) / old * 100 if answer is None else answer,
    )


@pytest.fixture
def builder_engine(tmp_path, sandbox):
    """An engine whose models must not be asked: a table candidate's validation needs none."""

    def no_model(messages, options):
        raise AssertionError("a table candidate's validation asks no model")

    mc = MiniCache(
        FakeBackend(no_model),
        FakeBackend(no_model),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    yield mc
    mc.close()


def test_a_table_candidate_is_checked_only_on_examples_its_table_reads_and_never_asks_the_small_model(
    builder_engine,
):
    origin = row_example(0, "deferred revenue")
    # Two changes asked at once: no single row, so the entry's hit path would refuse it.
    both = Example(
        id="ex1",
        tenant="default",
        group_id="g",
        context=TABLE,
        program="",
        variables={},
        question="What was the percentage change in net sales and other assets between 2018 "
        "and 2019?",
        answer={"net sales": -9.7, "other assets": 5.5},
    )
    held = [origin, both, row_example(2, "net sales")]
    record = builder_engine.builder.validate(
        LIFTED, held, origin, "", backed=True, also=[row_example(3, "other assets")]
    )
    assert record.ok and record.refused == ["ex1"]
    assert sorted(c.example for c in record.checks) == [
        "ex0",
        "ex2",
        "ex3",
    ]  # the group's other read example too
    assert all(c.extraction == "align" and c.match for c in record.checks)


def test_a_table_candidate_most_of_whose_read_examples_disagree_is_not_trusted(builder_engine):
    origin = row_example(0, "deferred revenue")
    # Two of four read examples were answered otherwise (say, as a change in points): 2 of 4 is no majority.
    held = [origin, row_example(1, "net sales", answer=-8714.0), row_example(2, "other assets")]
    record = builder_engine.builder.validate(
        LIFTED, held, origin, "", backed=True, also=[row_example(3, "goodwill", 100.0)]
    )
    assert not record.ok and record.passed == 2 and record.of == 4
    # With the goodwill example answered as the program answers it, 3 of 4 agree: trusted.
    record = builder_engine.builder.validate(
        LIFTED, held, origin, "", backed=True, also=[row_example(3, "goodwill")]
    )
    assert record.ok and record.passed == 3 and record.of == 4


def test_a_table_candidate_its_table_reads_only_its_own_example_for_is_not_trusted(builder_engine):
    origin = row_example(0, "deferred revenue")
    unread = [
        Example(
            id=f"ex{i}",
            tenant="default",
            group_id="g",
            context=TABLE,
            program="",
            variables={},
            question=f"What is the average {row} for 2018 and 2019?",
            answer=1.0,
        )
        for i, row in enumerate(["net sales", "other assets"], start=1)
    ]
    record = builder_engine.builder.validate(LIFTED, [origin, *unread], origin, "", backed=False)
    assert record.refused == ["ex1", "ex2"] and record.of == 1 and not record.ok


def test_a_table_candidate_is_still_trusted_after_the_small_models_checks_are_declined(
    tmp_path, sandbox, monkeypatch
):
    """Admission declines the small model's checks (Admission.model_checks_declined); the build's
    first candidate needs them and is set aside, and the table candidate after it, checked without a
    model, is trusted: a declined check ends a candidate, not the build."""
    from minicache.build import builder as build
    from minicache.build.candidates import Candidate

    def with_a_model_candidate_first(examples, *args):
        candidates, split = own_candidates(examples, *args)
        # Its default is written nowhere: its values would be the small model's free reading.
        return [
            Candidate(
                "lifted", "def solve(k=7):\n    return k * 2\n", examples[0], score=3, checked=3
            ),
            *candidates,
        ], split

    def target(messages, options):
        asked = messages[-1].content
        for row, cells in ROWS.items():
            if PCT.format(row=row) in asked:
                return f"```python\n{pct_program(row, *cells)}```"
        raise AssertionError("no generalization expected")

    def small(messages, options):
        raise AssertionError("the small model's checks were declined")

    monkeypatch.setattr(build, "own_candidates", with_a_model_candidate_first)
    mc = MiniCache(
        FakeBackend(target),
        FakeBackend(small),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False, verify=VerifyConfig(probation=0)),
    )
    monkeypatch.setattr(
        mc.builder.admission, "model_checks_declined", lambda *args: "declined by the test"
    )
    try:
        for row in ROWS:
            mc.solve(PCT.format(row=row), TABLE, group="pct")
        entry = mc.store.active_entry("default", "label:pct")
        assert entry is not None and "table" in entry.validation["profile"]["exemplars"][0]
    finally:
        mc.close()
