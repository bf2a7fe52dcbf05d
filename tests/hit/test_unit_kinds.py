"""The unit a variable's number is written in (minicache.hit.profile.learn_units, check_units).

A request that names its unit away from its numbers ("In seconds, Tom practices 1800 on Monday")
writes no word after them for the word check to refuse, and an entry whose examples all wrote
"30 minutes" served it as 1800 minutes. Where every example wrote a variable's number in one unit
kind, a request writing it plainly or in another unit is refused (``Check.UNIT``); a form the kind
parser reads as that unit ("5-year" for "5 years"), or a word the entry accepts after the number,
passes; an entry with no such record refuses nothing new."""

from __future__ import annotations

import pytest
from test_words_after import refusal  # the hit's checks on a profile, as a hit runs them

from minicache.build.merge import merged_profile
from minicache.hit.checks import Check
from minicache.hit.profile import learn_profile, learn_units
from minicache.hit.verify import REFUTING
from minicache.hit.words_after import accept, learn
from minicache.store import Variable

TWO = [Variable("first", "number", "the first amount"), Variable("second", "number", "the second")]
PRACTICE = "Tom practices {a} {u} on Monday and {b} {u} on Tuesday. How many hours in all?"
BOND = "A {a}{u} bond pays {b}% a year. What is it worth?"
MINUTES = [(30, 45, "minutes"), (20, 50, "minutes"), (15, 25, "minutes")]


def pairs_of(template: str, asked: list[tuple[float, float, str]]) -> list:
    return [(template.format(a=a, b=b, u=u), {"first": a, "second": b}) for a, b, u in asked]


def profile_of(template: str, asked: list[tuple[float, float, str]]) -> dict:
    return learn_profile(TWO, pairs_of(template, asked), [a + b for a, b, _ in asked])


def test_a_unit_every_example_wrote_is_recorded():
    assert profile_of(PRACTICE, MINUTES)["units"] == {
        "first": "unit:minute",
        "second": "unit:minute",
    }
    # "5-year" and "5 years" are one kind; the percentage is no unit.
    bonds = [(5, 4, "-year"), (10, 3, " years"), (7, 5, "-year")]
    assert learn_units(TWO, pairs_of(BOND, bonds)) == {"first": "unit:year"}


@pytest.mark.parametrize(
    "asked",
    [
        [(30, 45, "minutes")],  # one example says nothing
        [(30, 45, "minutes"), (20, 50, "hours")],  # two units
        [(30, 45, "minutes"), (20, 50, "")],  # one written plainly
    ],
)
def test_examples_that_do_not_all_write_one_unit_record_none(asked):
    assert learn_units(TWO, pairs_of(PRACTICE, asked)) == {}


def test_an_example_writing_its_number_in_two_kinds_records_none():
    pairs = pairs_of(PRACTICE, MINUTES)
    pairs[1] = (
        "Tom practices 20 minutes on Monday and 50 minutes on Tuesday, 20 days.",
        pairs[1][1],
    )
    assert learn_units(TWO, pairs) == {"second": "unit:minute"}


@pytest.mark.parametrize(
    "text",
    [
        "In seconds, Tom practices 1800 on Monday and 2700 on Tuesday. How many hours in all?",
        "Tom practices 1800 on Monday and 2700 on Tuesday, in seconds. How many hours in all?",
        "Tom practices 1800 (seconds) on Monday and 2700 (seconds) on Tuesday. How many hours?",
    ],
)
def test_a_number_written_in_no_unit_is_refused_where_every_example_wrote_one(text):
    profile = profile_of(PRACTICE, MINUTES)
    text = text.replace("1800", "18").replace("2700", "27")  # in range: the range check passes
    refused = refusal(profile, text, 18, 27)
    assert refused is not None and refused.check == Check.UNIT
    assert refused.variable == "first" and "minute" in refused.reason
    assert Check.UNIT in REFUTING  # the small model may choose again without the value


def test_a_number_in_another_unit_kind_is_refused_where_the_word_check_holds_no_record():
    profile = profile_of(PRACTICE, MINUTES)
    del profile["words_after"]  # as where the examples' words differed but their kind did not
    refused = refusal(profile, PRACTICE.format(a=1, b=2, u="hours"), 1, 2)
    assert refused is not None and refused.check == Check.UNIT
    assert refused.reason.endswith("1 is written with hours")


def test_another_word_after_the_number_is_the_word_checks_to_refuse_and_review():
    """The word check goes first: its refusal is the one a miss answer may show unfounded."""
    refused = refusal(profile_of(PRACTICE, MINUTES), PRACTICE.format(a=40, b=50, u="mins"), 40, 50)
    assert refused is not None and refused.check == Check.WORD_AFTER


