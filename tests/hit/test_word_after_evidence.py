"""What a word-after refusal, or a joined example, shows about the words an entry accepts after a
number (minicache.hit.words_after.learn): a word is learned for a variable only where the entry's
program gave the right answer and its answer depends on the unit the variable's number is written
in, and only from a number the request writes with one word."""

from __future__ import annotations

from typing import Any

from test_words_after import BUYS, TWO, profile_of, refusal

from minicache.hit.checks import Check
from minicache.hit.refusals import revise
from minicache.hit.words_after import with_pairs
from minicache.store import Entry

SHARE = "Tom watched {a} {u} of a {b} {u} film. What share of it did he watch?"
GROWTH = "Sales were ${a} {u} last year and ${b} {u} this year. By what percent did they grow?"


def entry_of(profile: dict, program: str) -> Entry:
    return Entry(
        id="ent_1",
        tenant="default",
        group_id="g",
        template=TWO,
        program=program,
        rules={},
        validation={"extraction": "choice", "profile": profile},
    )


def share(values: dict[str, Any]) -> float:
    return values["first"] / values["second"]


def growth(values: dict[str, Any]) -> float:
    return (values["second"] - values["first"]) / values["first"] * 100


def total(values: dict[str, Any]) -> float:
    return values["first"] + values["second"]


def share_profile() -> dict:
    profile = profile_of(SHARE, [(30, 90, "minutes"), (20, 80, "minutes")])
    assert profile["words_after"] == {"first": ["minutes"], "second": ["minutes"]}
    return profile


def test_an_answer_that_no_common_unit_changes_teaches_no_word():
    """A share of two durations is one number in any unit: 1800 seconds of 5400 seconds gives the
    minutes' answer (1/3), which shows nothing about 'seconds'. Learned, '30 minutes of a 5400
    seconds film' would pass the check and be served 30/5400."""
    profile = share_profile()
    text = SHARE.format(a=1800, b=5400, u="seconds")
    refused = refusal(profile, text, 1800, 5400)
    assert refused is not None and refused.check == Check.WORD_AFTER
    program = "def solve(first=30, second=90):\n    return first / second\n"
    assert revise(entry_of(profile, program), refused, 1 / 3, share) is None
    mixed = "Tom watched 30 minutes of a 5400 seconds film. What share of it did he watch?"
    still = refusal(profile, mixed, 30, 5400)
    assert still is not None and still.check == Check.WORD_AFTER


def test_a_scale_no_common_factor_changes_teaches_no_scale():
    """A percent change is one number in millions or billions: a request all in billions gives the
    miss answer and teaches no 'billion' for a program in millions."""
    profile = profile_of(GROWTH, [(5.2, 6.1, "million"), (4.0, 4.4, "million")])
    assert profile["scales"] == {"first": ["million"], "second": ["million"]}
    refused = refusal(profile, GROWTH.format(a=2.0, b=2.5, u="billion"), 2.0, 2.5)
    assert refused is not None and refused.check == Check.WORD_AFTER
    program = "def solve(first=5.2, second=6.1):\n    return (second - first) / first * 100\n"
    assert revise(entry_of(profile, program), refused, 25.0, growth) is None


def test_one_refused_variable_whose_unit_the_answer_shows_is_taught_its_word():
    """'40 mins of a 120 minutes film': the other number is in the examples' unit, and the answer
    changes with the first number's scale, so the miss answer (1/3) shows 'mins' right there."""
    profile = share_profile()
    text = "Tom watched 40 mins of a 120 minutes film. What share of it did he watch?"
    refused = refusal(profile, text, 40, 120)
    assert refused is not None and refused.check == Check.WORD_AFTER
    program = "def solve(first=30, second=90):\n    return first / second\n"
    revision = revise(entry_of(profile, program), refused, 1 / 3, share)
    assert revision is not None
    assert revision.note["accepted"] == {"words_after": {"first": ["mins"]}}
    learned = revision.validation["profile"]["words_after"]
    assert learned == {"first": ["mins", "minutes"], "second": ["minutes"]}


def test_a_number_written_with_two_words_teaches_neither():
    """'5 pears ... 5 miles': either word may be the one the 5 counts; the reading is refused, and
    the miss answer confirming it teaches no word."""
    profile = profile_of(BUYS, [(5, 3, "apples"), (4, 2, "apples")])
    text = "Tom has 5 pears and buys 2 more, and walks 5 miles. How many pears does Tom have?"
    refused = refusal(profile, text, 5, 2)
    assert refused is not None and refused.check == Check.WORD_AFTER
    assert "'miles', 'pears'" in refused.reason
    program = "def solve(first=5, second=3):\n    return first + second\n"
    assert revise(entry_of(profile, program), refused, 7, total) is None


def test_a_join_adds_only_the_words_its_examples_answers_show():
    """A joined example reproduced by the entry's program shows its word where the answer depends on
    that number's unit ('pears' for a sum), not where a number is written with two words or no
    common unit changes the answer (a share in seconds)."""
    fruit = profile_of(BUYS, [(5, 3, "apples"), (4, 2, "apples")])
    pears = with_pairs(
        fruit, [(BUYS.format(a=6, b=2, i="pears"), {"first": 6, "second": 2})], total
    )
    assert pears["words_after"]["first"] == ["apples", "pears"]
    text = "Tom has 5 pears and buys 2 more, and walks 5 miles. How many pears does Tom have?"
    two = with_pairs(fruit, [(text, {"first": 5, "second": 2})], total)
    assert two["words_after"]["first"] == ["apples"]
    seconds = (SHARE.format(a=1800, b=5400, u="seconds"), {"first": 1800, "second": 5400})
    joined = with_pairs(share_profile(), [seconds], share)
    assert joined["words_after"] == {"first": ["minutes"], "second": ["minutes"]}
