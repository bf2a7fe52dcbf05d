"""Reading a request in an exemplar's words (minicache.hit.word_slots): where a request differs from
an exemplar's request only in names, or in items or units after its numbers, that routing's word
slots substitute, extraction reads it as the exemplar's request would have written it; the numbers
stay the request's. Refused, for the miss path to answer: a request that aligns with an exemplar's
only through another substituted word (a verb, an operation word), through an item or unit where the
entry's program writes a constant of its own (a conversion), through words the alignment did not
see, through a rewriting that would change a number's value or kind, or through a word in a place
where none of the entry's examples had another word. Entries that read a request in other words are
learned from examples that vary those words."""

from __future__ import annotations

import pytest

from fakes import FakeSmall
from minicache.config.engine import VerifyConfig
from minicache.errors import HitRefused
from minicache.hit.align import align
from minicache.hit.checks import Check
from minicache.hit.exemplars import learn_exemplar
from minicache.hit.extraction import Extractor
from minicache.hit.profile import learn_exemplars, learn_profile
from minicache.hit.verify import HitVerifier
from minicache.hit.word_slots import constant_free, in_exemplar_words
from minicache.route.router import skeleton
from minicache.route.slots import words
from minicache.store import Entry, Variable

MORE = (
    "{n} collected {a} {i} on Monday and {m} collected {b} {i} on Monday as well. "
    "How many more {i} did {n} collect than {m}?"
)
WORK = (
    "Each day the machine gives {n} {a} {u} of work for {b} days. "
    "How many {u} of work does {n} get in all?"
)
TWO = [Variable("first"), Variable("second")]


def more(n: str, m: str, i: str, a: int, b: int) -> str:
    return MORE.format(n=n, m=m, i=i, a=a, b=b)


SUBTRACT = "def solve(first=12, second=5):\n    return first - second\n"


def entry_of(
    template: list[Variable], validated: list[tuple[str, dict[str, int]]], program: str = SUBTRACT
) -> Entry:
    """An entry whose profile (exemplars first, each with its skeleton) is learned from
    ``validated``, with no rules."""
    profile = learn_profile(
        template, validated, [v["first"] - v["second"] for _, v in validated], word_slots=True
    )
    return Entry(
        id="ent_more",
        tenant="default",
        group_id="g",
        template=template,
        program=program,
        validation={"extraction": "choice", "profile": profile},
    )


def refused(entry: Entry, text: str) -> str:
    """Why ``text`` may not be read in ``entry``'s exemplars' words (it must not be)."""
    with pytest.raises(HitRefused) as refusal:
        in_exemplar_words(entry, text)
    assert refusal.value.check == Check.ALIGN
    return refusal.value.reason


TOM = (more("Tom", "Maria", "apples", 12, 5), {"first": 12, "second": 5})
KEN = (more("Ken", "Aiko", "pears", 6, 2), {"first": 6, "second": 2})


def test_a_request_naming_other_people_and_items_is_read_in_the_exemplars_words():
    entry = entry_of(TWO, [TOM, KEN])
    read = in_exemplar_words(entry, more("Lena", "Omar", "books", 9, 7))
    assert read == more("Tom", "Maria", "apples", 9, 7)


def test_a_word_the_examples_never_varied_is_not_read_as_theirs_where_the_names_that_varied_are():
    """Ken's example names other people than Tom's, with the same item: a request naming a third pair
    of people is read in Tom's words, but one naming another item is refused, since no example showed
    the template read alike with another word than "apples" in that place."""
    ken_apples = (more("Ken", "Aiko", "apples", 6, 2), KEN[1])
    entry = entry_of(TWO, [TOM, ken_apples])
    read = in_exemplar_words(entry, more("Lena", "Omar", "apples", 9, 7))
    assert read == more("Tom", "Maria", "apples", 9, 7)
    why = refused(entry, more("Lena", "Omar", "books", 9, 7))
    assert "never had another word than 'apples'" in why


