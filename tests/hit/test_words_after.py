"""The word after a number (minicache.hit.cues.word_after): a build records, for each variable, the
word every validated example wrote right after its number (minicache.hit.words_after), and a reading
whose number the request follows with another word is refused as ``Check.WORD_AFTER``, whoever read
it; a refusal the miss answer shows unfounded teaches the entry the word."""

from __future__ import annotations

import pytest
from test_hit_verification import EnumSmall

from fakes import FakeSmall
from minicache.build.merge import merged_profile
from minicache.config.engine import VerifyConfig
from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.hit.cues import positions, same_word, word_after
from minicache.hit.extraction import Extractor
from minicache.hit.profile import check_values, learn_profile
from minicache.hit.refusals import revise
from minicache.hit.verify import HitVerifier
from minicache.hit.words_after import accept, check_written
from minicache.store import Entry, Variable

TWO = [Variable("first", "number", "the first amount"), Variable("second", "number", "the second")]
PRACTICE = "Tom practices {a} {u} on Monday and {b} {u} on Tuesday. How many hours in all?"
BUYS = "Tom has {a} {i} and buys {b} more. How many {i} does Tom have?"
RANGE = VerifyConfig().value_range  # the range check's default factor, as a hit is checked


def profile_of(template: str, asked: list[tuple[float, float, str]]) -> dict:
    pairs = [(template.format(a=a, b=b, u=w, i=w), {"first": a, "second": b}) for a, b, w in asked]
    return learn_profile(TWO, pairs, [a + b for a, b, _ in asked])


def refusal(profile: dict, text: str, first: float, second: float) -> HitRefused | None:
    try:
        check_values(profile, TWO, {"first": first, "second": second}, text, RANGE)
    except HitRefused as refused:
        return refused
    return None


def words_after(text: str) -> list[str | None]:
    return [word_after(text, p) for p in positions(text)]


def test_the_word_after_a_number_is_its_unit_as_written_and_no_function_word():
    assert words_after("30 minutes, a 5-year bond, $2.4 million loan, 1TB") == [
        "minutes",
        "year",
        "loan",
        "tb",
    ]
    assert words_after("$2 and $3 of them; 5% off, 7. Then 8") == [None, None, None, None, None]


def test_an_ordinals_suffix_is_no_word_after_it():
    assert words_after("the 5th grade, the 3rd floor, the 1st and 2nd rows") == [None] * 4
    assert words_after("5 th") == ["th"]  # a word of its own, not a suffix


def test_the_word_after_a_number_is_not_the_next_cell_of_a_table_row():
    assert words_after("Monday\t30\tTuesday\t45\n") == [None, None]
    assert words_after("Monday  30 minutes") == ["minutes"]


@pytest.mark.parametrize(
    ("plural", "singular"),
    [("minutes", "minute"), ("boxes", "box"), ("berries", "berry"), ("inches", "inch")]
    + [("classes", "class"), ("Dishes", "dish"), ("tomatoes", "tomato"), ("shoes", "shoe")],
)
def test_a_regular_plural_is_the_same_word_as_its_singular(plural, singular):
    assert same_word(plural, singular) and same_word(singular, plural)


@pytest.mark.parametrize(
    ("a", "b"), [("minutes", "seconds"), ("box", "bag"), ("geese", "goose"), ("berry", "bear")]
)
def test_other_words_and_irregular_plurals_are_other_words(a, b):
    assert not same_word(a, b)


@pytest.mark.parametrize(("a", "b"), [("bass", "bases"), ("ms", "m"), ("tbs", "tb"), ("gas", "ga")])
def test_a_short_word_or_one_ending_in_ss_is_no_plural(a, b):
    """A singular is three letters at least ('ms' is no plural of 'm'), and 'ss' ends no plural:
    'bass' and 'bases' are other words, though 'bas' is what the 'es' rule strips 'bases' to."""
    assert not same_word(a, b) and not same_word(b, a)


def test_examples_that_agree_on_the_word_after_a_slot_refuse_another_word():
    profile = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes"), (15, 25, "minutes")])
    assert profile["words_after"] == {"first": ["minutes"], "second": ["minutes"]}
    refused = refusal(profile, PRACTICE.format(a=1800, b=2700, u="seconds"), 1800, 2700)
    assert refused is not None and refused.check == Check.WORD_AFTER
    assert refused.variable == "first"
    assert refused.reason == (
        "first is followed by 'seconds', the entry's examples say 'minutes'; "
        "second is followed by 'seconds', the entry's examples say 'minutes'"
    )


