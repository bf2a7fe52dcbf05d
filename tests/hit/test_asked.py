"""What a question asks for (minicache.hit.asked)."""

from __future__ import annotations

import time

import pytest

from minicache.hit.asked import asked_phrase


@pytest.mark.parametrize(
    ("question", "phrase"),
    [
        ("How many minutes does Tom practice in a week?", "minutes"),
        ("How much interest will you earn after 5 years?", "interest"),
        ("A plot is 6 m by 3 m. What is its perimeter?", "perimeter"),
        ("What will be the Future Value (FV) of this investment?", "Future Value (FV)"),
        ("Calculate the Gross Margin for a firm with sales of $5.", "Gross Margin"),
        ("What is the Earnings Per Share (EPS)?", "Earnings Per Share (EPS)"),
    ],
)
def test_the_asked_phrase_runs_from_its_opener_to_a_function_word_or_punctuation(
    question: str, phrase: str
):
    assert asked_phrase(question) == phrase


def test_the_phrase_reads_past_of_after_generic_words_and_keeps_a_closing_unit():
    assert asked_phrase("What is the number of hours he practices?") == "number hours"
    assert asked_phrase("What is the total number of hours?") == "total number hours"
    assert asked_phrase("What is the future value of the investment?") == "future value"
    assert asked_phrase("How much time in hours does he practice?") == "time hours"
    assert asked_phrase("How many apples in the basket are red?") == "apples"


def test_a_possessives_owner_is_no_part_of_the_asked_quantity():
    assert asked_phrase("What is the project's NPV?") == "NPV"
    assert asked_phrase("What is the investors' return?") == "return"


def test_the_last_asked_phrase_is_the_question_and_none_without_an_opener():
    story = "Tom knows how many apples fit in a box. How many boxes does he need?"
    assert asked_phrase(story) == "boxes"
    assert asked_phrase("Current ratio please: assets 500, liabilities 200.") is None
    assert asked_phrase("What is 5 plus 3?") is None


def test_a_request_of_many_openers_or_long_runs_is_read_in_linear_time():
    started = time.perf_counter()
    asked_phrase("Calculate " * 20_000 + "?")
    asked_phrase("what is" + " " * 50_000 + "x")
    asked_phrase(("how many " + "1" * 50) * 2_000)
    assert time.perf_counter() - started < 2.0  # every opener read to its phrase took seconds