def test_an_item_in_its_singular_or_plural_is_no_other_word_in_that_place():
    """Ken's example writes "apple" where Tom's writes "apples": one item (the word after a number
    alike but for a plural ending, minicache.hit.cues.same_word), so no example showed the template
    read with another item there, and a request naming books is refused."""
    ken_apple = (more("Ken", "Aiko", "apple", 6, 2), KEN[1])
    entry = entry_of(TWO, [TOM, ken_apple])
    exemplar = entry.validation["profile"]["exemplars"][0]
    assert {words(exemplar["skeleton"])[i] for i in exemplar["varies"]} == {"Tom", "Maria"}
    why = refused(entry, more("Lena", "Omar", "books", 9, 7))
    assert "never had another word than 'apples'" in why


SOLD = "On Monday the shop sold {a} cups and {b} plates to a customer called {n}. Total sold?"


def test_where_the_words_varied_is_learned_from_every_example_a_duplicate_reading_too():
    """Maria's example reads as Tom's does (the name lies beyond the words that describe the numbers)
    and is not kept as an exemplar, but that her name stood where his does is kept on his: a request
    naming Lena is read as Tom's. Built from Tom's example alone, the entry has no such record and
    the request is refused."""
    validated = [(SOLD.format(a=4, b=9, n=n), {"first": 4, "second": 9}) for n in ("Tom", "Maria")]
    request = SOLD.format(a=6, b=2, n="Lena")
    both = entry_of(TWO, validated)
    (exemplar,) = both.validation["profile"]["exemplars"]
    assert [words(exemplar["skeleton"])[i] for i in exemplar["varies"]] == ["Tom"]
    assert in_exemplar_words(both, request) == SOLD.format(a=6, b=2, n="Tom")
    assert "never had another word than 'Tom'" in refused(entry_of(TWO, validated[:1]), request)


def test_a_request_with_an_exemplars_own_words_is_read_as_written():
    entry = entry_of(TWO, [TOM, KEN])
    text = more("Ken", "Aiko", "pears", 9, 7)
    assert in_exemplar_words(entry, text) == text


def test_with_word_slots_the_names_tell_the_numbers_apart_and_alignment_serves_the_hit():
    """Without word slots the exemplars' name cues fit neither number, both slots are open, and the
    small model chooses; with them the request is read in Tom's and Maria's words and aligns."""
    entry = entry_of(TWO, [TOM, KEN])
    request = more("Lena", "Omar", "books", 9, 7)
    as_written = HitVerifier(Extractor(FakeSmall()), VerifyConfig()).extract(entry, request)
    assert as_written.method == "choice"
    read = HitVerifier(Extractor(FakeSmall()), VerifyConfig(), word_slots=True).extract(
        entry, request
    )
    assert read.method == "align"
    assert read.variables == {"first": 9, "second": 7}


def test_a_request_is_read_with_the_exemplars_spelling_of_a_name():
    """ "McDonald" is written back as the exemplar wrote it, not as "Mcdonald". Ken's example shows
    the names and the item varied."""
    entry = entry_of(TWO, [(more("McDonald", "Maria", "apples", 12, 5), TOM[1]), KEN])
    read = in_exemplar_words(entry, more("Lena", "Omar", "books", 9, 7))
    assert read == more("McDonald", "Maria", "apples", 9, 7)


def exemplar_entry(
    template: list[Variable],
    text: str,
    values: dict[str, int],
    program: str,
    *seen: tuple[str, dict[str, int]],
) -> Entry:
    """An entry with ``program`` whose first exemplar is learned from ``text`` (its skeleton kept);
    ``seen``: the entry's other examples, which show where the template's words varied."""
    exemplars = learn_exemplars(template, [(text, values), *seen], word_slots=True)
    assert exemplars and exemplars[0].get("skeleton") == skeleton(text)
    return Entry(
        "ent_w",
        "default",
        "g",
        template,
        program,
        validation={"profile": {"exemplars": exemplars}},
    )


def test_a_unit_the_kinds_know_is_not_read_as_the_exemplars_since_the_number_would_change_kind():
    """ "15 minutes" read as "15 hours" would be a unit:hour number: the exemplar would find its kind
    and every check would compare the request's minutes as hours. As written, alignment finds no
    number of the exemplar's kind."""
    template = [Variable("given"), Variable("days")]
    entry = exemplar_entry(
        template,
        WORK.format(n="Tom", u="hours", a=9, b=2),
        {"given": 9, "days": 2},
        "def solve(given=9, days=2):\n    return given * days\n",
    )
    request = WORK.format(n="Lena", u="minutes", a=15, b=5)
    assert "another value or kind" in refused(entry, request)
    as_written = align(entry.validation["profile"]["exemplars"][0], request)
    assert not as_written.complete and "no unit:hour number for given" in as_written.reason


