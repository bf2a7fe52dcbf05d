"""Numbers StepCache does not take: a request holding a number of more than ``MAX_DIGITS`` digits,
or whose values grow past them, is answered by the program path (never a 5xx), and StepCache's own
checks refuse such numbers instead of failing on them."""

from __future__ import annotations

from fractions import Fraction

import pytest
from fastapi.testclient import TestClient

from fakes import FakeSmall, FakeTarget, HashEmbedder, request_of
from minicache.engine import EngineConfig, InvalidRequest, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.stepcache import bounds, jsontask, linear, step_request_of
from minicache.store import SQLiteStore

TAIL = "Show your work as numbered steps, one per line, and end with the line 'x = <value>'."
NINES = "9" * 5000
BIG = "7" * 3000
HUGE = {
    "5,000 nines": f"Solve for x: {NINES}x + 5 = 20. {TAIL}",
    "a tiny decimal": f"Solve for x: 0.{'0' * 400}1x = 1. {TAIL}",
    "3,000-digit products": f"Solve for x: {BIG} * {BIG} * x + {BIG} = {BIG} * {BIG}. {TAIL}",
    "products past the bound": f"Solve for x: {'9' * 60} * {'9' * 60} * x = 5. {TAIL}",
    "a huge solution": f"Solve for x: 0.{'0' * 60}3x = {'9' * 60}. {TAIL}",
    "a huge JSON number": (
        f"Create a JSON object for this record: the product costs {NINES} dollars. Return only "
        'the JSON. Required keys: "price" (number).'
    ),
}


class AnswersAnything(FakeTarget):
    """Writes a program for any request (a miss the program path can serve): the answer 0."""

    def _miss(self, messages):
        if "solve for x" in request_of(messages).lower() or "json" in request_of(messages).lower():
            return "```python\ndef solve():\n    return 0\n```"
        return super()._miss(messages)


@pytest.mark.parametrize("question", HUGE.values(), ids=HUGE.keys())
def test_oversize_numbers_are_not_stepcaches(question):
    assert step_request_of(question, None, "auto") is None
    with pytest.raises(InvalidRequest):
        step_request_of(question, None, "step")


def test_numbers_within_the_bound_still_are():
    ok = f"Solve for x: {'9' * 40}x + 5 = {'1' * 40}. {TAIL}"
    assert isinstance(step_request_of(ok, None, "auto"), linear.LinearRequest)
    assert bounds.longest_number(f"0.{'0' * 400}1") == 402
    assert bounds.numbers_fit("1.5 and 2,000") and not bounds.numbers_fit("1" * 101)


def test_checks_refuse_oversize_numbers_instead_of_failing():
    req = linear.parse_request(f"Solve for x: 3x + 5 = 20. {TAIL}")
    assert req is not None
    assert linear.check_step(req, f"3x = {NINES} - {NINES} + 15") is not None  # not readable
    assert linear.read_answer(req, f"x = {NINES}") is None
    assert linear.check_final(req, f"x = {NINES}") is not None
    assert jsontask.parse_object('{"price": ' + NINES + "}") is None
    assert linear.fmt_number(Fraction(10**99, 3))  # the largest values the bound lets through


def test_oversize_requests_take_the_program_path_through_the_server(tmp_path, sandbox):
    engine = MiniCache(
        AnswersAnything(),
        FakeSmall(),
        store=SQLiteStore(tmp_path / "bounds.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    try:
        with TestClient(create_app(engine, ServerConfig(rate_per_s=0))) as client:
            for name, question in HUGE.items():
                body = {"model": "m", "messages": [{"role": "user", "content": question}]}
                r = client.post("/v1/chat/completions", json=body)
                assert r.status_code < 500, (name, r.status_code, r.text[:300])
                assert r.status_code == 200, (name, r.text[:300])
                assert not r.json()["minicache"]["route"].startswith("step"), name
                r = client.post("/v1/solve", json={"question": question, "mode": "step"})
                assert r.status_code == 400, (name, r.status_code, r.text[:300])
    finally:
        engine.close()
