"""A hit's request writes the words its entry's validated examples all wrote (minicache.hit.wording):
at the defaults the words of the quantity they asked for, with the full check every content word.

The other checks read numbers and the words beside them. "How many minutes does Tom practice" to an
entry whose examples all asked "How many hours" keeps every number's word ("40 minutes") and was
served the hours entry's answer, 2.0 where the answer is 120. The request leaves out "hours", which
every example wrote, so it is refused and the miss path answers it; the refusal teaches nothing,
since the entry's program gives another answer. A request that leaves out a word the entry's
program answers alike ("exercise" where the examples wrote "practice") is refused; two such
refusals with different answers teach the entry that the word is not needed (one can be a
coincidence).
"""

from __future__ import annotations

from typing import Any

import pytest

import test_engine_word_slots
from fakes import numbers_in, request_of
from minicache.config.engine import Wording
from minicache.engine import MiniCache
from minicache.hit.checks import Check
from test_engine_word_slots import building_engine  # noqa: F401 - a fixture

ASK = (
    "{n} {v}s {a} minutes on Monday and {b} minutes on Tuesday. "
    "How many {ask} does {n} {v} on the two days?"
)
ASKED = [(30, 45), (20, 50), (15, 25)]


def target(messages: list[Any], options: Any) -> str:
    """The target answers the question asked: hours divide the minutes by 60, minutes do not."""
    question = request_of(messages)
    a, b = numbers_in(question)[:2]
    per = 60 if "How many hours" in question else 1  # whatever the activity
    return (
        f"```python\ndef solve():\n    first = {a}\n    second = {b}\n"
        f"    return (first + second) / {per}\n```"
    )


def full(mc: MiniCache) -> MiniCache:
    """``mc`` with the full wording check (``VerifyConfig.wording``; the default checks operation
    words and the asked quantity's words only)."""
    mc.config.verify.wording = Wording.FULL
    return mc


@pytest.fixture
def engine(building_engine, monkeypatch) -> MiniCache:  # noqa: F811 - the fixture imported above
    """Without word slots, with the full wording check; builds after three misses and serves each
    hit once its entry validates."""
    monkeypatch.setattr(test_engine_word_slots, "written_program", target)
    mc, _small = building_engine(build_after=3, word_slots=False)
    return full(mc)


def built(mc: MiniCache) -> str:
    results = [mc.solve(ASK.format(n="Tom", a=a, b=b, ask="hours", v="practice")) for a, b in ASKED]
    assert [r.route for r in results] == ["miss"] * 3 and len({r.group for r in results}) == 1
    entry = mc.store.active_entry("default", results[0].group)
    assert entry is not None and "hour" in entry.validation["profile"]["wording"]
    return results[0].group


def test_a_request_asking_for_another_unit_than_every_example_is_refused_and_answered_by_the_miss(
    engine,
):
    group = built(engine)
    entry = engine.store.active_entry("default", group)
    minutes = engine.solve(ASK.format(n="Tom", a=40, b=80, ask="minutes", v="practice"))
    assert (minutes.route, minutes.group) == ("fallback", group)
    assert f"HitRefused: {Check.WORDING}" in (minutes.fallback_reason or "")
    assert "'hour'" in (minutes.fallback_reason or "")
    assert minutes.answer == pytest.approx(120)
    # founded: the program gives 2.0, so the entry is not revised and refuses the next one too
    kept = engine.store.active_entry("default", group)
    assert kept is not None and kept.id == entry.id
    again = engine.solve(ASK.format(n="Tom", a=90, b=30, ask="minutes", v="practice"))
    assert again.route == "fallback" and again.answer == pytest.approx(120)
    hours = engine.solve(ASK.format(n="Anna", a=40, b=80, ask="hours", v="practice"))
    assert (hours.route, hours.answer) == ("hit", pytest.approx(2.0))


def test_a_word_the_program_answers_alike_without_is_learned_from_two_refusals(engine):
    group = built(engine)
    first = engine.solve(ASK.format(n="Tom", a=40, b=80, ask="hours", v="exercise"))
    assert first.route == "fallback" and "'practice'" in (first.fallback_reason or "")
    assert first.answer == pytest.approx(2.0)
    # one matching answer is evidence, not yet proof: a coincidence gives one too
    pending = engine.store.active_entry("default", group)
    assert pending is not None and "practice" in pending.validation["profile"]["wording"]
    second = engine.solve(ASK.format(n="Ken", a=10, b=20, ask="hours", v="exercise"))
    assert second.route == "fallback" and second.answer == pytest.approx(0.5)
    learned = engine.store.active_entry("default", group)
    assert learned is not None and "practice" not in learned.validation["profile"]["wording"]
    assert "hour" in learned.validation["profile"]["wording"]
    later = engine.solve(ASK.format(n="Ken", a=30, b=60, ask="hours", v="exercise"))
    assert (later.route, later.answer) == ("hit", pytest.approx(1.5))


