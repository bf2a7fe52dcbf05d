"""The words every validated example writes, which a hit's request must write too
(minicache.hit.wording)."""

from __future__ import annotations

import time

import pytest

from minicache.config.engine import Wording
from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.wording import (
    asked_words,
    check_wording,
    content_words,
    learn_wording,
    merged_wording,
    missing_words,
    question_of,
    reviewed,
    unexpected_words,
)
from minicache.request import request_text

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
        "wording": {"missing": ["hour"], "extra": [], "asked": ["minute"]},
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


def test_a_word_is_learned_from_two_matching_refusals_that_answered_differently():
    profile = learn_wording(HOURS)
    words = {"missing": ["practice"], "extra": []}
    first = reviewed(profile, words, 2.0)
    assert first == {"learned": [], "evidence": ["missing:practice"]}
    assert profile["wording"] == ["hour", "practice"]  # one match may be a coincidence
    assert reviewed(profile, words, 2.0)["learned"] == []  # the same answer again shows no more
    assert reviewed(profile, words, 0.5)["learned"] == ["missing:practice"]
    assert profile["wording"] == ["hour"] and profile["wording_evidence"] == {}


def test_an_operation_word_no_example_wrote_is_refused_and_can_be_learned():
    profile = learn_wording(HOURS)
    more = (
        "Tom practices 50 minutes on Monday and 20 minutes on Tuesday. "
        "How many more hours does Tom practice on Monday?"
    )
    assert unexpected_words(profile, more) == ([], ["more"])
    with pytest.raises(HitRefused, match="writes 'more', which no validated example wrote"):
        check_wording(profile, more, {"first": 50, "second": 20})
    reviewed(profile, {"missing": [], "extra": ["more"]}, 1.0)
    reviewed(profile, {"missing": [], "extra": ["more"]}, 2.0)
    assert "more" in profile["operations"] and unexpected_words(profile, more) == ([], [])


def test_capitalized_words_side_by_side_are_a_term_not_a_name():
    margin = [
        "What is the Gross Margin if revenue is 50 dollars and cost of goods sold is 30 dollars?",
        "What is the Gross Margin if revenue is 80 dollars and cost of goods sold is 20 dollars?",
    ]
    profile = learn_wording(margin)
    assert {"gross", "margin"} <= set(profile["wording"])
    markup = "What is the Markup if revenue is 50 dollars and cost of goods sold is 30 dollars?"
    assert missing_words(profile, markup) == ["gross", "margin"]


def test_a_long_run_of_digits_or_spaces_is_read_in_linear_time():
    started = time.perf_counter()
    content_words("Basket code X" + "1" * 50_000)
    content_words("5" + " " * 50_000 + ".")
    assert time.perf_counter() - started < 2.0  # quadratic, these took minutes


def test_merged_groups_require_the_words_both_require_and_a_join_narrows_the_record():
    ours = {"wording": ["hour", "practice", "tom"], "operations": []}
    theirs = {"wording": ["hour", "anna", "practice"], "operations": ["total"]}
    merged = merged_wording(ours, theirs, [], [])
    assert merged == {"wording": ["hour", "practice"], "operations": ["total"], "asked": []}
    # one joined example brings no record: its question's own words narrow the survivor's
    ours["asked"] = ["hour", "practice"]
    joined = merged_wording(ours, {}, [], ["Lena jogs 20 minutes. How many hours in all?"])
    assert joined == {"wording": ["hour"], "operations": [], "asked": ["hour"]}
    assert merged_wording({}, {}, [], []) == {}


AREA = [
    "A garden plot measures 5 feet by 4 feet. What is the area of the plot?",
    "A garden plot measures 8 feet by 2 feet. What is the area of the plot?",
]


def test_the_asked_record_is_the_asked_quantitys_words_every_example_wrote():
    assert learn_wording(AREA)["asked"] == ["area"]
    assert learn_wording(HOURS)["asked"] == ["hour"]
    # one example's asked words may be its own: nothing from fewer than two asked phrases
    assert learn_wording([AREA[0], "Plot of 6 feet by 3 feet: area, please."])["asked"] == []


def test_a_question_for_another_quantity_is_refused_only_where_the_asked_words_are_checked():
    profile = learn_wording(AREA)
    perimeter = "A garden plot measures 6 feet by 3 feet. What is the perimeter of the plot?"
    values = {"a": 6, "b": 3}
    with pytest.raises(HitRefused, match="every validated example wrote 'area'"):
        check_wording(profile, perimeter, values, Wording.ASKED)
    check_wording(profile, perimeter, values, Wording.OPERATIONS)
    check_wording(profile, perimeter, values, Wording.OFF)


def test_the_asked_words_may_stand_anywhere_in_a_question_that_names_no_quantity():
    profile = learn_wording(AREA)
    values = {"a": 6, "b": 3}
    check_wording(profile, "Plot of 6 feet by 3 feet: area, please.", values, Wording.ASKED)
    check_wording(profile, "Area of a 6 feet by 3 feet garden plot?", values, Wording.ASKED)


def test_a_review_that_learns_an_asked_word_drops_it_from_the_asked_record():
    profile = learn_wording(AREA)
    words = {"missing": ["area"], "extra": []}
    reviewed(profile, words, 18)
    assert profile["asked"] == ["area"]  # one match may be a coincidence (6 by 3: 18 either way)
    reviewed(profile, words, 20)
    assert profile["asked"] == [] and "area" not in profile["wording"]


