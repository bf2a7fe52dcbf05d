"""Reading a request in an exemplar's words (minicache.hit.word_slots): where a request differs from
an exemplar's request only in names, items or units that routing's word slots substitute, extraction
reads it as the exemplar's request would have written it; the numbers stay the request's, and what
the alignment did not see, or a rewriting that would change a number, is left as written."""

from __future__ import annotations

from fakes import FakeSmall
from minicache.config.engine import VerifyConfig
from minicache.hit.align import align
from minicache.hit.exemplars import learn_exemplar
from minicache.hit.extraction import Extractor
from minicache.hit.profile import learn_exemplars, learn_profile
from minicache.hit.verify import HitVerifier
from minicache.hit.word_slots import in_exemplar_words
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


def entry_of(template: list[Variable], validated: list[tuple[str, dict[str, int]]]) -> Entry:
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
        program="",
        validation={"extraction": "choice", "profile": profile},
    )


TOM = (more("Tom", "Maria", "apples", 12, 5), {"first": 12, "second": 5})
KEN = (more("Ken", "Aiko", "pears", 6, 2), {"first": 6, "second": 2})


def test_a_request_naming_other_people_and_items_is_read_in_the_exemplars_words():
    entry = entry_of(TWO, [TOM, KEN])
    read = in_exemplar_words(entry, more("Lena", "Omar", "books", 9, 7))
    assert read == more("Tom", "Maria", "apples", 9, 7)


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


def test_a_substituted_unit_gives_the_number_the_exemplars_kind():
    template = [Variable("given"), Variable("days")]
    exemplar = learn_exemplar(
        template,
        WORK.format(n="Tom", u="hours", a=9, b=2),
        {"given": 9, "days": 2},
        word_slots=True,
    )
    assert exemplar is not None
    entry = Entry(
        "ent_w", "default", "g", template, "", validation={"profile": {"exemplars": [exemplar]}}
    )
    request = WORK.format(n="Lena", u="minutes", a=15, b=5)
    as_written = align(exemplar, request)
    assert not as_written.complete and "no unit:hour number for given" in as_written.reason
    read = align(exemplar, in_exemplar_words(entry, request))
    assert read.complete and read.values == {"given": 15, "days": 5}


def test_a_changed_operation_word_is_not_read_in_the_exemplars_words():
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
    """ "Lena" also occurs inside a quotation, which the skeleton masks: the alignment never saw it."""
    text = more("Lena", "Omar", "books", 9, 7) + ' Their club is "Lena and friends".'
    tom = TOM[0] + ' Their club is "Tom and friends".'
    entry = entry_of(TWO, [(tom, TOM[1])])
    assert in_exemplar_words(entry, text) == text


def test_a_rewriting_that_would_change_a_number_is_not_made():
    """ "quarterly" and "monthly" recur and face each other like an item, but each is a number (4 and
    12 a year): read in the exemplar's word, the request would have another value."""
    plan = "A loan of {a} dollars is repaid {f} over {b} years, and each {f} payment is equal."
    template = [Variable("first"), Variable("second")]
    exemplar = learn_exemplar(
        template,
        plan.format(a=9000, f="quarterly", b=3),
        {"first": 9000, "second": 3},
        word_slots=True,
    )
    assert exemplar is not None and "skeleton" in exemplar
    entry = Entry(
        "ent_p", "default", "g", template, "", validation={"profile": {"exemplars": [exemplar]}}
    )
    monthly = plan.format(a=5000, f="monthly", b=2)
    assert in_exemplar_words(entry, monthly) == monthly


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
    assert all("skeleton" not in ex for ex in learn_exemplars(TWO, [TOM, KEN]))