@pytest.mark.parametrize(
    "text",
    [
        "Tom practices 30 minutes on Monday and 30 on Tuesday. How many hours in all?",
        "Tom practices 30 minutes on Monday and 30% more on Tuesday. How many hours in all?",
    ],
)
def test_a_value_in_the_unit_at_one_place_and_bare_at_another_passes(text):
    """A bare number or a percentage names no unit of its own beside the one in minutes."""
    assert refusal(profile_of(PRACTICE, MINUTES), text, 30, 30) is None


def test_a_number_word_equal_to_the_value_is_no_refusal():
    profile = profile_of(PRACTICE, MINUTES)
    text = "Tom practices 20 minutes on Monday and 2 minutes on Tuesday. How many hours in the two?"
    assert refusal(profile, text, 20, 2) is None


@pytest.mark.parametrize(
    "text",
    [
        PRACTICE.format(a=40, b=50, u="minutes"),
        PRACTICE.format(a=40, b=50, u="minute"),
        "Tom practices a 40-minute session on Monday and 50 Minutes on Tuesday. How many hours?",
    ],
)
def test_a_form_the_kind_parser_reads_as_the_unit_passes(text):
    assert refusal(profile_of(PRACTICE, MINUTES), text, 40, 50) is None


def test_a_hyphened_unit_passes_where_the_examples_wrote_it_spaced():
    bonds = [(5, 4, " years"), (10, 3, " years")]
    profile = profile_of(BOND, bonds)
    assert profile["units"] == {"first": "unit:year"}
    assert refusal(profile, BOND.format(a=7, b=5, u="-year"), 7, 5) is None
    refused = refusal(profile, "A bond due in 7, paying 5% a year. What is it worth?", 7, 5)
    assert refused is not None and refused.check == Check.UNIT


def test_a_word_the_entry_learned_after_the_number_passes():
    """'mins' is no unit to the kind parser; once a reviewed refusal taught the entry the word
    (minicache.hit.words_after.accept), the request in mins is in the unit."""
    profile = profile_of(PRACTICE, MINUTES)
    accept(profile, {"words_after": {"first": ["mins"], "second": ["mins"]}})
    assert refusal(profile, PRACTICE.format(a=40, b=50, u="mins"), 40, 50) is None


def test_words_a_review_learned_as_one_set_pass_where_the_word_check_passes_them():
    """Learned together (minicache.hit.words_after.learn), "mins" after both numbers is accepted
    only as a set, which the word check answers for: the unit check does not refuse it again."""
    profile = profile_of(PRACTICE, MINUTES)
    written = {"words_after": {"first": "mins", "second": "mins"}}
    learned = learn(profile, written, {"first": 40, "second": 80}, lambda v: sum(v.values()) / 60)
    assert learned and "mins" not in profile["words_after"]["first"]
    assert refusal(profile, PRACTICE.format(a=25, b=35, u="mins"), 25, 35) is None


def test_an_entry_without_the_record_refuses_nothing_new():
    profile = profile_of(PRACTICE, MINUTES)
    del profile["units"]  # stored by a version that kept no such record
    text = "In seconds, Tom practices 18 on Monday and 27 on Tuesday. How many hours in all?"
    assert refusal(profile, text, 18, 27) is None


def test_a_merge_with_a_group_that_wrote_another_kind_switches_the_check_off():
    """The merged kinds are no longer the recorded unit alone; the survivor's record stays as it
    was (minicache.build.merge copies it), so the kinds tell."""
    ours = profile_of(PRACTICE, MINUTES)
    hours = [(1, 2, "hours"), (2, 3, "hours")]
    merged = merged_profile(ours, profile_of(PRACTICE, hours), {}, [], [])
    assert merged["units"] == ours["units"]
    assert refusal(merged, PRACTICE.format(a=2, b=3, u="hours"), 2, 3) is None


@pytest.mark.parametrize(("other", "says"), [("seconds", "seconds"), ("days", "days")])
def test_a_value_in_the_unit_at_one_place_and_in_another_at_another_is_refused(other, says):
    """The word check passes it (one place writes an accepted word); which place is the
    variable's the text does not say, and the other names a unit of its own."""
    profile = profile_of(PRACTICE, MINUTES)
    text = f"Tom practices 30 minutes on Monday and 30 {other} on Tuesday. How many hours in all?"
    refused = refusal(profile, text, 30, 30)
    assert refused is not None and refused.check == Check.UNIT
    assert refused.reason.endswith(f"30 is written with {says}")
