"""Requests worded otherwise than an entry's examples, at every default: what they ask for, what they
ask it of, the numbers beside the reading and the period of a rate decide whether a hit is served.

Each entry is built from three misses, and a fourth request in the examples' wording passes the
tenant's first probation, so that the entry serves. The target answers what each request asks (a
truth table), so a wrong hit is an answer the miss path would not give. Every request below got a
wrong hit before its check (an adversarial review's reproductions); the right hits beside them are
still served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fakes import FakeSmall, numbers_in, request_of
from minicache.config.engine import EngineConfig
from minicache.engine import MiniCache
from minicache.models import FakeBackend
from minicache.route.lexical import LexicalEmbedder
from minicache.store import SQLiteStore

TRUTH: dict[str, tuple[list[tuple[str, float, str]], str]] = {}


def asks(text: str, expr: str, **values: tuple[float, str]) -> str:
    """``text``, whose program assigns ``values`` (name: value and comment) and returns ``expr``."""
    TRUTH[text] = ([(n, v, c) for n, (v, c) in values.items()], expr)
    return text


def truth(text: str) -> float:
    assigns, expr = TRUTH[text]
    return float(eval(expr, {}, {n: v for n, v, _ in assigns}))


def target(messages: list[Any], options: Any) -> str:
    assigns, expr = TRUTH[request_of(messages)]
    body = "".join(f"    {n} = {v!r}  # {c}\n" for n, v, c in assigns)
    return f"```python\ndef solve():\n{body}    return {expr}\n```"


class InOrderSmall(FakeSmall):
    """A small model that fills the variables with the request's numbers in the order it writes
    them: one that reads positions, not meaning."""

    def _reply(self, messages: list[Any], options: Any) -> dict[str, Any]:
        found = numbers_in(messages[1].content)
        out = {}
        for k, (name, prop) in enumerate(options.json_schema["properties"].items()):
            enum = prop.get("enum")
            value = found[k] if k < len(found) else 0
            out[name] = enum[0] if enum is not None and value not in enum else value
        return out


def pupils(text: str, boys: int, girls: int, expr: str = "boys / girls") -> str:
    return asks(text, expr, boys=(boys, "number of boys"), girls=(girls, "number of girls"))


def ratio(school: str, boys: int, girls: int, ask: str = "boys to girls", expr: str = "") -> str:
    return pupils(
        f"A class at {school} school has {boys} boys and {girls} girls. What is the ratio of {ask}?",
        boys,
        girls,
        expr or "boys / girls",
    )


def discount(item: str, price: int, rate: int, tail: str = "", ask: str = "") -> str:
    text = (
        f"A {item} has a list price of ${price} and is sold at a {rate}% discount{tail}. "
        f"{ask or 'How much is the discount?'}"
    )
    return asks(
        text,
        "price * rate / 100",
        price=(price, "list price in dollars"),
        rate=(rate, "discount in percent"),
    )


def interest(name: str, principal: int, rate: float, years: int, period: str = "year") -> str:
    per = {"year": 1, "quarter": 4}[period]
    return asks(
        f"{name} deposits ${principal:,} at an interest rate of {rate} per {period} for {years} "
        f"years. How much interest does {name} earn?",
        f"principal * rate * {per} * years",
        principal=(principal, "deposit in dollars"),
        rate=(rate, "rate per period as a decimal"),
        years=(years, "years"),
    )


RATIOS = [("Oak", 12, 8), ("Elm", 9, 15), ("Pine", 20, 16), ("Ash", 14, 10)]
DISCOUNTS = [("jacket", 80, 20), ("lamp", 45, 10), ("chair", 120, 25), ("desk", 200, 15)]
DEPOSITS = [
    ("Tom", 1000, 0.05, 3),
    ("Ana", 2500, 0.04, 2),
    ("Raj", 4000, 0.03, 5),
    ("Li", 3000, 0.06, 4),
]


LABEL = "g"  # the requests name their group: the checks are under test here, not routing


@pytest.fixture
def serving(tmp_path: Path, sandbox):
    """``serving(examples)``: an engine at every default whose entry, built from the first of
    ``examples`` and through the tenant's first probation, serves the last."""
    engines: list[MiniCache] = []

    def make(examples: list[str]) -> MiniCache:
        mc = MiniCache(
            FakeBackend(target, name="truth"),
            InOrderSmall(),
            store=SQLiteStore(tmp_path / f"new_wording_{len(engines)}.db"),
            embedder=LexicalEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(),
        )
        engines.append(mc)
        # two misses, the build, a probation refusal compared with the miss, then a hit
        routes = [ask(mc, text).route for text in examples]
        assert routes == ["miss", "miss", "fallback", "hit"]
        return mc

    yield make
    for mc in engines:
        mc.close()


