"""Build-time self-consistency (minicache.build.consistency), with fake models: a build that samples
the target k times per held example builds from each example's most common computation when those
are one computation across the examples, records its agreement, builds nothing when the samples
agree on none, holds its winners to the requests the group failed on before, and keeps the group's
lease while it samples."""

from __future__ import annotations

import time
from typing import Any

import pytest

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
    SamplingTarget,
    numbers_in,
    request_of,
)
from minicache.build.admission import Admission
from minicache.build.consistency import Sample, one_computation
from minicache.build.validation import AttemptSource
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.errors import BackendError
from minicache.models.base import GenerationOptions, Message
from minicache.programs.computation import ParameterNaming, computation_of
from minicache.store import Example, SQLiteStore
from minicache.store.base import new_id


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
    # Each example's winner is the computation it sampled first, with one of its three samples.
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
            True,  # an intermediate variable is written into the expression returned
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


GROUP = "grp_sampled"
# The current ratio asked with the liabilities written first: its numbers in the other order.
REVERSED = "Current liabilities are ${0} and current assets are ${1}. What is the current ratio?"


def reversed_ask(assets: int, liabilities: int) -> str:
    return REVERSED.format(f"{liabilities:,}", f"{assets:,}")


def seed(mc: MiniCache, requests: list[tuple[str, float]]) -> list[Example]:
    """A group of the given (request, recorded answer) examples, oldest first, as misses left it."""
    mc.store.ensure_group("default", GROUP)
    examples = []
    for question, answer in requests:
        ex = Example(
            id=new_id("ex"),
            tenant="default",
            group_id=GROUP,
            question=question,
            context=None,
            program=f"def solve():\n    return {answer!r}\n",
            answer=answer,
            variables={},
            created_at=time.time() + len(examples),
        )
        mc.store.add_example(ex)
        examples.append(ex)
    return examples


def ratio_requests(values: list[tuple[int, int]]) -> list[tuple[str, float]]:
    return [(CURRENT_RATIO.ask(*v), CURRENT_RATIO.answer(*v)) for v in values]


