"""What a reviewed word-after refusal learns (minicache.hit.words_after.learn): only an answer that
changes with the refused numbers scaled up and down shows their words right, and the words of
several numbers are learned as one set, which a later request must write all together."""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_words_after import PRACTICE, profile_of

import test_engine_word_slots
from fakes import numbers_in, request_of
from minicache.build.merge import merged_profile
from minicache.engine import MiniCache
from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.words_after import check_written, learn, with_pairs
from test_engine_word_slots import building_engine  # noqa: F401 - a fixture

FULL_HOURS = (
    "Tom practices {a} {u} on Monday and {b} {u} on Tuesday. "
    "How many full hours does Tom practice on the two days?"
)
BAKES = "Tom buys {a} {u} of flour and {b} {v} of sugar. What is the total weight of the flour and sugar?"
PER_HOUR = {"minutes": 60, "seconds": 3600}
GRAMS = {"grams": 1, "kg": 1000}


def target(messages: list[Any], options: Any) -> str:
    """The target: full hours of practice by the request's own unit, or the baking's weight in grams
    where the request mixes grams and kilograms (in its own unit where it writes one)."""
    question = request_of(messages)
    a, b = numbers_in(question)[:2]
    if "practices" in question:
        per_hour = PER_HOUR["seconds" if "seconds" in question else "minutes"]
        names, body = ("first", "second"), f"(first + second) // {per_hour}"
    else:
        units = re.findall(r"\d+ (grams|kg) of", question)
        k = [1, 1] if len(set(units)) == 1 else [GRAMS[u] for u in units]
        names, body = ("flour", "sugar"), f"flour * {k[0]} + sugar * {k[1]}"
    lines = [f"    {names[0]} = {a}", f"    {names[1]} = {b}", f"    return {body}"]
    return "```python\ndef solve():\n" + "\n".join(lines) + "\n```"


@pytest.fixture
def engine(building_engine, monkeypatch) -> MiniCache:  # noqa: F811 - the fixture imported above
    """Without word slots, with this module's target; builds after three misses, serves each hit
    once its entry validates (test_engine_word_slots.building_engine)."""
    monkeypatch.setattr(test_engine_word_slots, "written_program", target)
    mc, _small = building_engine(build_after=3, word_slots=False)
    return mc


def built(mc: MiniCache, template: str, asked: list[tuple[int, int]], **units: str) -> str:
    """Solves the three requests in the examples' unit; the group they built an entry for."""
    results = [mc.solve(template.format(a=a, b=b, **units)) for a, b in asked]
    assert [r.route for r in results] == ["miss"] * 3 and len({r.group for r in results}) == 1
    assert mc.store.active_entry("default", results[0].group) is not None
    return results[0].group


def test_a_floor_that_is_zero_in_either_unit_teaches_no_word(engine):
    """'20 seconds and 30 seconds' make 0 full hours read as minutes too, and 7 times as many
    minutes make 5: only the scale up changes the answer. The refusal teaches nothing, and 1800
    seconds are not served as 1800 minutes (75 full hours; the answer is 1)."""
    group = built(engine, FULL_HOURS, [(30, 45), (20, 50), (70, 80)], u="minutes")
    entry = engine.store.active_entry("default", group)
    poison = engine.solve(FULL_HOURS.format(a=20, b=30, u="seconds"))
    assert (poison.route, poison.answer) == ("fallback", 0)
    assert "word-after" in (poison.fallback_reason or "")
    kept = engine.store.active_entry("default", group)
    assert kept is not None and entry is not None and kept.id == entry.id
    later = engine.solve(FULL_HOURS.format(a=1800, b=2700, u="seconds"))
    assert (later.route, later.answer) == ("fallback", 1)
    hit = engine.solve(FULL_HOURS.format(a=100, b=50, u="minutes"))
    assert (hit.route, hit.answer) == ("hit", 2)


