"""A zero-model reading of two slots of one kind is served only where the words that can tell them
apart do (minicache.hit.independence, minicache.hit.corroboration.telling_words).

Examples that name the items before the people ("Tom shares 12 cookies equally among 4 friends")
teach the divisor's slot every word between the two numbers, "cookies equally among" included,
since no separator splits them. A request naming the people first ("12 kids get 3 oranges
equally") then aligns by elimination, every exemplar agreeing, as 12 / 3; a cue reader that
counted those same words agreed with it and served 4.0 (the answer is 0.25). Counting only the
words that tell the slots apart, it refuses both of the review's reordered requests, and the miss
path answers them; the examples' own wording is still served."""

from __future__ import annotations

import re

import pytest

from fakes import FakeSmall, request_of
from minicache.config.engine import EngineConfig, VerifyConfig
from minicache.engine import MiniCache
from minicache.errors import HitRefused
from minicache.hit.checks import Check
from minicache.models import FakeBackend
from minicache.route.lexical import LexicalEmbedder
from minicache.store import SQLiteStore

EXAMPLES = [
    "Tom shares {a} cookies equally among {b} friends. How many cookies does each friend get?",
    "Maria splits {a} apples equally between {b} kids. How many apples does each kid get?",
    "Ken divides {a} pencils equally among {b} students. How many pencils does each student get?",
]
# Sizes that overlap (8 people, 6 pencils): the group's record does not set the slots apart.
ASKED = [(12, 4), (20, 5), (6, 8)]
# The review's requests, the people first: "12 kids get 3 oranges equally" (items 3, people 12).
REORDERED = [
    ("{b} kids get {a} oranges equally. How many oranges does each kid get?", 3, 12),
    ("{b} friends receive {a} cookies equally. How many cookies does each friend get?", 5, 10),
]


def shares(messages, options):
    """The target reads a request right: the people first where it starts with their number."""
    q = request_of(messages)
    first, second = (int(n) for n in re.findall(r"\d+", q)[:2])
    items, people = (second, first) if q[0].isdigit() else (first, second)
    return (
        "```python\ndef solve():\n"
        f"    items = {items}\n    people = {people}\n    return items / people\n```"
    )


# Builds after the three examples and serves each hit as soon as its entry validates.
BUILD_AT_THREE = EngineConfig(
    background_builds=False,
    build_after=3,
    build_early=0,
    audit_rate=0.0,
    verify=VerifyConfig(probation=0),
)


@pytest.fixture
def mc(tmp_path, sandbox):
    store = SQLiteStore(tmp_path / "reordered.db")
    parts = dict(store=store, embedder=LexicalEmbedder(), sandbox=sandbox, config=BUILD_AT_THREE)
    engine = MiniCache(FakeBackend(shares, name="fake-target"), FakeSmall(), **parts)
    yield engine
    engine.close()


def test_the_reviews_reordered_requests_are_refused_and_answered_by_the_miss_path(mc):
    asked = zip(EXAMPLES, ASKED, strict=True)
    results = [mc.solve(q.format(a=a, b=b), group="sharing") for q, (a, b) in asked]
    assert [r.route for r in results] == ["miss"] * 3
    entry = mc.store.active_entry("default", results[0].group)
    assert entry is not None
    for wording, items, people in REORDERED:
        request = wording.format(a=items, b=people)
        with pytest.raises(HitRefused) as refused:
            mc.hits.verifier.extract(entry, request)
        assert refused.value.check == Check.UNCORROBORATED
        result = mc.solve(request, group="sharing")
        assert result.route == "fallback", result
        assert (result.fallback_reason or "").startswith("HitRefused: uncorroborated")
        # The miss path's answer, not people / items (4.0 and 2.0 were served).
        assert result.answer == pytest.approx(items / people)


def test_the_examples_own_wording_is_still_served(mc):
    for q, (a, b) in zip(EXAMPLES, ASKED, strict=True):
        assert mc.solve(q.format(a=a, b=b), group="sharing").route == "miss"
    hit = mc.solve(EXAMPLES[0].format(a=28, b=7), group="sharing")
    assert hit.route == "hit" and hit.answer == pytest.approx(4.0)