class WordingTarget(FakeTarget):
    """Samples the current ratio for either wording, its names assigned in the order the request
    writes its numbers; ``swapped`` samples of the reversed wording divide the liabilities by the
    assets; ``down`` requests get no sample (the target fails them)."""

    def __init__(self, swapped: bool = False, down: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.swapped, self.down = swapped, down
        self.sample_calls = 0

    def _reply(self, messages: list[Message], options: GenerationOptions) -> Any:
        if options.temperature <= 0 or "Request:\n" not in messages[1].content:
            return super()._reply(messages, options)
        self.sample_calls += 1
        question = request_of(messages)
        if question in self.down:
            return BackendError("fake target is down for this request")
        first, second = numbers_in(question)[:2]
        if question.startswith("Current liabilities"):
            ratio = "l / a" if self.swapped else "a / l"
            body = f"    l = {first!r}\n    a = {second!r}\n    return {ratio}\n"
        else:
            body = f"    a = {first!r}\n    l = {second!r}\n    return a / l\n"
        return f"```python\ndef solve():\n{body}```"


def test_two_wordings_that_write_their_numbers_in_opposite_orders_build_one_entry(make):
    # Within each request the samples agree; across the wordings the parameter a request's first
    # number fills differs, so counting by the request's numbers alone never found a majority.
    target = WordingTarget()
    mc = make(target, build_samples=3)
    seed(
        mc,
        [
            (CURRENT_RATIO.ask(*CR_VALUES[0]), CURRENT_RATIO.answer(*CR_VALUES[0])),
            (reversed_ask(*CR_VALUES[1]), CURRENT_RATIO.answer(*CR_VALUES[1])),
            (CURRENT_RATIO.ask(*CR_VALUES[2]), CURRENT_RATIO.answer(*CR_VALUES[2])),
        ],
    )
    entry = mc.builder.build("default", GROUP)
    assert entry is not None and target.sample_calls == 9
    assert entry.validation["agreement"] == 1.0
    assert mc.store.list_entries("default", "active") == [entry]


def test_a_wording_whose_samples_all_swap_its_quantities_is_left_out_of_the_majoritys_entry(make):
    # Every sample of the reversed request divides the liabilities by the assets: its own samples
    # agree and its shape by use is the others', but the first example's program on its values does
    # not give its answer. Two winners of three are the current ratio: the entry is theirs, and the
    # reversed wording's winner is left out of it.
    mc = make(WordingTarget(swapped=True), build_samples=3)
    seed(
        mc,
        [
            (CURRENT_RATIO.ask(*CR_VALUES[0]), CURRENT_RATIO.answer(*CR_VALUES[0])),
            (reversed_ask(*CR_VALUES[1]), CURRENT_RATIO.answer(*CR_VALUES[1])),
            (CURRENT_RATIO.ask(*CR_VALUES[2]), CURRENT_RATIO.answer(*CR_VALUES[2])),
        ],
    )
    entry = mc.builder.build("default", GROUP)
    assert entry is not None
    assert entry.validation["left_out"] == 1 and entry.validation["agreement"] == 1.0
    assets, liabilities = CR_VALUES[3]
    ran = mc.sandbox.run(entry.program, {"a": assets, "l": liabilities})
    assert ran.value == pytest.approx(CURRENT_RATIO.answer(assets, liabilities))


def test_winners_split_evenly_between_two_computations_build_nothing(make):
    # Two held examples (the newest two of three), one computation each: no computation has the
    # validate_min winners a build needs, so the group is not built and the attempt says how the
    # winners split.
    mc = make(WordingTarget(swapped=True), build_samples=3, validate_n=2)
    seed(
        mc,
        [
            (CURRENT_RATIO.ask(*CR_VALUES[0]), CURRENT_RATIO.answer(*CR_VALUES[0])),
            (CURRENT_RATIO.ask(*CR_VALUES[1]), CURRENT_RATIO.answer(*CR_VALUES[1])),
            (reversed_ask(*CR_VALUES[2]), CURRENT_RATIO.answer(*CR_VALUES[2])),
        ],
    )
    assert mc.builder.build("default", GROUP) is None
    failure = mc.store.group_failure("default", GROUP)
    assert failure is not None
    (attempt,) = failure["attempts"]
    assert attempt["source"] == AttemptSource.SAMPLES
    assert (
        "not one computation" in attempt["error"] and "quantities differently" in attempt["error"]
    )
    assert "winners by computation: 1+1" in attempt["error"]


def failed_hit_on(mc: MiniCache, question: str) -> None:
    """Record that an entry of the group failed on ``question``: the next build must answer it as
    the miss path did (minicache.build.failures)."""
    mc.store.set_group_failure("default", GROUP, {"kind": "hit", "requests": [question]})


def test_a_failed_hit_request_the_samples_answer_otherwise_vetoes_the_build_once(make):
    requests = ratio_requests(CR_VALUES[:3])
    question, right = requests[1]
    requests[1] = (question, right + 1.0)  # what the miss path answered it with
    mc = make(SamplingTarget(("A", "A", "B")), build_samples=3)
    must = seed(mc, requests)[1]
    failed_hit_on(mc, question)
    assert mc.builder.build("default", GROUP) is None
    failure = mc.store.group_failure("default", GROUP)
    assert failure is not None and failure["vetoed"] == [must.id]
    (attempt,) = failure["attempts"]
    assert attempt["source"] == AttemptSource.SAMPLES and "failed on before" in attempt["error"]
    assert must.id in attempt["error"]
    # Its veto is spent: the next build holds it as any example, answered as its samples answer it.
    entry = mc.builder.build("default", GROUP)
    assert entry is not None
    stored = [ex.answer for ex in mc.store.examples("default", GROUP) if ex.id == must.id]
    assert stored == [right + 1.0]  # the samples' answer is the build's, not the store's


def test_a_failed_hit_request_the_samples_agree_with_does_not_veto_the_build(make):
    requests = ratio_requests(CR_VALUES[:3])
    mc = make(SamplingTarget(("A", "A", "B")), build_samples=3)
    must = seed(mc, requests)[1]
    failed_hit_on(mc, must.question)
    entry = mc.builder.build("default", GROUP)
    assert entry is not None and mc.store.group_failure("default", GROUP) is None


def test_a_failed_hit_request_no_sample_answered_stays_held_and_must_pass(make):
    # No sample of the request ran: it has no winner, but it is not dropped. It stays held with the
    # miss path's answer, which every candidate fails, so the build fails on it and records it.
    requests = ratio_requests(CR_VALUES[:4])
    question, right = requests[1]
    requests[1] = (question, right + 1.0)
    mc = make(WordingTarget(down=(question,)), build_samples=3)
    must = seed(mc, requests)[1]
    failed_hit_on(mc, question)
    assert mc.builder.build("default", GROUP) is None
    failure = mc.store.group_failure("default", GROUP)
    assert failure is not None and failure["vetoed"] == [must.id]
    assert failure["requests"] == [question]


class SlowTarget(SamplingTarget):
    """Each sample takes ``seconds``; before each one, another replica tries to take the group's
    lease (``taken``: whether it could), or, from sample ``steal_at`` on, takes it as if it had
    lapsed."""

    def __init__(self, seconds: float = 0.0, steal_at: int | None = None) -> None:
        super().__init__(("A", "A", "B"))
        self.seconds, self.steal_at = seconds, steal_at
        self.taken: list[bool] = []
        self.engine: MiniCache | None = None

    def _reply(self, messages: list[Message], options: GenerationOptions) -> Any:
        if options.temperature > 0 and self.engine is not None:
            store = self.engine.store
            if self.steal_at is not None and self.sample_calls + 1 >= self.steal_at:
                store.release_build_lease("default", GROUP, self.engine.builder.owner)
            self.taken.append(store.acquire_build_lease("default", GROUP, "other-replica", 60.0))
            time.sleep(self.seconds)
        return super()._reply(messages, options)


def test_a_sampled_build_renews_its_lease_so_it_outlives_a_short_one(make):
    target = SlowTarget(seconds=0.04)
    mc = make(target, build_samples=3, build_lease_s=0.1)  # 9 samples take about 0.36 s
    target.engine = mc
    seed(mc, ratio_requests(CR_VALUES[:3]))
    assert mc.builder.build("default", GROUP) is not None
    assert len(target.taken) == 9 and not any(target.taken)


def test_a_build_whose_lease_another_replica_took_stops_sampling_and_records_nothing(make):
    target = SlowTarget(steal_at=4)
    mc = make(target, build_samples=3)
    target.engine = mc
    seed(mc, ratio_requests(CR_VALUES[:3]))
    assert mc.builder.build("default", GROUP) is None
    assert target.sample_calls == 4  # the fifth renewal was refused
    assert mc.store.group_failure("default", GROUP) is None
    assert mc.stats()["builds_failed"] == 0 and mc.store.list_entries("default") == []
    assert not mc.store.acquire_build_lease("default", GROUP, "a-third-replica", 60.0)


def test_the_computation_most_winners_write_must_be_more_than_half_of_them(sandbox):
    # Five examples' winners: two divide, three each compute something else. Two is the most any
    # computation has, but not more than half: no entry.
    def winner(i: int, body: str, answer: float) -> Sample:
        question = f"Assets of {10 + i} and debts of 4."
        ex = Example(
            id=f"ex{i}",
            tenant="default",
            group_id=GROUP,
            question=question,
            context=None,
            program="",
            answer=answer,
            variables={},
            created_at=float(i),
        )
        return Sample(ex, f"def solve():\n    return {body.format(a=10 + i, b=4)}\n", answer)

    winners = [
        winner(0, "{a} / {b}", 2.5),
        winner(1, "{a} / {b}", 11 / 4),
        winner(2, "{a} * {b}", 48.0),
        winner(3, "{a} + {b}", 17.0),
        winner(4, "{a} - {b}", 10.0),
    ]
    majority, split = one_computation(winners, sandbox)
    assert majority == [] and split is not None and "2+1+1+1" in split
    majority, split = one_computation(winners[:3], sandbox)
    assert split is None and [s.example.id for s in majority] == ["ex0", "ex1"]
