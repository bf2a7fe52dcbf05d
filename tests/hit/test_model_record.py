"""The small model is asked for an entry only while its choices pay for their seconds (minicache.hit.model_record)."""

from __future__ import annotations

import time

import pytest
from test_hit_verification import SwappingSmall, any_store  # noqa: F401 - fixture

from fakes import CR_VALUES, CURRENT_RATIO, SI_VALUES, SIMPLE_INTEREST, FakeTarget, HashEmbedder
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.hit.model_record import model_declined
from minicache.hit.verify import ZERO_MODEL_PATHS, HitRefused
from minicache.store import Entry, SQLiteStore
from pg import pg_database, pg_dsn, pg_server  # noqa: F401 - fixtures


class SlowSwappingSmall(SwappingSmall):
    """Takes 0.15 s a call, above the gate's 0.1 s floor (calls under it are always made)."""

    def _reply(self, messages, options):
        time.sleep(0.15)
        return super()._reply(messages, options)


def entry(served: int = 0, refused: int = 0, seconds_each: float = 1.0) -> Entry:
    return Entry(
        id="ent_1",
        tenant="default",
        group_id="grp_1",
        template=[],
        program="def solve(a, b):\n    return a / b\n",
        model_served=served,
        model_refused=refused,
        model_ms=round((served + refused) * seconds_each * 1000),
    )


def test_the_model_is_declined_once_the_optimistic_share_served_times_a_miss_is_under_its_seconds():
    # 0 of 3: the optimistic share is 1/4, and 0.25 x 4.5 s = 1.125 s is still above 1.0 s of model
    assert model_declined(entry(refused=3), miss_s=4.5) is None
    why = model_declined(entry(refused=4), miss_s=4.5)  # 0 of 4: 0.2 x 4.5 s = 0.9 s
    assert why is not None and "served 0 of 4 times" in why


def test_a_record_of_served_choices_keeps_the_model_asked_and_no_measured_miss_asks_it_always():
    assert model_declined(entry(served=3, refused=1), miss_s=4.5) is None
    assert model_declined(entry(served=3, refused=21), miss_s=4.5) is not None
    assert model_declined(entry(served=3, refused=21), miss_s=None) is None  # no miss measured yet
    assert model_declined(entry(), miss_s=4.5) is None  # never asked yet


def test_calls_shorter_than_the_floor_are_always_made():
    assert model_declined(entry(refused=10, seconds_each=0.05), miss_s=0.01, min_s=0.1) is None


def test_the_record_is_kept_per_entry_in_both_stores(any_store):  # noqa: F811 - the fixture
    store = any_store
    kept = store.put_entry(
        Entry(
            id="ent_rec",
            tenant="default",
            group_id="grp_rec",
            template=[],
            program="def solve(a):\n    return a\n",
        )
    )
    store.record_model_choice("default", kept.id, False, 1500)
    store.record_model_choice("default", kept.id, True, 500)
    store.record_model_choice("default", "ent_missing", True, 500)  # gone: nothing happens
    got = store.get_entry("default", kept.id)
    assert (got.model_served, got.model_refused, got.model_ms) == (1, 1, 2000)


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(**config):
        config.setdefault("verify", VerifyConfig(probation=0))
        mc = MiniCache(
            FakeTarget(),
            SlowSwappingSmall(),
            store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(background_builds=False, build_early=0, build_after=2, **config),
        )
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
    mc.hits.miss_cost = lambda: (
        1e-6
    )  # a miss as cheap as this never repays a model call that was refused
    calls = len(mc.small.calls)
    first = mc.solve(CURRENT_RATIO.ask(64000, 16000) + EXTRA)
    assert first.route == "fallback" and not first.fallback_reason.startswith(
        "HitRefused: model-record"
    )
    assert len(mc.small.calls) == calls + 1
    second = mc.solve(CURRENT_RATIO.ask(90000, 30000) + EXTRA)
    assert second.route == "fallback" and second.fallback_reason.startswith(
        "HitRefused: model-record"
    )
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