PLOT = "A garden plot measures {a} feet by {b} feet. What is the {ask} of the garden plot?"


def plot_target(messages: list[Any], options: Any) -> str:
    question = request_of(messages)
    a, b = numbers_in(question)[:2]
    body = "a * b" if "area" in question else "2 * (a + b)"
    return f"```python\ndef solve():\n    a = {a}\n    b = {b}\n    return {body}\n```"


def test_an_answer_that_matches_by_coincidence_teaches_nothing_alone(
    building_engine,  # noqa: F811 - the fixture imported above
    monkeypatch,
):
    """A 6 by 3 plot's perimeter is 18, as its area is: the refused perimeter request's values give
    the miss answer through the area entry. Learned from that alone, 'area' would stop being
    required and every later perimeter request would be served the area."""
    monkeypatch.setattr(test_engine_word_slots, "written_program", plot_target)
    mc = full(building_engine(build_after=3, word_slots=False)[0])
    built = [mc.solve(PLOT.format(a=a, b=b, ask="area")) for a, b in [(5, 4), (8, 2), (7, 3)]]
    assert [r.route for r in built] == ["miss"] * 3
    coincidence = mc.solve(PLOT.format(a=6, b=3, ask="perimeter"))
    assert coincidence.route == "fallback" and coincidence.answer == pytest.approx(18)
    for a, b in [(30, 5), (50, 6), (20, 4)]:
        perimeter = mc.solve(PLOT.format(a=a, b=b, ask="perimeter"))
        assert perimeter.route == "fallback" and perimeter.answer == pytest.approx(2 * (a + b))


def test_by_default_a_question_for_another_quantity_or_operation_is_refused(
    building_engine,  # noqa: F811 - the fixture imported above
    monkeypatch,
):
    """The default (``Wording.ASKED``) serves a question that leaves out an example's incidental
    word ("exercise" where they wrote "practice") and refuses one that asks for another quantity
    ("How many minutes" of an entry whose examples asked for hours) or adds an operation word ("How
    many more hours" of an entry that adds them)."""
    monkeypatch.setattr(test_engine_word_slots, "written_program", target)
    mc, _small = building_engine(build_after=3, word_slots=False)
    assert mc.config.verify.wording == Wording.ASKED
    group = built(mc)
    entry = mc.store.active_entry("default", group)
    assert entry is not None and entry.validation["profile"]["asked"] == ["hour"]
    other = mc.solve(ASK.format(n="Tom", a=40, b=80, ask="hours", v="exercise"))
    assert (other.route, other.answer) == ("hit", pytest.approx(2.0))
    minutes = mc.solve(ASK.format(n="Tom", a=40, b=80, ask="minutes", v="practice"))
    assert (minutes.route, minutes.group) == ("fallback", group)
    assert "every validated example wrote 'hour'" in (minutes.fallback_reason or "")
    assert minutes.answer == pytest.approx(120)
    more = mc.solve(
        "Tom practices 50 minutes on Monday and 20 minutes on Tuesday. "
        "How many more hours does Tom practice on Monday?"
    )
    assert more.group == group and more.route == "fallback"
    assert "writes 'more', which no validated example wrote" in (more.fallback_reason or "")


def test_by_default_a_perimeter_question_is_not_served_an_area_entrys_answer(
    building_engine,  # noqa: F811 - the fixture imported above
    monkeypatch,
):
    """Both questions write the same numbers beside the same words; only the asked quantity tells
    them apart, and the area entry's examples all asked for "area"."""
    monkeypatch.setattr(test_engine_word_slots, "written_program", plot_target)
    mc, _small = building_engine(build_after=3, word_slots=False)
    built = [mc.solve(PLOT.format(a=a, b=b, ask="area")) for a, b in [(5, 4), (8, 2), (7, 3)]]
    assert [r.route for r in built] == ["miss"] * 3
    area = mc.solve(PLOT.format(a=9, b=2, ask="area"))
    assert (area.route, area.answer) == ("hit", pytest.approx(18))
    for a, b in [(30, 5), (50, 6)]:
        perimeter = mc.solve(PLOT.format(a=a, b=b, ask="perimeter"))
        assert perimeter.group == built[0].group and perimeter.route == "fallback"
        assert "every validated example wrote 'area'" in (perimeter.fallback_reason or "")
        assert perimeter.answer == pytest.approx(2 * (a + b))
