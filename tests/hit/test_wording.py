"""The words every validated example writes, which a hit's request must write too
(minicache.hit.wording)."""

from __future__ import annotations

import pytest

from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.wording import (
    check_wording,
    content_words,
    learn_wording,
    merged_wording,
    missing_words,
    without,
)

HOURS = [
    "Tom practices 30 minutes on Monday and 45 minutes on Tuesday. How many hours does he practice?",
    "Tom practices 20 minutes on Monday and 70 minutes on Tuesday. How many hours does he practice?",
]


def test_content_words_drop_function_words_names_and_a_plurals_s():
    assert content_words("How many hours does Tom practice?") == {"hour", "practice"}
    assert content_words("Is the class less than 5?") == {"class", "less"}
    assert content_words("How many berries and CPI points?") == {"berry", "cpi", "point"}


def test_the_word_after_a_number_is_the_word_after_checks_not_the_wordings():
    assert content_words("It took 30 minutes and 5-year bonds.") == {"took", "bond"}
    assert content_words("The sales were $5.2 million, 2,000 units.") == {"sale"}


def test_a_request_writes_a_word_that_opens_its_sentence_capitalized():
    assert content_words("Current ratio please: assets 64,000.") == {"ratio", "please", "asset"}
    assert "current" in content_words("Current ratio please: assets 64,000.", openers=True)
    profile = {"wording": ["current", "ratio"]}
    assert missing_words(profile, "Current ratio please: assets 64,000 over 16,000.") == []


def test_the_record_is_the_words_every_example_writes():
    assert learn_wording(HOURS)["wording"] == ["hour", "practice"]


def test_one_example_records_nothing():
    assert learn_wording(HOURS[:1]) == {}
    assert missing_words({}, "anything at all") == []


def test_a_request_asking_for_another_unit_is_refused_with_its_values():
    profile = learn_wording(HOURS)
    minutes = (
        "Tom practices 40 minutes on Monday and 80 minutes on Tuesday. How many minutes in all?"
    )
    with pytest.raises(HitRefused) as refused:
        check_wording(profile, minutes, {"first": 40, "second": 80})
    assert refused.value.check == Check.WORDING
    assert refused.value.readings == {
        "hit": {"first": 40, "second": 80},
        "wording": {"missing": ["hour"]},
    }


def test_a_request_writing_every_recorded_word_passes_whatever_else_it_writes():
    profile = learn_wording(HOURS)
    check_wording(
        profile,
        "On Monday Tom practices 15 minutes, on Tuesday 25 minutes: hours of practice in all?",
        {"first": 15, "second": 25},
    )


def test_more_against_fewer_in_the_question_is_refused():
    profile = learn_wording(
        [
            "Ann has 5 apples and Bob 8 apples. How many more apples does Bob have?",
            "Ann has 7 pears and Bob 9 pears. How many more pears does Bob have?",
        ]
    )
    assert profile["wording"] == ["more"]
    fewer = "Ann has 5 apples and Bob 8 apples. How many fewer apples does Ann have?"
    assert missing_words(profile, fewer) == ["more"]


def test_a_review_drops_the_words_a_request_showed_unneeded():
    profile = learn_wording(HOURS)
    assert without(profile, ["practice"]) == ["hour"]


def test_merged_groups_require_the_words_both_require():
    ours = {"wording": ["hour", "practice", "tom"]}
    theirs = {"wording": ["hour", "anna", "practice"]}
    assert merged_wording(ours, theirs) == {"wording": ["hour", "practice"]}
    assert merged_wording(ours, {}) == {}