PRACTICE = (
    "Tom practices {a} {u} on Monday and {b} {u} on Tuesday. "
    "How many hours does Tom practice on the two days?"
)
MINUTES_TO_HOURS = "def solve(monday=30, tuesday=45):\n    return (monday + tuesday) / 60\n"


def test_an_hours_entry_does_not_read_seconds_as_its_minutes():
    """The entry divides by 60, which holds for minutes only: "30 seconds" read as "30 minutes"
    would be served a sixtieth of an hour too many."""
    template = [Variable("monday"), Variable("tuesday")]
    entry = exemplar_entry(
        template,
        PRACTICE.format(a=30, b=45, u="minutes"),
        {"monday": 30, "tuesday": 45},
        MINUTES_TO_HOURS,
    )
    seconds = PRACTICE.format(a=40, b=20, u="seconds")
    assert "'seconds' for 'minutes'" in refused(entry, seconds)


CUT = (
    "Tom cuts {a} {u} of ribbon on Monday and {b} {u} of ribbon on Tuesday. "
    "How many feet of ribbon does Tom cut?"
)


def test_an_item_or_unit_is_read_through_the_exemplars_only_where_the_program_writes_no_constant():
    """ "inches" and "centimetres" are plain numbers alike, so the kinds do not tell them apart; the
    program's 12 (inches to the foot) does: a request in centimetres needs another one. Without a
    constant of its own the program computes the same from either, and, its examples having named
    the unit otherwise too (metres), the request is read in the exemplar's unit."""
    template = [Variable("monday"), Variable("tuesday")]
    origin = (CUT.format(a=30, b=42, u="inches"), {"monday": 30, "tuesday": 42})
    metres = (CUT.format(a=3, b=4, u="metres"), {"monday": 3, "tuesday": 4})
    centimetres = CUT.format(a=50, b=70, u="centimetres")
    converting = exemplar_entry(
        template, *origin, "def solve(monday=30, tuesday=42):\n    return (monday + tuesday) / 12\n"
    )
    assert "constant" in refused(converting, centimetres)
    adding = exemplar_entry(
        template,
        *origin,
        "def solve(monday=30, tuesday=42):\n    return monday + tuesday\n",
        metres,
    )
    assert in_exemplar_words(adding, centimetres) == CUT.format(a=50, b=70, u="inches")


# A unit or scale word after each number, with a program that writes no constant: read in the
# exemplar's word, "40 points" would be a percentage (the value checks would compare it as one, the
# program take it as one) and "40 billion" 40 million. ``scale``: what the exemplar's words make of
# its written 30 and 45.
NUMBER_CHANGES = [
    ("Tom scored {a} {w} in the first test and {b} {w} in the second test. Total?", "percent",
     "points", 1),
    ("The firm sold {a} {w} cups in spring and {b} {w} cups in autumn. How many in all?", "million",
     "billion", 1_000_000),
]  # fmt: skip


@pytest.mark.parametrize(("ask", "theirs", "mine", "scale"), NUMBER_CHANGES)
def test_a_rewriting_that_would_change_a_numbers_kind_or_value_is_refused(ask, theirs, mine, scale):
    first, second = 30 * scale, 45 * scale
    entry = exemplar_entry(
        TWO,
        ask.format(a=30, b=45, w=theirs),
        {"first": first, "second": second},
        f"def solve(first={first}, second={second}):\n    return first + second\n",
    )
    assert "another value or kind" in refused(entry, ask.format(a=40, b=20, w=mine))


# A verb and an operation word that each recur, in lower case, and follow no number: each pair faces
# consistently and routing joins the two requests, but the word says what is computed. Read as
# written the entry's rules or alignment would read the numbers and compute the exemplar's operation.
RECURRING_WORDS = [
    (
        "On Monday Tom {w} {a} coins at the fair, and on Friday Tom {w} {b} coins at the market. "
        "How many coins did Tom get or give in all?",
        "spends",
        "earns",
    ),
    (
        "Tom has {a} apples. He will {w} them, then {w} them again, and eat {b} of them. "
        "How many apples are left?",
        "halve",
        "triple",
    ),
]


