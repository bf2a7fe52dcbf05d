"""The small model is asked for an entry only while its choices pay for their seconds (minicache.model_record)."""

from __future__ import annotations

import time

import pytest

from fakes import CR_VALUES, CURRENT_RATIO, SI_VALUES, SIMPLE_INTEREST, FakeTarget, HashEmbedder
from minicache.engine import EngineConfig, MiniCache
from minicache.hit import ZERO_MODEL_PATHS, HitRefused, VerifyConfig
from minicache.model_record import ModelRecord
from minicache.store import Entry, SQLiteStore
from test_hit_verification import SwappingSmall


class SlowSwappingSmall(SwappingSmall):
    """Takes 0.15 s a call, above the gate's 0.1 s floor (calls under it are always made)."""

    def _reply(self, messages, options):
        time.sleep(0.15)
        return super()._reply(messages, options)


def entry(program: str = "def solve(a, b):\n    return a / b\n") -> Entry:
    return Entry(id="ent_1", tenant="default", group_id="grp_1", template=[], program=program)


def test_the_model_is_declined_once_the_optimistic_share_served_times_a_miss_is_under_its_seconds():
    record, e = ModelRecord(z=1.0), entry()
    for _ in range(3):
        record.observe("default", e, served=False, seconds=1.0)
    # 0 of 3: the optimistic share is 1/4, and 0.25 x 4.5 s = 1.125 s is still above 1.0 s of model
    assert record.declines("default", e, miss_s=4.5) is None
    record.observe("default", e, served=False, seconds=1.0)
    why = record.declines("default", e, miss_s=4.5)  # 0 of 4: 0.2 x 4.5 s = 0.9 s
    assert why is not None and "served 0 of 4 times" in why


def test_a_record_of_served_choices_keeps_the_model_asked_and_no_measured_miss_asks_it_always():
    record, e = ModelRecord(z=1.0), entry()
    for served in (True, True, False, True):
        record.observe("default", e, served=served, seconds=1.0)
    assert record.declines("default", e, miss_s=4.5) is None
    for _ in range(20):
        record.observe("default", e, served=False, seconds=1.0)
    assert record.declines("default", e, miss_s=4.5) is not None
    assert record.declines("default", e, miss_s=None) is None  # no miss measured yet


def test_calls_shorter_than_the_floor_are_always_made():
    record, e = ModelRecord(z=1.0, min_s=0.1), entry()
    for _ in range(10):
        record.observe("default", e, served=False, seconds=0.05)
    assert record.declines("default", e, miss_s=0.01) is None


def test_the_record_follows_the_entrys_program_and_tenant():
    record, e = ModelRecord(z=1.0), entry()
    for _ in range(10):
        record.observe("default", e, served=False, seconds=1.0)
    assert record.declines("default", e, miss_s=4.5) is not None
    revised = entry()
    revised.id = "ent_2"  # a refusal review's revision keeps the program, and its record
    assert record.declines("default", revised, miss_s=4.5) is not None
    rebuilt = entry("def solve(a, b):\n    return b / a\n")
    assert record.declines("default", rebuilt, miss_s=4.5) is None
    assert record.declines("other", e, miss_s=4.5) is None


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(**config):
        config.setdefault("verify", VerifyConfig(probation=0))
        mc = MiniCache(FakeTarget(), SlowSwappingSmall(), store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
                       embedder=HashEmbedder(), sandbox=sandbox,
                       config=EngineConfig(background_builds=False, build_early=0, build_after=2, **config))
        made.append(mc)
        return mc

    yield factory
    for mc in made:
        mc.close()


EXTRA = " Fixed assets are $5,000."  # a leftover number: the alignment cannot read it, the small model is asked


def test_an_entry_whose_model_choices_keep_being_refused_stops_asking_the_model(make):
    mc = make()
    for values in CR_VALUES[:2]:
        mc.solve(CURRENT_RATIO.ask(*values))
    mc.small.swap = True  # every choice swaps the two values: the words around them refuse it
    mc.hits.miss_cost = lambda: 1e-6  # a miss as cheap as this never repays a model call that was refused
    calls = len(mc.small.calls)
    first = mc.solve(CURRENT_RATIO.ask(64000, 16000) + EXTRA)
    assert first.route == "fallback" and not first.fallback_reason.startswith("HitRefused: model-record")
    assert len(mc.small.calls) == calls + 1
    second = mc.solve(CURRENT_RATIO.ask(90000, 30000) + EXTRA)
    assert second.route == "fallback" and second.fallback_reason.startswith("HitRefused: model-record")
    assert "served 0 of 1 times" in second.fallback_reason
    assert second.answer == pytest.approx(3.0)  # the miss path's answer
    assert len(mc.small.calls) == calls + 1  # not asked


def test_an_entry_that_asks_the_model_no_more_still_serves_what_rules_and_alignment_read(make):
    mc = make()
    for values in SI_VALUES[:2]:
        built = mc.solve(SIMPLE_INTEREST.ask(*values))
    si = mc.store.active_entry("default", built.group)
    declined = HitRefused("model-record", "not paying")
    read = mc.verifier.extract(si, SIMPLE_INTEREST.ask(*SI_VALUES[2]), no_model=declined)
    assert read.method in ZERO_MODEL_PATHS
    assert read.variables == dict(zip(SIMPLE_INTEREST.names, SI_VALUES[2], strict=True))
    for values in CR_VALUES[:2]:
        built = mc.solve(CURRENT_RATIO.ask(*values))
    cr = mc.store.active_entry("default", built.group)
    calls = len(mc.small.calls)
    with pytest.raises(HitRefused) as refused:
        mc.verifier.extract(cr, CURRENT_RATIO.ask(64000, 16000) + EXTRA, no_model=declined)
    assert refused.value is declined and len(mc.small.calls) == calls


def test_until_a_miss_has_been_measured_or_with_the_gate_off_the_model_is_always_asked(make):
    for mc in (make(), make(verify=VerifyConfig(probation=0, model_gate=False))):
        for values in CR_VALUES[:2]:
            mc.solve(CURRENT_RATIO.ask(*values))
        mc.small.swap = True
        if not mc.config.verify.model_gate:
            mc.hits.miss_cost = lambda: 1e-6
        else:
            mc.hits.miss_cost = lambda: None
        calls = len(mc.small.calls)
        for assets in (64000, 90000, 120000):
            result = mc.solve(CURRENT_RATIO.ask(assets, 16000) + EXTRA)
            assert result.route == "fallback" and "model-record" not in result.fallback_reason
        assert len(mc.small.calls) == calls + 3