def test_units_learned_together_pass_together_and_a_mix_is_answered_by_the_miss_path(engine):
    """'4 kg of flour and 4 kg of sugar' gives the grams sum's 8 (a sum counts in the request's own
    unit): the entry learns kg for both numbers together. Another request in kg is a hit; one that
    writes grams beside kg is refused and answered by the miss path (2500, not 502)."""
    asked = [(300, 200), (450, 150), (250, 600)]
    group = built(engine, BAKES, asked, u="grams", v="grams")
    kg = engine.solve(BAKES.format(a=4, b=4, u="kg", v="kg"))
    assert (kg.route, kg.answer) == ("fallback", 8)
    revised = engine.store.active_entry("default", group)
    assert revised is not None and "revised_from" in revised.validation
    profile = revised.validation["profile"]
    assert profile["words_after"] == {"flour": ["grams"], "sugar": ["grams"]}
    assert profile["learned_words"] == [{"words_after": {"flour": "kg", "sugar": "kg"}}]
    both = engine.solve(BAKES.format(a=6, b=2, u="kg", v="kg"))
    assert (both.route, both.answer) == ("hit", 8)
    for a, u, b, v, grams in [(500, "grams", 2, "kg", 2500), (4, "kg", 250, "grams", 4250)]:
        mixed = engine.solve(BAKES.format(a=a, b=b, u=u, v=v))
        assert (mixed.route, mixed.answer) == ("fallback", grams)
        assert "word-after" in (mixed.fallback_reason or "")
    kept = engine.store.active_entry("default", group)
    assert kept is not None and kept.id == revised.id  # the mixes' answers (2500) show nothing


def minutes_profile() -> dict:
    return profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])


def refused_by_words(profile: dict, text: str, first: int, second: int) -> HitRefused | None:
    """The word-after check's refusal alone (a word that is no known unit meets other checks too)."""
    try:
        check_written(profile, {"first": first, "second": second}, text)
    except HitRefused as refused:
        return refused
    return None


def full_hours(values: dict[str, Any]) -> Any:
    return (values["first"] + values["second"]) // 60


def hours(values: dict[str, Any]) -> Any:
    return (values["first"] + values["second"]) / 60


def test_an_answer_only_a_scale_up_changes_teaches_nothing():
    profile = minutes_profile()
    before = dict(profile)
    seconds = {"words_after": {"first": "seconds", "second": "seconds"}}
    assert learn(profile, seconds, {"first": 20, "second": 30}, full_hours) == {}
    assert profile == before


def test_a_scaled_run_that_fails_teaches_nothing():
    """A program that takes whole numbers only fails on the values scaled down: no evidence."""

    def whole(values: dict[str, Any]) -> Any:
        first, second = values["first"], values["second"]
        return None if first != int(first) or second != int(second) else hours(values)

    mins = {"words_after": {"first": "mins", "second": "mins"}}
    assert learn(minutes_profile(), mins, {"first": 40, "second": 80}, whole) == {}
    assert learn(minutes_profile(), mins, {"first": 40, "second": 80}, hours) != {}


def test_a_set_passes_only_when_a_request_writes_all_of_it():
    profile = minutes_profile()
    mins = {"words_after": {"first": "mins", "second": "mins"}}
    assert learn(profile, mins, {"first": 40, "second": 80}, hours) == {
        "words_after": {"first": ["mins"], "second": ["mins"]}
    }
    assert refused_by_words(profile, PRACTICE.format(a=25, b=35, u="mins"), 25, 35) is None
    mixed = "Tom practices 25 mins on Monday and 35 minutes on Tuesday. How many hours in all?"
    refused = refused_by_words(profile, mixed, 25, 35)
    assert refused is not None and refused.check == Check.WORD_AFTER
    assert refused.readings is not None
    assert refused.readings["written"] == {"words_after": {"first": "mins"}}