def ask(mc: MiniCache, text: str) -> Any:
    """``text`` answered in the entry's group, with what it started (builds, audits) done."""
    result = mc.solve(text, group=LABEL)
    mc.wait_for_builds()
    mc.wait_for_audits()
    assert result.answer == pytest.approx(truth(text))  # a hit is served only where it is right
    return result


def refused(mc: MiniCache, text: str, check: str) -> str:
    result = ask(mc, text)
    assert result.route == "fallback", result.answer
    assert f"HitRefused: {check}" in (result.fallback_reason or "")
    return result.fallback_reason or ""


def test_a_ratio_asked_the_other_way_round_or_of_other_things_is_refused(serving):
    mc = serving([ratio(*r) for r in RATIOS])
    assert ask(mc, ratio("Fir", 18, 24)).route == "hit"
    refused(mc, ratio("Oak", 12, 8, "girls to boys", "girls / boys"), "wording")
    refused(mc, ratio("Oak", 12, 8, "boys to all students", "boys / (boys + girls)"), "wording")


def test_a_number_beside_the_rules_reading_that_no_variable_reads_is_refused(serving):
    mc = serving([discount(*d) for d in DISCOUNTS])
    assert ask(mc, discount("bag", 60, 30)).route == "hit"
    year = "In 2021 a" + discount("hat", 40, 10)[1:]
    TRUTH[year] = TRUTH[discount("hat", 40, 10)]
    assert ask(mc, year).route == "hit"  # a year is no quantity
    further = discount("jacket", 80, 20, ", then a further 10% off")
    TRUTH[further] = (TRUTH[further][0], "price - price * (1 - rate / 100) * 0.9")
    assert "'10%' is left over" in refused(mc, further, "rule")


def test_a_quantity_asked_of_a_verb_or_after_tell_me_is_refused(serving):
    mc = serving([discount(*d) for d in DISCOUNTS])
    for ask_for in ("How much does the buyer pay?", "Tell me the price after the discount."):
        text = discount("jacket", 80, 20, ask=ask_for)
        TRUTH[text] = (TRUTH[text][0], "price * (1 - rate / 100)")
        refused(mc, text, "wording")


def test_a_rate_per_another_period_than_every_examples_is_refused(serving):
    mc = serving([interest(*d) for d in DEPOSITS])
    assert ask(mc, interest("Bo", 1500, 0.02, 6)).route == "hit"
    assert ask(mc, interest("Tom", 1000, 0.05, 3, "quarter")).route == "fallback"


def test_a_table_like_line_in_the_other_order_is_not_read_by_the_neighbours_name(serving):
    mc = serving([ratio(*r) for r in RATIOS])
    lines = pupils(
        "Oak school class. Girls: 8; Boys: 12. What is the ratio of boys to girls?", 12, 8
    )
    assert ask(mc, lines).route == "fallback"


def test_what_a_ratio_is_asked_of_is_read_past_owners_and_generic_words_and_refusals_teach(serving):
    mc = serving([ratio(*r) for r in RATIOS])
    numbers = ratio("Fir", 18, 24, "the number of boys to the number of girls")
    assert ask(mc, numbers).route == "hit"
    owner = pupils(
        "A class at Yew school has 15 boys and 10 girls. What is the ratio of Yew's boys to girls?",
        15,
        10,
    )
    assert ask(mc, owner).route == "hit"
    answer = ratio("Oak", 12, 8, "girls to boys", "girls / boys")
    inverse = pupils(answer + " Give your answer as a decimal.", 12, 8, "girls / boys")
    refused(mc, inverse, "wording")  # the phrase after the question names no quantity


def test_refusals_for_what_it_is_asked_of_teach_the_entry_when_its_program_answered_them(serving):
    mc = serving([ratio(*r) for r in RATIOS])
    enrolled = [ratio(s, b, g, "boys to girls enrolled") for s, b, g in RATIOS]
    # refused twice for "enrolled" (the record says "of boys to girls"); each time the entry's
    # program gave the miss path's answer, and the answers differ: the record is dropped, and the
    # revised entry serves once its probation has compared one
    first = [ask(mc, text) for text in enrolled[:2]]
    assert all("asks it of" in (r.fallback_reason or "") for r in first)
    entry = mc.store.active_entry("default", f"label:{LABEL}")
    assert entry is not None and "asked_of" not in entry.validation["profile"]
    assert [ask(mc, text).route for text in enrolled[2:]] == ["fallback", "hit"]