@pytest.mark.parametrize(("ask", "theirs", "mine"), RECURRING_WORDS)
def test_a_recurring_verb_or_operation_word_is_not_read_as_the_exemplars(ask, theirs, mine):
    template = [Variable("first"), Variable("second")]
    entry = exemplar_entry(
        template,
        ask.format(w=theirs, a=30, b=4),
        {"first": 30, "second": 4},
        "def solve(first=30, second=4):\n    return first - second\n",
    )
    request = ask.format(w=mine, a=24, b=5)
    assert f"{mine!r} names neither a person nor an item" in refused(entry, request)


def test_a_program_writes_a_constant_of_its_own_where_a_number_beyond_0_and_1_is_in_its_body():
    assert constant_free("def solve(a=30, b=45):\n    return a - b * 1 + 0\n")
    assert constant_free("def solve(a=60):\n    return -a\n")  # a default is the request's value
    assert not constant_free(MINUTES_TO_HOURS)
    assert not constant_free("def solve(a=2):\n    return a * 0.5\n")
    assert not constant_free("def solve(:")  # unparsable: counts as writing one


def test_a_changed_operation_word_that_does_not_recur_aligns_with_no_exemplar_and_is_read_as_written():
    entry = entry_of(TWO, [TOM, KEN])
    fewer = more("Lena", "Omar", "books", 9, 7).replace("more", "fewer")
    assert in_exemplar_words(entry, fewer) == fewer


def test_an_entry_with_a_text_variable_reads_the_request_as_written():
    template = [Variable("first"), Variable("who", "string")]
    entry = entry_of(TWO, [TOM, KEN])
    entry.template = template
    text = more("Lena", "Omar", "books", 9, 7)
    assert in_exemplar_words(entry, text) == text


def test_a_substituted_word_the_skeleton_masks_elsewhere_is_not_rewritten():
    """ "Lena" also occurs inside a quotation, which the skeleton masks: the alignment never saw it,
    and the request is not read as though it had."""
    text = more("Lena", "Omar", "books", 9, 7) + ' Their club is "Lena and friends".'
    tom = TOM[0] + ' Their club is "Tom and friends".'
    entry = entry_of(TWO, [(tom, TOM[1])])
    assert "masked" in refused(entry, text)


def test_a_recurring_frequency_word_is_not_read_as_the_exemplars():
    """ "quarterly" and "monthly" recur and face each other consistently, but each is a number (4 and
    12 a year) that the entry's program may hold as its own: the request is not read in the
    exemplar's word (it would have another value), nor served as written."""
    plan = "A loan of {a} dollars is repaid {f} over {b} years, and each {f} payment is equal."
    template = [Variable("first"), Variable("second")]
    entry = exemplar_entry(
        template,
        plan.format(a=9000, f="quarterly", b=3),
        {"first": 9000, "second": 3},
        "def solve(first=9000, second=3):\n    return first / second\n",
    )
    monthly = plan.format(a=5000, f="monthly", b=2)
    assert "'monthly' names neither" in refused(entry, monthly)


def test_exemplars_that_differ_only_in_their_requests_words_are_kept_once():
    """Two examples whose names lie beyond the words that describe their numbers teach one reading:
    the second, which differs only in its skeleton, is not kept beside the first."""
    ask = "On Monday the shop sold {a} cups and {b} plates to a customer called {n}. Total sold?"
    validated = [(ask.format(a=4, b=9, n=n), {"first": 4, "second": 9}) for n in ("Tom", "Maria")]
    kept = learn_exemplars(TWO, validated, word_slots=True)
    assert len(kept) == 1 and "Tom" in kept[0]["skeleton"]


def test_without_word_slots_an_exemplar_keeps_no_skeleton():
    """Off, an exemplar holds what alignment reads and no more: no copy of its request's words."""
    off, on = learn_exemplar(TWO, *TOM), learn_exemplar(TWO, *TOM, word_slots=True)
    assert off is not None and on is not None
    assert "skeleton" not in off and "skeleton" in on
    assert all(
        "skeleton" not in ex and "varies" not in ex for ex in learn_exemplars(TWO, [TOM, KEN])
    )
