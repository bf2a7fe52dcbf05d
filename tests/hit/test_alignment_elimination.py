"""Alignment beyond each slot's own cue words (minicache.hit.align): words for how often a year are one
kind, and the one number of a kind left over goes to the one slot of that kind left open, but only
where every exemplar of the entry reads the request the same way (HitVerifier.aligned)."""

from __future__ import annotations

from test_hit_verification import MarginSmall

from minicache.hit.align import align
from minicache.hit.exemplars import learn_exemplar
from minicache.hit.extraction import Extractor
from minicache.hit.profile import learn_profile
from minicache.hit.verify import HitVerifier
from minicache.store import Entry, Variable

EAR = [
    Variable("r_pct", "number", "nominal rate, percent"),
    Variable("n", "integer", "compounding periods a year"),
]
FCF = [
    Variable("operating_cash_flow", "number", "operating cash flow"),
    Variable("capital_expenditures", "number", "capital expenditures"),
]
FCF_PROGRAM = (
    "def solve(operating_cash_flow=23000, capital_expenditures=7000):\n"
    "    return operating_cash_flow - capital_expenditures\n"
)
FCF_EXAMPLES = [
    (
        "A shop reported operating cash flow of $23,000 and capital expenditures of $7,000.",
        {"operating_cash_flow": 23000, "capital_expenditures": 7000},
    ),
    (
        "A firm had operating cash flow of $90,000 and capital expenditures of $55,000.",
        {"operating_cash_flow": 90000, "capital_expenditures": 55000},
    ),
]
# The cue words read the cash flow; nothing says which number is the spending but that it is the other one.
BAKERY = "A bakery reported operating cash flows of $28,000 with $8,000 spent on oven upgrades."


def fcf_entry(examples) -> Entry:
    """The free-cash-flow entry, without the wording record: BAKERY ("$8,000 spent on oven
    upgrades") writes no "capital expenditures", which tests/hit/test_wording.py's check refuses;
    this module pins how alignment reads such a request."""
    profile = learn_profile(FCF, examples, [16000, 35000])
    profile.pop("wording", None)
    return Entry(
        id="ent_fcf",
        tenant="default",
        group_id="g",
        template=FCF,
        program=FCF_PROGRAM,
        validation={
            "extraction": "choice",
            "profile": profile,
        },
    )


def test_words_for_how_often_a_year_are_one_kind_so_an_example_written_quarterly_reads_monthly():
    exemplar = learn_exemplar(
        EAR, "An account pays a nominal 8% compounded quarterly.", {"r_pct": 8, "n": 4}
    )
    assert exemplar["slots"]["n"]["kind"] == "word:per-year"
    found = align(exemplar, "A loan charges a nominal 6%, compounded monthly.")
    assert found.complete and found.values == {"r_pct": 6, "n": 12}
    # An exemplar stored before the kind existed names the word itself, and reads the same.
    stored = {
        **exemplar,
        "slots": {**exemplar["slots"], "n": {**exemplar["slots"]["n"], "kind": "word:quarterly"}},
    }
    assert align(stored, "A loan charges a nominal 6%, compounded daily.").values == {
        "r_pct": 6,
        "n": 365,
    }
    # Still one number per slot: two such words is no alignment.
    assert not align(exemplar, "A nominal 6%, compounded monthly or quarterly.").complete


def test_the_one_number_left_of_a_kind_is_the_open_slots_when_every_exemplar_reads_it_so():
    found = align(learn_exemplar(FCF, *FCF_EXAMPLES[0]), BAKERY)
    assert not found.complete and found.values == {
        "operating_cash_flow": 28000
    }  # on cue words alone
    assert found.by_elimination == {"operating_cash_flow": 28000, "capital_expenditures": 8000}
    small = MarginSmall(
        {"operating_cash_flow": 8000, "capital_expenditures": 28000}
    )  # would swap them
    entry = fcf_entry(FCF_EXAMPLES)
    assert len(entry.validation["profile"]["exemplars"]) == 2
    got = HitVerifier(Extractor(small)).extract(entry, BAKERY)
    assert got.method == "align" and small.calls == 0
    assert got.variables == {"operating_cash_flow": 28000, "capital_expenditures": 8000}