@pytest.mark.parametrize("unit", ["minutes", "Minutes", "minute", "MINUTES"])
def test_the_examples_own_word_in_any_case_or_number_is_no_refusal(unit):
    profile = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])
    assert refusal(profile, PRACTICE.format(a=1, b=40, u=unit), 1, 40) is None


def test_a_request_with_no_word_after_the_number_is_no_word_after_refusal():
    """No word after 40 for the word check to refuse; the unit every example wrote them in refuses
    it (minicache.hit.profile.check_units, tests/hit/test_unit_kinds.py)."""
    profile = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])
    text = "Tom practices 40, then 50, on Monday and Tuesday (in seconds). How many hours in all?"
    check_written(profile, {"first": 40, "second": 50}, text)
    refused = refusal(profile, text, 40, 50)
    assert refused is not None and refused.check == Check.UNIT


def test_examples_that_differ_in_the_word_after_a_slot_refuse_no_word():
    profile = profile_of(BUYS, [(5, 3, "apples"), (4, 2, "pears"), (7, 1, "apples")])
    assert "first" not in profile["words_after"]
    assert refusal(profile, BUYS.format(a=6, b=2, i="books"), 6, 2) is None


def test_one_example_records_no_word_after():
    profile = profile_of(PRACTICE, [(30, 45, "minutes")])
    assert profile["words_after"] == {}
    assert refusal(profile, PRACTICE.format(a=1800, b=2700, u="seconds"), 1800, 2700) is None


LOANS = "The bank grants a ${a} {u} loan and a ${b} {u} bond. What do they come to?"
GROWTH = "Exports were ${a} {u} and imports ${b} {u}. What is the balance of trade?"


def test_a_scale_word_belongs_to_its_number_and_the_word_after_it_is_what_it_counts():
    """'$2.4 million loan' and '$2,400,000 loan' write one amount of one thing: an entry reading
    the scaled amount serves either, and a billion read in full carries its scale in its value,
    which the range check holds to the examples' millions."""
    profile = learn_profile(
        TWO,
        [
            (LOANS.format(a=2.4, b=1.5, u="million"), {"first": 2400000, "second": 1500000}),
            (LOANS.format(a=3.1, b=0.8, u="million"), {"first": 3100000, "second": 800000}),
        ],
        [3900000, 3900000],
    )
    assert profile["words_after"] == {"first": ["loan"], "second": ["bond"]}
    assert profile["scales"] == {}  # read in full, the values carry their scale
    plain = "The bank grants a $2,400,000 loan and a $1,500,000 bond. What do they come to?"
    assert refusal(profile, plain, 2400000, 1500000) is None
    billion = refusal(profile, LOANS.format(a=1.1, b=0.9, u="billion"), 1.1e9, 0.9e9)
    assert billion is not None and billion.check == Check.RANGE


def test_a_number_taken_as_written_before_its_scale_counts_in_the_examples_scale():
    """A program in millions, built on '$5.2 million': 6.1 of '$6.1 billion' is refused (no range
    check tells 6.1 billion from 6.1 million), 6.1 of '$6.1 million' is not, and a scale the
    request does not write refuses nothing."""
    profile = profile_of(GROWTH, [(5.2, 3.1, "million"), (4.0, 2.5, "million")])
    assert profile["scales"] == {"first": ["million"], "second": ["million"]}
    refused = refusal(profile, GROWTH.format(a=6.1, b=3.3, u="billion"), 6.1, 3.3)
    assert refused is not None and refused.check == Check.WORD_AFTER
    assert refused.reason.startswith(
        "first is counted in 'billion', the entry's examples say 'million'"
    )
    assert refusal(profile, GROWTH.format(a=6.1, b=3.3, u="million"), 6.1, 3.3) is None
    unscaled = "Exports were $6.1 and imports $3.3. What is the balance of trade?"
    assert refusal(profile, unscaled, 6.1, 3.3) is None


@pytest.mark.parametrize("older", ["million", ["million"]])
def test_an_entry_that_recorded_the_scale_as_the_word_after_still_refuses_another_scale(older):
    """Built before the scales record, an entry on '$5.2 million' recorded 'million' as the word
    after the number (one word, later a list) and has no scales record: 'million' reads as the
    variable's scale, so '$6.1 billion' is refused, and no word after it, so '$6.1 million loan' is
    not."""
    profile = profile_of(GROWTH, [(5.2, 3.1, "million"), (4.0, 2.5, "million")])
    del profile["scales"]
    profile["words_after"] = {"first": older, "second": older}
    refused = refusal(profile, GROWTH.format(a=6.1, b=3.3, u="billion"), 6.1, 3.3)
    assert refused is not None and refused.check == Check.WORD_AFTER
    assert refused.reason.startswith("first is counted in 'billion'")
    assert refusal(profile, GROWTH.format(a=6.1, b=3.3, u="million loan"), 6.1, 3.3) is None
    assert refusal(profile, GROWTH.format(a=6.1, b=3.3, u="million"), 6.1, 3.3) is None


