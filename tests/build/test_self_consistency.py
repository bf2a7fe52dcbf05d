"""Build-time self-consistency (minicache.build.consistency), with fake models: a build that samples
the target k times per held example builds the computation most samples agree on, records its
agreement, and builds nothing when the samples agree on none."""

from __future__ import annotations

import pytest

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
    SamplingTarget,
)
from minicache.build.admission import Admission
from minicache.build.validation import AttemptSource
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.programs.computation import ParameterNaming, computation_of
from minicache.store import SQLiteStore


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(target: FakeTarget, **config) -> MiniCache:
        config.setdefault("verify", VerifyConfig(probation=0))
        config.setdefault("audit_rate", 0.0)
        config.setdefault("build_early", 0)
        mc = MiniCache(
            target,
            FakeSmall(),
            store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(background_builds=False, **config),
        )
        made.append(mc)
        return mc

    yield factory
    for mc in made:
        mc.close()


def warm(mc: MiniCache, values: list[tuple[int, int]]) -> list[str]:
    return [mc.solve(CURRENT_RATIO.ask(*v)).route for v in values]


def test_the_entry_is_the_computation_most_samples_agree_on_with_its_agreement(make):
    target = SamplingTarget(("A", "A", "B"))  # per request: the right computation twice, B once
    mc = make(target, build_samples=3, build_temperature=0.8)
    assert warm(mc, CR_VALUES[:3]) == ["miss", "miss", "miss"]
    assert target.sample_calls == 9  # 3 samples for each of the 3 held examples
    sampled = [c.options for c in target.calls if c.options.temperature > 0]
    assert {o.temperature for o in sampled} == {0.8}
    (entry,) = mc.store.list_entries("default", "active")
    assert entry.validation["samples"] == 9
    assert entry.validation["agreement"] == pytest.approx(6 / 9, abs=1e-4)
    hit = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    assert hit.route == "hit"
    assert hit.answer == pytest.approx(CURRENT_RATIO.answer(*CR_VALUES[3]))


def test_the_entry_can_be_right_where_every_greedy_program_was_wrong(make):
    # Greedy misses answer with a constant (nothing to lift, so no build of today's could use them);
    # two of three samples write the computation, and the entry serves it.
    target = SamplingTarget(("A", "B", "A"), mode="constant")
    mc = make(target, build_samples=3)
    warm(mc, CR_VALUES[:3])
    (entry,) = mc.store.list_entries("default", "active")
    assert entry.validation["agreement"] == pytest.approx(6 / 9, abs=1e-4)
    hit = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[4]))
    assert (hit.route, hit.answer) == ("hit", pytest.approx(CURRENT_RATIO.answer(*CR_VALUES[4])))


def test_a_group_whose_samples_do_not_agree_is_not_built_and_its_requests_stay_misses(make):
    target = SamplingTarget(("A", "B", "C"))  # each computation a third of the samples
    mc = make(target, build_samples=3)
    warm(mc, CR_VALUES[:3])
    assert mc.store.list_entries("default") == []
    assert mc.stats()["builds_failed"] == 1
    group = mc.store.list_groups("default")[0]
    failure = mc.store.group_failure("default", group.id)
    assert failure is not None
    (attempt,) = failure["attempts"]
    assert attempt["source"] == AttemptSource.SAMPLES and attempt["ok"] is False
    assert "samples do not agree" in attempt["error"] and "3 of 9" in attempt["error"]
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3])).route == "miss"


def test_the_agreement_bar_is_configurable(make):
    mc = make(SamplingTarget(("A", "A", "B")), build_samples=3, build_agreement=0.7)
    warm(mc, CR_VALUES[:3])  # 6 of 9 is not more than 70%
    assert mc.store.list_entries("default") == []


def test_misses_stay_one_greedy_call(make):
    target = SamplingTarget(("A", "A", "B"))
    mc = make(target, build_samples=3)
    warm(mc, CR_VALUES[:3])
    greedy = [c.options for c in target.calls if c.options.temperature == 0]
    assert len(greedy) == target.miss_calls == 3


def test_one_sample_is_todays_build_with_no_samples_and_no_agreement_recorded(make):
    target = SamplingTarget(("A", "B", "C"))
    mc = make(target)  # build_samples=1 by default
    warm(mc, CR_VALUES[:3])
    assert target.sample_calls == 0
    assert all(c.options.temperature == 0 for c in target.calls)
    (entry,) = mc.store.list_entries("default", "active")
    assert "samples" not in entry.validation and "agreement" not in entry.validation


def test_a_builds_target_tokens_are_counted_apart(make):
    mc = make(SamplingTarget(("A", "A", "B")), build_samples=3)
    warm(mc, CR_VALUES[:3])
    counters = mc.store.counters("default")
    assert 0 < counters["build_target_tokens"] < counters["target_tokens"]


def test_admission_prices_each_sample_as_a_miss_so_the_build_cost_grows_with_k():
    admission = Admission()
    for _ in range(5):
        admission.observe_request("t", "g", "miss", 2.0)
    admission.observe_build(1.0, ok=True)
    one = admission.estimate("t", 5)
    three = admission.estimate("t", 5, samples=9)
    assert one["build_s"] == pytest.approx(1.0)
    assert three["build_s"] == pytest.approx(1.0 + 9 * 2.0)
    assert three["gain_s"] == pytest.approx(one["gain_s"] - 18.0)


def test_the_queue_asks_admission_about_k_samples_per_held_example(make):
    mc = make(SamplingTarget(("A", "A", "B")), build_samples=3)
    told: list[int] = []
    admits = mc.admission.admits

    def spy(tenant, n, first_misses=0, failures=0, samples=0):
        told.append(samples)
        return admits(tenant, n, first_misses, failures, samples)

    mc.admission.admits = spy
    warm(mc, CR_VALUES[:3])
    assert told[-1] == 9  # 3 samples x validate_n 3 held examples
    assert mc.builds.samples_planned(2, None) == 6
    assert mc.builds.samples_planned(5, {"examples": ["ex1"], "requests": []}) == 12


def sample_computation(program: str, request: str):
    """A sample's computation as self-consistency counts it: parameters named for the request's
    numbers they hold."""
    return computation_of(program, ParameterNaming.BY_REQUEST_NUMBER, request=request)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (
            "def solve():\n    assets = 10\n    debts = 4\n    return assets / debts\n",
            "def solve():\n    x = 30\n    y = 7\n    return x / y\n",
            True,
        ),
        (
            "def solve():\n    return 10 / 4\n",
            "def solve(a=30, b=7):\n    r = a / b\n    return r\n",
            False,  # up to names, not up to algebra: an intermediate variable is another program
        ),
        (
            "def solve():\n    return 10 / 4\n",
            "def solve():\n    return 7 / 30\n",
            False,  # the values the other way round: another computation
        ),
    ],
)
def test_computations_are_compared_up_to_parameter_names(a, b, same):
    first = sample_computation(a, "The current ratio: assets of 10 and debts of 4.")
    second = sample_computation(b, "The current ratio: assets of 30 and debts of 7.")
    assert first is not None and second is not None
    assert (first.shape == second.shape) is same


def test_a_constant_is_no_computation():
    assert (
        sample_computation("def solve():\n    return 2.5\n", "assets of 10 and debts of 4") is None
    )