def test_a_number_written_with_no_word_is_part_of_the_set():
    """'40 mins ... and 80 on Tuesday' teaches mins beside a second number written bare: a request
    that writes the second number in minutes, or in mins, is no such request."""
    profile = minutes_profile()
    bare = "Tom practices {a} mins on Monday and {b} on Tuesday. How many hours in all?"
    refused = refused_by_words(profile, bare.format(a=40, b=80), 40, 80)
    assert refused is not None and refused.readings is not None
    written = refused.readings["written"]
    assert written == {"words_after": {"first": "mins", "second": None}}
    assert learn(profile, written, {"first": 40, "second": 80}, hours)
    assert refused_by_words(profile, bare.format(a=25, b=35), 25, 35) is None
    for unit in ("minutes", "mins"):
        text = f"Tom practices 25 mins on Monday and 35 {unit} on Tuesday. How many hours in all?"
        assert refused_by_words(profile, text, 25, 35) is not None


def test_one_numbers_word_beside_the_examples_own_is_learned_for_that_variable():
    profile = minutes_profile()
    mins = {"words_after": {"first": "mins"}}
    assert learn(profile, mins, {"first": 40, "second": 80}, hours) == {
        "words_after": {"first": ["mins"]}
    }
    assert profile["words_after"] == {"first": ["mins", "minutes"], "second": ["minutes"]}
    assert not profile.get("learned_words")


def test_an_older_entrys_accepted_words_are_each_accepted_alone():
    """An entry stored with learned words in its per-variable lists keeps accepting them as they
    are."""
    profile = minutes_profile()
    profile["words_after"] = {"first": ["mins", "minutes"], "second": ["mins", "minutes"]}
    mixed = "Tom practices 25 mins on Monday and 35 minutes on Tuesday. How many hours in all?"
    assert refused_by_words(profile, mixed, 25, 35) is None
    seconds = refused_by_words(profile, PRACTICE.format(a=25, b=35, u="seconds"), 25, 35)
    assert seconds is not None and seconds.check == Check.WORD_AFTER


def test_a_merge_keeps_each_groups_sets_renamed_and_drops_one_whose_variable_is_unrecorded():
    ours = minutes_profile()
    ours["learned_words"] = [{"words_after": {"first": "mins", "second": "mins"}}]
    theirs = minutes_profile()
    theirs["words_after"] = {"start": ["minutes"], "end": ["minutes"]}
    theirs["learned_words"] = [
        {"words_after": {"start": "mins", "end": "mins"}},
        {"words_after": {"start": "mn", "end": "mn"}},
        {"words_after": {"start": "hrs", "other": "hrs"}},
    ]
    merged = merged_profile(ours, theirs, {"start": "first", "end": "second"}, [], [])
    assert merged["learned_words"] == [
        {"words_after": {"first": "mins", "second": "mins"}},
        {"words_after": {"first": "mn", "second": "mn"}},
    ]
    mixed = "Tom practices 25 mins on Monday and 35 mn on Tuesday. How many hours in all?"
    assert refused_by_words(merged, mixed, 25, 35) is not None
    assert refused_by_words(merged, PRACTICE.format(a=25, b=35, u="mn"), 25, 35) is None


def test_a_join_learns_its_examples_words_as_a_set_and_keeps_the_entrys():
    profile = minutes_profile()
    profile["learned_words"] = [{"words_after": {"first": "mn", "second": "mn"}}]
    joined = with_pairs(
        profile, [(PRACTICE.format(a=40, b=80, u="mins"), {"first": 40, "second": 80})], hours
    )
    assert joined["words_after"] == {"first": ["minutes"], "second": ["minutes"]}
    assert joined["learned_words"] == [
        {"words_after": {"first": "mn", "second": "mn"}},
        {"words_after": {"first": "mins", "second": "mins"}},
    ]
    seconds = (PRACTICE.format(a=20, b=30, u="seconds"), {"first": 20, "second": 30})
    assert with_pairs(profile, [seconds], full_hours)["learned_words"] == profile["learned_words"]