def test_a_word_learned_by_an_entry_without_a_scales_record_keeps_its_scale():
    """A reviewed refusal rewrites an older entry's records as they read: the scale stays held."""
    profile = profile_of(GROWTH, [(5.2, 3.1, "million"), (4.0, 2.5, "million")])
    del profile["scales"]
    profile["words_after"] = {"first": "million", "second": ["million", "dollars"]}
    assert accept(profile, {"words_after": {"second": ["usd"]}}) == {
        "words_after": {"second": ["usd"]}
    }
    assert profile["scales"] == {"first": ["million"], "second": ["million"]}
    assert profile["words_after"] == {"second": ["dollars", "usd"]}
    refused = refusal(profile, GROWTH.format(a=6.1, b=3.3, u="billion"), 6.1, 3.3)
    assert refused is not None and refused.check == Check.WORD_AFTER


def test_a_hyphen_is_no_other_word():
    bond = "A {a}-year bond pays {b} dollars a year."
    profile = profile_of(bond, [(5, 40, ""), (10, 30, "")])
    assert profile["words_after"]["first"] == ["year"]
    assert refusal(profile, "A 7 year bond pays 20 dollars a year.", 7, 20) is None


def test_a_request_naming_the_examples_item_in_its_plural_is_served():
    """'1 box' and '3 boxes' name one item: neither is refused where the examples wrote the other."""
    profile = profile_of(BUYS, [(5, 3, "boxes"), (4, 2, "boxes")])
    text = "Tom has 1 box and buys 2 more. How many boxes does Tom have?"
    assert refusal(profile, text, 1, 2) is None
    berries = profile_of(BUYS, [(5, 3, "berry"), (4, 2, "berry")])
    assert refusal(berries, BUYS.format(a=6, b=2, i="berries"), 6, 2) is None


def hours_entry(profile: dict, rules: dict | None = None) -> Entry:
    """An entry that adds two amounts in minutes and converts them to hours."""
    return Entry(
        id="ent_1",
        tenant="default",
        group_id="g",
        template=TWO,
        program="def solve(first=30, second=45):\n    return (first + second) / 60\n",
        rules=rules or {},
        validation={"extraction": "choice", "profile": profile},
    )


def test_the_small_models_choice_is_refused_by_the_word_after_it_too():
    """No rule or exemplar reads the request: the model's choice meets the check all readings do."""
    profile = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])
    profile["exemplars"] = []
    entry = hours_entry(profile)
    verifier = HitVerifier(Extractor(FakeSmall()))
    with pytest.raises(HitRefused) as refused:
        verifier.extract(entry, PRACTICE.format(a=1800, b=2700, u="seconds"))
    assert refused.value.check == Check.WORD_AFTER and "'seconds'" in refused.value.reason
    served = verifier.extract(entry, PRACTICE.format(a=40, b=50, u="minutes"))
    assert served.variables == {"first": 40, "second": 50}


def minutes_refusal(unit: str, first: int, second: int) -> tuple[Entry, HitRefused, str]:
    """An hours entry built on minutes, and its refusal of a request in ``unit``."""
    profile = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])
    entry = hours_entry(profile, rules={"first": {"kind": "position", "index": 0, "count": 2}})
    text = PRACTICE.format(a=first, b=second, u=unit)
    refused = refusal(profile, text, first, second)
    assert refused is not None and refused.check == Check.WORD_AFTER
    return entry, refused, text


def hours(values: dict) -> float:
    """The entry's program: minutes to hours."""
    return (values["first"] + values["second"]) / 60