def test_asked_words_are_lower_case_and_a_phrase_of_function_words_asks_for_nothing():
    assert asked_words("What is the Area of the garden plot?") == {"area"}
    assert asked_words("What is the value?") is None
    assert asked_words("What are the taxes?") == {"tax"}
    examples = [AREA[0], "A plot measures 8 feet by 2 feet. What is the value?"]
    assert learn_wording(examples)["asked"] == []  # one example's own words decide nothing


def test_the_asked_words_count_capitalized_or_after_a_number_in_the_request():
    values = {"x": 1}
    check_wording({"asked": ["area"]}, "What is the plot's Area?", values, Wording.ASKED)
    check_wording({"asked": ["revenue"]}, "What was the 2019 revenue?", values, Wording.ASKED)
    check_wording({"asked": ["tax"]}, "What are the taxes Tom pays?", values, Wording.ASKED)


@pytest.mark.parametrize(
    ("asks", "other"),
    [
        (
            "What is the number of hours he practices?",
            "What is the number of minutes he practices?",
        ),
        ("How much time in hours does he practice?", "How much time in minutes does he practice?"),
        ("What is the Area of the garden plot?", "What is the perimeter of the garden plot?"),
    ],
)
def test_another_quantity_asked_in_the_examples_phrasing_is_refused(asks: str, other: str):
    profile = learn_wording([f"Tom has 30 and 45. {asks}", f"Tom has 20 and 50. {asks}"])
    with pytest.raises(HitRefused):
        check_wording(profile, f"Tom has 40 and 80. {other}", {"x": 40}, Wording.ASKED)


@pytest.mark.parametrize(
    ("story", "asks", "other"),
    [
        (
            "Tom earns $15 per hour and works {a} and {b} minutes.",
            "How many hours",
            "How many minutes",
        ),
        (
            "A coat costs ${a} with a {b}% discount.",
            "What is the discount?",
            "What is the sale price?",
        ),
        (
            "Ann borrows ${a} at {b}% simple interest.",
            "What is the interest?",
            "What is the amount owed?",
        ),
        (
            "A box holds {a} eggs and there are {b} eggs.",
            "What is the number of eggs?",
            "What is the number of boxes?",
        ),
    ],
)
def test_a_question_whose_own_asked_phrase_shares_no_recorded_word_is_refused(
    story: str, asks: str, other: str
):
    """The story writes the recorded word ("per hour", "a 20% discount"), so looking for it anywhere
    passes; the request's own asked phrase names another quantity."""
    profile = learn_wording(
        [f"{story.format(a=30, b=45)} {asks}", f"{story.format(a=20, b=50)} {asks}"]
    )
    request = f"{story.format(a=40, b=80)} {other}"
    assert unexpected_words(profile, request, Wording.ASKED) == ([], [])
    with pytest.raises(HitRefused, match="which no validated example asked for") as refused:
        check_wording(profile, request, {"x": 40}, Wording.ASKED)
    assert refused.value.readings["wording"]["asked"]
    check_wording(profile, request, {"x": 40}, Wording.OPERATIONS)


def test_a_quantity_named_otherwise_is_learned_from_two_refusals_and_the_record_stays():
    profile = learn_wording(AREA)
    words = {"missing": ["area"], "extra": [], "asked": ["surface"]}
    reviewed(profile, words, 18)
    reviewed(profile, words, 20)
    assert profile["asked_also"] == ["surface"] and profile["asked"] == ["area"]
    surface = "A garden plot measures 6 feet by 3 feet. What is the surface of the plot?"
    check_wording(profile, surface, {"x": 6}, Wording.ASKED)  # the quantity, named as learned
    perimeter = "A plot's area is 6 feet by 3 feet. What is the perimeter of the plot?"
    with pytest.raises(HitRefused, match="'perimeter'"):
        check_wording(profile, perimeter, {"x": 6}, Wording.ASKED)


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("How long in hours does the trip take?", {"long", "hour"}),
        ("How old is Sam?", {"old"}),
        ("What’s its area?", {"area"}),
        ("How much is the total cost?", {"cost"}),
        ("What is the area of the plot? Compute your answer to 2 decimals.", {"area"}),
        ("How many dollars per day does she earn?", {"dollar", "day"}),
        ("How many dollars each day does she earn?", {"dollar", "day"}),
        ("How many apples in total?", {"apple"}),
    ],
)
def test_asked_words_of_common_phrasings(question: str, words: set[str]):
    assert asked_words(question) == words


ROWS_TABLE = """ | 2019 | 2018
Revenue | 4,023 | 2,316
Net loss | (1,911) | (1,812)
Other | 8 | 13"""


def test_the_words_that_name_a_table_row_are_data_not_the_question():
    examples = [
        request_text(f"What was the change in {row} in 2019 from 2018?", ROWS_TABLE)
        for row in ("revenue", "other")
    ]
    profile = learn_wording(examples)
    assert "revenue" not in profile["wording"]  # a row the first example read from
    # "loss" is a word that turns a gain round, but here it names the row the values come from
    net_loss = request_text("What was the change in net loss in 2019 from 2018?", ROWS_TABLE)
    check_wording(profile, net_loss, {}, Wording.ASKED)
    assert question_of(net_loss) == "What was the change in  in 2019 from 2018?"


def test_a_word_that_turns_the_quantity_round_is_an_operation_word():
    profile = learn_wording(
        [
            f"Sam made a gain of ${g} on a cost of ${c}. What is the gain percentage?"
            for g, c in ((500, 400), (90, 300))
        ]
    )
    with pytest.raises(HitRefused) as refused:
        check_wording(
            profile, "Sam made a loss of $100 on a cost of $400. What is the gain percentage?", {}
        )
    assert "'loss'" in refused.value.reason
