"""A build's model-free shortcut: where no choice of a held example's numbers gives its answer, the small
model is not asked to read them (minicache.build.reach)."""

from __future__ import annotations

import json
import re

import pytest

from fakes import HashEmbedder
from minicache.build.builder import UNREACHABLE
from minicache.build.reach import MAX_ASSIGNMENTS, assignments, unreachable
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.models import FakeBackend
from minicache.store import Example, SQLiteStore, Variable

DIFFERENCE = "def solve(found=63, thrown=51):\n    return found - thrown\n"
TWO = [Variable("found", "number"), Variable("thrown", "number")]


def example(i: int, question: str, answer: float) -> Example:
    return Example(
        id=f"ex{i}",
        tenant="default",
        group_id="g",
        question=question,
        context=None,
        program="",
        variables={},
        answer=answer,
    )


def test_no_choice_of_the_numbers_giving_the_answer_is_unreachable(sandbox):
    text = "Dan found 9 wrappers and 4 bottle caps. How many did he find in all?"
    assert unreachable(DIFFERENCE, TWO, text, 13, sandbox)  # 9 - 4, 4 - 9, 0: never 13
    assert not unreachable(DIFFERENCE, TWO, text, 5, sandbox)  # 9 - 4
    assert not unreachable(
        DIFFERENCE, TWO, text, -5, sandbox
    )  # the model may choose them either way round


def test_a_program_that_raises_on_some_choices_is_judged_on_the_others(sandbox):
    ratio = "def solve(a=1, b=2):\n    return a / b\n"
    text = "Of 0 and 8 and 2, what is the ratio?"
    assert not unreachable(
        ratio, [Variable("a", "number"), Variable("b", "number")], text, 4, sandbox
    )
    assert unreachable(ratio, [Variable("a", "number"), Variable("b", "number")], text, 3, sandbox)


def test_what_cannot_be_told_cheaply_is_left_to_the_model(sandbox):
    text = "Dan found 9 wrappers and 4 bottle caps."
    # A text parameter: the model writes it, so the choices cannot be listed.
    assert assignments([Variable("item", "string"), *TWO], text) is None
    assert not unreachable(
        "def solve(item='x', found=1, thrown=2):\n    return 0\n",
        [Variable("item", "string"), *TWO],
        text,
        13,
        sandbox,
    )
    # No number written: the model would extract freely.
    assert assignments(TWO, "no numbers here") is None
    # Too many assignments for one job.
    many = " ".join(str(n) for n in range(1, 30))
    names = [Variable(f"v{i}", "number") for i in range(3)]
    assert 29**3 > MAX_ASSIGNMENTS and assignments(names, many) is None
    # A program that fails in the sandbox as a whole.
    assert not unreachable(
        "def solve(found=1, thrown=2):\n    while True:\n        pass\n", TWO, text, 13, sandbox
    )


@pytest.fixture
def recording_engine(tmp_path, sandbox):
    """An engine whose small model reads the request's first two numbers as found and thrown, and keeps
    what it was asked to read; no alignment, so every held example needs the model."""
    calls: list[str] = []

    def small(messages, options):
        calls.append(messages[-1].content)
        found, thrown = (int(n) for n in re.findall(r"\d+", messages[-1].content)[:2])
        return json.dumps({"found": found, "thrown": thrown})

    def target(messages, options):
        raise AssertionError("validation never asks the target")

    mc = MiniCache(
        FakeBackend(target),
        FakeBackend(small),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False, verify=VerifyConfig(align=False)),
    )
    mc.calls = calls  # type: ignore[attr-defined]
    yield mc
    mc.close()


def test_validation_fails_an_unreachable_example_without_asking_the_small_model(recording_engine):
    origin = example(
        0,
        "Dan found 63 wrappers and threw away 51. How many more did he find than he threw away?",
        12,
    )
    held = [
        origin,
        example(1, "Dan found 9 wrappers and 4 bottle caps. How many did he find in all?", 13),
    ]
    record = recording_engine.builder.validate(DIFFERENCE, held, origin, "", backed=False)
    assert not record.ok
    failed = [c for c in record.checks if not c.match]
    assert [c.example for c in failed] == ["ex1"] and failed[0].error == UNREACHABLE
    assert failed[
        0
    ].by_model  # it needed the model's reading, as a hit would; only the call was saved
    assert not any("Dan found 9" in call for call in recording_engine.calls)


def test_validation_still_asks_the_small_model_where_a_choice_could_give_the_answer(
    recording_engine,
):
    origin = example(
        0,
        "Dan found 63 wrappers and threw away 51. How many more did he find than he threw away?",
        12,
    )
    held = [
        origin,
        example(1, "Dan found 9 wrappers and threw away 4. How many more did he find?", 5),
    ]
    record = recording_engine.builder.validate(DIFFERENCE, held, origin, "", backed=False)
    assert record.ok and record.passed == 2
    assert any("Dan found 9" in call for call in recording_engine.calls)
