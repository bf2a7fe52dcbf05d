"""A hit reads a number in the unit every example of its entry wrote it in (minicache.hit.profile).

A request that names its unit away from its numbers ("In seconds, Tom practices 1800 on Monday")
writes no word after them for the word check to refuse (tests/test_engine_units.py), and a learned
rule reading by position served an entry built on "30 minutes ... 45 minutes" 75.0 hours (the answer
is 1.25). Every example wrote both numbers in minutes: a request writing them in no unit is refused
(``Check.UNIT``) and the miss path answers it; a request in the examples' unit, or a form the
number's kind reads as that unit ("a 40-minute session"), is still a zero-model hit."""

from __future__ import annotations

import pytest

from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.extraction import Extractor
from minicache.hit.verify import HitVerifier
from test_engine_units import built, engine  # noqa: F401 - a fixture
from test_engine_word_slots import PRACTICE, building_engine  # noqa: F401 - a fixture

# The entry is built on three requests in minutes (test_engine_units.built). The target
# (test_engine_word_slots.written_program) adds the practice's two amounts and converts them to
# hours by the request's own unit ("seconds" anywhere in it).
ELSEWHERE = (
    "In seconds, Tom practices {a} on Monday and {b} on Tuesday. "
    "How many hours does Tom practice on the two days?"
)


def test_a_request_naming_its_unit_elsewhere_is_refused_and_the_miss_path_answers_it(
    engine,  # noqa: F811 - the fixture imported above
):
    mc, small = engine
    entry = built(mc)
    assert "/ 60" in entry.program
    assert entry.validation["profile"]["units"] == {"first": "unit:minute", "second": "unit:minute"}
    request = ELSEWHERE.format(a=1800, b=2700)
    with pytest.raises(HitRefused) as refusal:
        HitVerifier(Extractor(small)).extract(entry, request)
    assert refusal.value.check == Check.UNIT
    result = mc.solve(request)
    assert (result.route, result.group) == ("fallback", entry.group_id)
    assert "HitRefused: unit: first was written in minute in every example" in (
        result.fallback_reason or ""
    )
    assert result.answer == pytest.approx((1800 + 2700) / 3600)
    # A UNIT refusal teaches nothing: the entry is as it was and still serves its own unit.
    kept = mc.store.active_entry("default", entry.group_id)
    assert kept is not None and kept.id == entry.id
    hit = mc.solve(PRACTICE.format(n="Tom", a=40, b=80, u="minutes"))
    assert (hit.route, hit.entry_id) == ("hit", entry.id)
    assert hit.answer == pytest.approx(2.0)


def test_a_request_in_the_examples_unit_written_otherwise_is_a_zero_model_hit(
    engine,  # noqa: F811 - the fixture imported above
):
    """The singular "minute" is the kind "minutes" is; a 2 beside "the *two* days" (a number
    word, which names no unit) is still the one written in minutes."""
    mc, small = engine
    entry = built(mc)
    asked = len(small.calls)
    hits = [
        mc.solve(PRACTICE.format(n="Tom", a=25, b=35, u="minute")),
        mc.solve(PRACTICE.format(n="Tom", a=58, b=2, u="minutes")),
    ]
    assert {(h.route, h.entry_id, h.extraction in ("rule", "align")) for h in hits} == {
        ("hit", entry.id, True)
    }
    assert [h.answer for h in hits] == pytest.approx([1.0, 1.0])
    assert len(small.calls) == asked  # zero-model hits: the small model was not asked


def test_an_entry_stored_without_the_record_serves_as_before(
    engine,  # noqa: F811 - the fixture imported above
):
    """The record is the evidence: an entry stored by a version that kept none refuses nothing new
    (and so still serves the request in seconds by position, the hole this record closes)."""
    mc, small = engine
    entry = built(mc)
    entry.validation["profile"].pop("units")
    got = HitVerifier(Extractor(small)).extract(entry, ELSEWHERE.format(a=18, b=27))
    assert got.variables == {"first": 18, "second": 27}