def test_a_refusal_the_miss_answer_shows_unfounded_teaches_the_entry_the_word():
    """'mins' is the examples' unit in other letters: the refused values give the miss answer (2.0),
    so the words after both numbers are learned together, and a request written so passes the
    check."""
    entry, refused, text = minutes_refusal("mins", 40, 80)
    revision = revise(entry, refused, 2.0, hours)
    assert revision is not None
    assert revision.rules == entry.rules
    assert revision.note == {
        "check": Check.WORD_AFTER,
        "accepted": {"words_after": {"first": ["mins"], "second": ["mins"]}},
    }
    learned = revision.validation["profile"]
    assert learned["words_after"] == {"first": ["minutes"], "second": ["minutes"]}
    assert learned["learned_words"] == [{"words_after": {"first": "mins", "second": "mins"}}]
    assert refusal(learned, PRACTICE.format(a=25, b=35, u="mins"), 25, 35) is None
    assert refusal(learned, PRACTICE.format(a=25, b=35, u="minutes"), 25, 35) is None
    still = refusal(learned, PRACTICE.format(a=1800, b=2700, u="seconds"), 1800, 2700)
    assert still is not None and still.check == Check.WORD_AFTER
    assert entry.validation["profile"]["words_after"]["first"] == ["minutes"]  # not in place


def test_a_founded_refusal_by_the_word_after_teaches_the_entry_nothing():
    """1800 seconds read as minutes gives 75.0; the miss answer is 1.25: the record stays."""
    entry, refused, _text = minutes_refusal("seconds", 1800, 2700)
    assert revise(entry, refused, 1.25, hours) is None


def test_a_refusal_by_the_word_after_gets_no_second_choice():
    """A right value whose word the entry has not learned yet ('mins') is not taken out of the
    model's choices: another number, followed by the examples' word, would be served instead. The
    refusal stands, for the miss path to answer and the review to learn from."""
    profile = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])
    profile["exemplars"] = []
    text = "Tom practiced 25 minutes on Sunday. " + PRACTICE.format(a=40, b=50, u="mins")
    small = EnumSmall({"first": 40, "second": 50})
    verifier = HitVerifier(Extractor(small), VerifyConfig(second_choice=True))
    with pytest.raises(HitRefused) as refused:
        verifier.extract(hours_entry(profile), text)
    assert refused.value.check == Check.WORD_AFTER
    assert len(small.schemas) == 1  # asked once


def test_a_merged_group_accepts_the_words_after_either_groups_examples_wrote():
    """Two stories of one addition merge; the survivor's record accepts, for each variable both
    groups record, every word either group's examples (under their own variable names) wrote there,
    shared or not ('pears' beside 'apples'), and still refuses a word neither wrote."""
    ours = profile_of(BUYS, [(5, 3, "apples"), (4, 2, "apples")])
    renamed = {"first": "had", "second": "bought"}
    for item, kept in (
        ("apples", {"first": ["apples"], "second": ["more"]}),
        ("pears", {"first": ["apples", "pears"], "second": ["more"]}),
    ):
        theirs = profile_of(BUYS, [(6, 1, item), (8, 2, item)])
        theirs["words_after"] = {renamed[k]: w for k, w in theirs["words_after"].items()}
        back = {v: k for k, v in renamed.items()}
        merged = merged_profile(ours, theirs, back, [], [])
        assert merged["words_after"] == kept
        assert refusal(merged, BUYS.format(a=6, b=2, i=item), 6, 2) is None
        books = refusal(merged, BUYS.format(a=6, b=2, i="books"), 6, 2)
        assert books is not None and books.check == Check.WORD_AFTER


def test_merged_groups_that_share_an_accepted_word_accept_every_word_either_accepts():
    """A word one group learned from a reviewed refusal ('mins') stays accepted in the merged group."""
    ours = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])
    theirs = profile_of(PRACTICE, [(10, 15, "minutes"), (25, 40, "minutes")])
    theirs["words_after"]["first"].append("mins")
    merged = merged_profile(ours, theirs, {}, [], [])["words_after"]
    assert merged == {"first": ["mins", "minutes"], "second": ["minutes"]}


def test_an_entry_that_recorded_one_word_per_variable_still_refuses_another():
    """An entry stored when the record held one word per variable, not a list, reads as that word."""
    profile = profile_of(PRACTICE, [(30, 45, "minutes"), (20, 50, "minutes")])
    profile["words_after"] = {"first": "minutes"}
    refused = refusal(profile, PRACTICE.format(a=1800, b=2700, u="seconds"), 1800, 2700)
    assert refused is not None and refused.check == Check.WORD_AFTER
    assert refusal(profile, PRACTICE.format(a=40, b=50, u="minute"), 40, 50) is None


def test_a_refusal_that_names_a_record_this_version_does_not_keep_widens_nothing():
    profile: dict = {"words_after": {"first": ["minutes"]}}
    assert accept(profile, {"no-such-record": {"first": ["seconds"]}}) == {}
    assert profile["words_after"] == {"first": ["minutes"]}
