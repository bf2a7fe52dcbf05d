"""A sampled build's choice of what it must reproduce (minicache.build.run.BuildRun.work_from).

A minority computation's examples are held as their misses recorded them, so the entry must refuse
them or answer them alike. One of them that vetoed the group's last build is held as any example
instead: kept as a must-pass example, it would veto every later build of the majority's entry.
"""

from __future__ import annotations

from minicache.build.consistency import Consensus, Sample
from minicache.build.run import BuildRun
from minicache.store import Example

MAJORITY = "def solve(a, b):\n    return a / b\n"
MINORITY = "def solve(a, b):\n    return b / a\n"


def _example(i: str, a: int, b: int, answer: float) -> Example:
    return Example(
        id=i,
        tenant="t",
        group_id="g",
        question=f"What is {a} over {b}?",
        context=None,
        program=MAJORITY,
        answer=answer,
        variables={"a": a, "b": b},
    )


def _run(failure: dict | None) -> tuple[BuildRun, Consensus]:
    examples = [_example("e1", 6, 3, 2.0), _example("e2", 8, 2, 4.0), _example("e3", 9, 3, 3.0)]
    winners = {
        "e1": Sample(examples[0], MAJORITY, 2.0, "a/b"),
        "e2": Sample(examples[1], MAJORITY, 4.0, "a/b"),
        "e3": Sample(examples[2], MINORITY, 1 / 3, "b/a"),
    }
    consensus = Consensus(
        winners={k: v for k, v in winners.items() if k != "e3"},
        agreed=6,
        samples=6,
        left_out=["e3"],
    )
    run = BuildRun(
        tenant="t",
        group_id="g",
        examples=examples,
        failure=failure,
        held=list(examples),
        must=set(),
        prefix="",
        newest=list(examples),
        early=False,
        feedback=None,
    )
    return run, consensus


def test_a_minority_computations_example_must_be_reproduced_or_refused_by_the_entry():
    run, consensus = _run(failure=None)
    assert run.work_from(consensus, bar=0.5) is None
    assert run.must == {"e3"}
    assert {ex.id for ex in run.held} == {"e1", "e2", "e3"}
    assert {ex.id for ex in run.newest} == {"e1", "e2"}


def test_a_minority_example_that_vetoed_the_last_build_is_held_but_need_not_pass():
    run, consensus = _run(failure={"failures": 1, "vetoed": ["e3"]})
    assert run.work_from(consensus, bar=0.5) is None
    assert run.must == set()
    # it is still validated on, as any held example, with the answer its miss recorded
    held = {ex.id: ex for ex in run.held}
    assert held["e3"].answer == 3.0 and held["e3"].program == MAJORITY


def test_samples_below_the_agreement_bar_build_nothing_and_say_so():
    run, consensus = _run(failure=None)
    consensus.agreed = 2
    reason = run.work_from(consensus, bar=0.5)
    assert reason is not None and "2 of 6 samples" in reason
    assert run.must == set()