def test_one_exemplars_reading_by_elimination_is_not_enough_and_the_model_chooses():
    small = MarginSmall(
        {"operating_cash_flow": 28000, "capital_expenditures": 8000},
        margins={"operating_cash_flow": 5.0, "capital_expenditures": 5.0},
    )
    got = HitVerifier(Extractor(small)).extract(fcf_entry(FCF_EXAMPLES[:1]), BAKERY)
    assert got.method == "choice" and small.calls == 1


def test_nothing_is_eliminated_with_two_numbers_left_a_number_left_over_or_another_symbol_beside_it():
    exemplar = learn_exemplar(FCF, *FCF_EXAMPLES[0])
    two_left = align(exemplar, "A bakery had $28,000 and $8,000 this year.")
    assert (
        two_left.by_elimination is None
    )  # two open slots of one kind: nothing says which is which
    extra = align(exemplar, BAKERY + " Rent was $2,000.")
    assert extra.by_elimination is None  # two numbers left for the one open slot
    ppp = [
        Variable("S_0", "number", "initial rate"),
        Variable("S_1", "number", "final rate"),
        Variable("P_0", "number", "initial price level"),
    ]
    symbols = learn_exemplar(
        ppp,
        "The rate moved from S_0 = 0.025 to S_1 = 0.024; the price level was P_0 = 310.",
        {"S_0": 0.025, "S_1": 0.024, "P_0": 300 + 10},
    )
    asked = align(
        symbols,
        "The rate was S_0 = 0.13 and the price level P_0 = 290, then rose to P_1 = 310; find S_1.",
    )
    assert asked.values == {"S_0": 0.13, "P_0": 290}
    assert asked.by_elimination is None  # 310 is written as P_1, not S_1: the request asks for S_1


WC = [
    Variable("current_assets", "number", "current assets"),
    Variable("current_liabilities", "number", "current liabilities"),
]


def test_a_slot_that_took_a_shared_number_on_shared_cue_words_only_is_left_open_for_elimination():
    # "current" is a cue of both slots; only current_assets has a word of its own ("assets") by $65,000.
    exemplar = learn_exemplar(
        WC,
        "A shop reports current assets of $300,000 and current liabilities of $230,000.",
        {"current_assets": 300000, "current_liabilities": 230000},
    )
    found = align(
        exemplar, "A florist has current assets worth $65,000 and owes $45,000 to its creditors."
    )
    assert not found.complete and found.values == {"current_assets": 65000}
    assert found.by_elimination == {"current_assets": 65000, "current_liabilities": 45000}


def test_two_slots_with_words_of_their_own_by_one_number_both_stay_unread():
    qr = [
        Variable("current_assets", "number", "current assets"),
        Variable("inventories", "number", "inventories"),
        Variable("current_liabilities", "number", "current liabilities"),
    ]
    exemplar = learn_exemplar(
        qr,
        "A store has current assets of $900,000, inventories of $600,000 and current "
        "liabilities of $300,000.",
        {"current_assets": 900000, "inventories": 600000, "current_liabilities": 300000},
    )
    # The first $300,000 has "assets" before it and "inventories" after it: each slot has a word of its own there.
    found = align(
        exemplar,
        "A firm has $600,000 in current assets which includes $300,000 in inventories, against "
        "current liabilities of $300,000.",
    )
    assert "current_assets" not in found.values and "inventories" not in found.values
    assert found.by_elimination is None


def test_a_number_written_with_a_hyphen_before_its_unit_is_of_that_unit():
    pv = [Variable("FV", "number", "future value"), Variable("n", "integer", "years")]
    exemplar = learn_exemplar(pv, "A payment of $10,000 is due in 6 years.", {"FV": 10000, "n": 6})
    assert exemplar["slots"]["n"]["kind"] == "unit:year"
    found = align(exemplar, "A 5-year license will cost $75,000 at the end of the period.")
    assert found.complete and found.values == {"FV": 75000, "n": 5}
