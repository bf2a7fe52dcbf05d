"""A hit reads a number in the unit its entry's examples wrote after it (minicache.hit.profile).

Without word slots, a request that differs from an entry's examples in one word routes into the
group by its embedding; a learned rule reads its numbers by where they stand. "1800 seconds" read
as an hours entry's minutes was served as 75.0 (the answer is 1.25). Where every validated example
followed a slot's number with one word, a request whose number is followed by another word is
refused (``Check.WORD_AFTER``) and the miss path answers it; where the examples differ in that word,
or the request writes the examples' own, nothing is refused. A refusal the miss answer shows
unfounded (the entry's program on the refused values gives it) teaches the entry the word; a founded
one teaches nothing."""

from __future__ import annotations

import pytest

from minicache.engine import MiniCache
from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.extraction import Extractor
from minicache.hit.verify import HitVerifier
from test_engine_word_slots import PRACTICE, building_engine  # noqa: F401 - a fixture

ASKED = [(30, 45), (20, 50), (15, 25)]
# The target (test_engine_word_slots.written_program) adds the practice's two amounts and converts
# them to hours by the request's own unit, and subtracts what was given away.


@pytest.fixture
def engine(building_engine):  # noqa: F811 - the fixture imported above
    """Without word slots (the default); builds after three misses, serves each hit at once."""
    return building_engine(build_after=3, word_slots=False)


def built(mc: MiniCache):
    """Solve the three practice requests in minutes; the group's entry."""
    results = [mc.solve(PRACTICE.format(n="Tom", a=a, b=b, u="minutes")) for a, b in ASKED]
    assert [r.route for r in results] == ["miss"] * 3
    assert len({r.group for r in results}) == 1
    entry = mc.store.active_entry("default", results[0].group)
    assert entry is not None
    return entry


def test_a_minutes_entry_refuses_a_request_in_seconds_and_the_miss_path_answers_it(engine):
    mc, small = engine
    entry = built(mc)
    assert "/ 60" in entry.program
    request = PRACTICE.format(n="Tom", a=1800, b=2700, u="seconds")
    verifier = HitVerifier(Extractor(small))
    with pytest.raises(HitRefused) as refusal:
        verifier.extract(entry, request)
    assert refusal.value.check == Check.WORD_AFTER
    assert "'seconds'" in refusal.value.reason and "'minutes'" in refusal.value.reason
    result = mc.solve(request)
    assert (result.route, result.group) == (
        "fallback",
        entry.group_id,
    )  # a refused hit, then a miss
    assert "HitRefused: word-after: first is followed by 'seconds'" in (
        result.fallback_reason or ""
    )
    assert result.answer == pytest.approx((1800 + 2700) / 3600)
    # The refusal was founded (the program gives 75.0): the entry is not revised, and refuses the
    # next request in seconds as it serves its own unit.
    kept = mc.store.active_entry("default", entry.group_id)
    assert kept is not None and (kept.id, kept.validation) == (entry.id, entry.validation)
    again = mc.solve(PRACTICE.format(n="Tom", a=600, b=1200, u="seconds"))
    assert again.route == "fallback" and again.answer == pytest.approx(0.5)
    hit = mc.solve(PRACTICE.format(n="Tom", a=40, b=80, u="minutes"))
    assert (hit.route, hit.entry_id) == ("hit", kept.id)
    assert hit.answer == pytest.approx(2.0)


def test_an_unfounded_refusal_teaches_the_entry_the_word_and_the_next_request_so_written_hits(
    engine,
):
    """'mins' is no word the examples wrote: the first request in mins is refused and answered by
    the miss path, whose answer the entry's program gives on the refused values. The entry's next
    version accepts 'mins' after both numbers together, and the next request so written is a
    zero-model hit."""
    mc, small = engine
    entry = built(mc)
    first = mc.solve(PRACTICE.format(n="Tom", a=40, b=80, u="mins"))
    assert (first.route, first.group) == ("fallback", entry.group_id)
    assert "word-after: first is followed by 'mins'" in (first.fallback_reason or "")
    assert first.answer == pytest.approx(2.0)
    revised = mc.store.active_entry("default", entry.group_id)
    assert revised is not None and revised.id != entry.id
    assert revised.validation["revised_from"] == entry.id
    profile = revised.validation["profile"]
    assert profile["words_after"] == {"first": ["minutes"], "second": ["minutes"]}
    assert profile["learned_words"] == [{"words_after": {"first": "mins", "second": "mins"}}]
    asked = len(small.calls)
    hit = mc.solve(PRACTICE.format(n="Tom", a=25, b=35, u="mins"))
    assert (hit.route, hit.entry_id, hit.extraction) == ("hit", revised.id, "rule")
    assert hit.answer == pytest.approx(1.0)
    assert len(small.calls) == asked


def test_a_request_in_the_examples_own_unit_is_a_zero_model_hit(engine):
    mc, small = engine
    entry = built(mc)
    asked = len(small.calls)
    for a, b, u in [(40, 80, "minutes"), (1, 59, "Minutes")]:
        hit = mc.solve(PRACTICE.format(n="Tom", a=a, b=b, u=u))
        assert (hit.route, hit.entry_id) == ("hit", entry.id)
        assert hit.extraction in ("rule", "align")
        assert hit.answer == pytest.approx((a + b) / 60)
    assert len(small.calls) == asked


GIVES = "Tom has {a} {i} in a box and gives {b} of them away. How many {i} does Tom have left?"


@pytest.mark.parametrize(
    ("items", "route"), [(["apples", "pears", "apples"], "hit"), (["apples"] * 3, "fallback")]
)
def test_only_examples_that_agree_on_the_word_after_a_number_refuse_another(engine, items, route):
    """Examples that named apples and pears after the first number record no word there: a request
    naming books is served by the entry. Examples that all named apples record it: the request is
    refused and answered by the miss path (rightly, as the target writes it)."""
    mc, _small = engine
    asked = [(5, 3), (4, 2), (7, 1)]
    first = [mc.solve(GIVES.format(a=a, b=b, i=i)) for (a, b), i in zip(asked, items, strict=True)]
    assert [r.route for r in first] == ["miss"] * 3 and len({r.group for r in first}) == 1
    entry = mc.store.active_entry("default", first[0].group)
    assert entry is not None
    assert ("first" in entry.validation["profile"]["words_after"]) is (route == "fallback")
    result = mc.solve(GIVES.format(a=6, b=2, i="books"))
    assert (result.route, result.group, result.answer) == (route, entry.group_id, 4)
