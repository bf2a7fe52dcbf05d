"""Build admission, learning from failure and back-off (minicache.build.admission), with fake models."""

from __future__ import annotations

import random
import time

import pytest

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
    spy_on_admission,
)
from minicache.build.admission import MODEL_CHECKS_NOT_ADMITTED, TARGET_NOT_ADMITTED, Admission
from minicache.build.failures import validation_set
from minicache.config.engine import AdmissionConfig, VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.store import Example, SQLiteStore


@pytest.fixture
def make(tmp_path, sandbox):
    made: list[MiniCache] = []

    def factory(
        *, small: FakeSmall | None = None, admission: AdmissionConfig | None = None, **config
    ) -> MiniCache:
        config.setdefault(
            "verify", VerifyConfig(probation=0)
        )  # probation has its own tests (test_probation.py)
        mc = MiniCache(
            FakeTarget(),
            small or FakeSmall(),
            store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(
                background_builds=False, admission=admission or AdmissionConfig(), **config
            ),
        )
        made.append(mc)
        return mc

    yield factory
    for mc in made:
        mc.close()


def costs(admission: Admission, miss: float, hit: float, build: float) -> None:
    for _ in range(5):  # in a tenant of its own: costs are shared, arrivals are per tenant
        admission.observe_request("costs", "measuring", "miss", miss)
        admission.observe_request("costs", "measuring", "hit", hit)
    admission.observe_build(build, ok=True)


# -- admission ---------------------------------------------------------------------------------


def test_a_one_off_group_is_never_built_even_when_builds_look_cheap():
    admission = Admission(AdmissionConfig(warmup_requests=0))
    costs(admission, miss=100.0, hit=0.0, build=0.001)
    assert not admission.admits("t", 1)[0]
    assert admission.admits("t", 2)[0]


def test_one_off_groups_in_a_stream_are_never_built(make):
    """build_after=1 would have built every group at its first request; admission builds none."""
    mc = make(build_after=1, admission=AdmissionConfig(warmup_requests=0))
    for values in CR_VALUES[:1]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    for values in SI_VALUES[:1]:
        assert mc.solve(SIMPLE_INTEREST.ask(*values)).route == "miss"
    assert mc.target.build_calls == 0 and mc.small.calls == []
    assert (
        mc.store.list_entries("default") == []
        and mc.stats()["builds_ok"] + mc.stats()["builds_failed"] == 0
    )


def test_a_group_of_a_recurring_workload_is_built_and_one_of_a_non_recurring_one_is_not():
    recurring, one_shot = (
        Admission(AdmissionConfig(warmup_requests=0)),
        Admission(AdmissionConfig(warmup_requests=0)),
    )
    for admission in (recurring, one_shot):
        costs(admission, miss=10.0, hit=1.0, build=20.0)
    for g in range(20):  # groups that came back about 12 times each ...
        for _ in range(12):
            recurring.observe_request("t", f"g{g}", "miss", 10.0)
    for g in range(20):  # ... and groups that stopped at 3
        for _ in range(3):
            one_shot.observe_request("t", f"g{g}", "miss", 10.0)
    ok, terms = recurring.admits("t", 3)
    # 180 arrivals after the 3rd, over 20 x 240 - sum(12 g + 3) requests of exposure; horizon 240
    assert ok and terms["future"] == pytest.approx(240 * (180 + 3) / (20 * 240 - 2340 + 240))
    ok, terms = one_shot.admits("t", 3)
    assert (
        not ok
        and terms["gain_s"] < 0
        and terms["future"] == pytest.approx(60 * 3 / (20 * 60 - 630 + 60))
    )


def test_a_groups_own_failed_builds_lower_its_chance_and_a_retry_that_would_not_pay_is_refused():
    admission = Admission(AdmissionConfig(warmup_requests=0))
    costs(admission, miss=10.0, hit=1.0, build=60.0)  # one build, ok: the process's rate is 2/3
    for g in range(20):
        for _ in range(12):
            admission.observe_request("t", f"g{g}", "miss", 10.0)
    assert admission.build_success() == pytest.approx(2 / 3)
    assert [admission.build_success(k) for k in (1, 2, 3)] == pytest.approx([1 / 3, 2 / 9, 1 / 6])
    new, retry = admission.admits("t", 3), admission.admits("t", 3, failures=1)
    assert new[0] and new[1]["p_ok"] == pytest.approx(2 / 3)
    assert (
        not retry[0]
        and retry[1]["p_ok"] == pytest.approx(1 / 3)
        and retry[1]["future"] == new[1]["future"]
    )
    # No weight behind the process's rate: the group's own record alone, which has never succeeded.
    own_only = Admission(AdmissionConfig(group_prior_weight=0.0))
    assert own_only.build_success() == 0.5 and own_only.build_success(1) == 0.0


def test_a_retry_is_admitted_with_the_groups_failed_builds_counted(make):
    mc = make(
        small=FakeSmall(mode="wrong"), admission=AdmissionConfig(enabled=False), build_early=0
    )
    told = spy_on_admission(mc)
    for values in CR_VALUES[:4]:  # built at the 3rd (fails), retried at the 4th (a new example)
        mc.solve(CURRENT_RATIO.ask(*values))
    assert [t["failures"] for t in told] == [0, 1] and mc.store.list_groups("default")[
        0
    ].build_failures == 2


def _random_stream(admission: Admission, seed: int, n: int = 100, groups: int = 20) -> None:
    rng = random.Random(seed)
    for _ in range(n):
        admission.observe_request("t", f"g{rng.randrange(groups)}", "miss", 10.0)


def test_a_young_stream_is_not_read_as_one_whose_groups_stop_recurring():
    """20 groups drawn at random, 100 requests in: each recurs every 20 requests, about 5 more times
    in the next 100. Counting the arrivals each group had so far after its 2nd reads the stream's
    youth as groups that stop; the rate over the requests since each group's 2nd arrival does not."""
    admission = Admission(AdmissionConfig(warmup_requests=0))
    _random_stream(admission, seed=7)
    future = admission.expected_future("t", 2)
    assert 3.5 < future < 7.5
    counts = admission.snapshot()["arrivals"]["t"]
    censored = sum(c - 2 for c in counts.values() if c > 2) / sum(
        1 for c in counts.values() if c >= 2
    )
    assert censored < future / 1.5
    # A known horizon scales the same rate: four times the requests ahead, four times the arrivals.
    longer = Admission(AdmissionConfig(warmup_requests=0, horizon_requests=400))
    _random_stream(longer, seed=7)
    assert longer.expected_future("t", 2) == pytest.approx(4 * future)


def test_the_estimate_needs_only_running_sums_and_matches_a_recount_from_the_arrival_log():
    rng = random.Random(3)
    admission = Admission(AdmissionConfig(prior_weight=0.5))
    log = [f"g{int(rng.paretovariate(1.2)) % 30}" for _ in range(300)]
    for group in log:
        admission.observe_request("t", group, "miss", 1.0)
    for n in (2, 3, 5, 8):
        reached_at: dict[str, int] = {}  # group -> request number of its n-th arrival
        seen: dict[str, int] = {}
        more = 0
        for i, group in enumerate(log, start=1):
            seen[group] = seen.get(group, 0) + 1
            if seen[group] == n:
                reached_at[group] = i
            elif seen[group] > n:
                more += 1
        exposure = sum(300 - i for i in reached_at.values())
        assert admission.expected_future("t", n) == pytest.approx(
            300 * (more + 0.5 * n) / (exposure + 0.5 * 300)
        )


def test_hit_cost_is_the_hit_and_fallback_costs_weighed_by_a_smoothed_fallback_rate():
    """Two early fallbacks among five attempts must not make hits look like misses: the rate is
    smoothed towards fallback_prior, and each route keeps its own cost."""
    admission = Admission(AdmissionConfig(alpha=0.5, fallback_prior=0.2, prior_attempts=5.0))
    admission.observe_request("t", "g", "miss", 4.0)
    admission.observe_request("t", "g", "miss", 8.0)
    terms = admission.estimate("t", 2)  # nothing measured yet: the priors
    p = 0.2
    assert terms["p_fallback"] == pytest.approx(p)
    assert terms["hit_s"] == pytest.approx((1 - p) * 0.2 * 6.0 + p * 1.2 * 6.0)
    assert terms["build_s"] == pytest.approx(
        AdmissionConfig().build_prior * 6.0
    )  # no build measured yet
    for route, seconds in (
        ("fallback", 12.0),
        ("fallback", 10.0),
        ("hit", 0.1),
        ("hit", 0.1),
        ("hit", 0.1),
    ):
        admission.observe_request("t", "g", route, seconds)
    terms = admission.estimate("t", 2)
    p = (2 + 1) / (5 + 5)
    assert terms["miss_s"] == pytest.approx(6.0) and terms["p_fallback"] == pytest.approx(p)
    assert terms["hit_s"] == pytest.approx((1 - p) * 0.1 + p * 11.0)
    assert admission.arrivals("t", "g") == 7


def test_with_a_free_target_measured_costs_keep_builds_out_once_warmed_up(make):
    """With fake models a miss costs about what a hit does: no build can pay, so none is admitted."""
    mc = make(admission=AdmissionConfig(warmup_requests=0, hit_prior=1.0))
    for values in CR_VALUES[:4]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    assert mc.target.build_calls == 0 and mc.store.list_entries("default") == []


# -- learning from failure ---------------------------------------------------------------------


def held_questions(mc: MiniCache) -> list[list[str]]:
    """Wrap the build's validation to record which requests each candidate is checked on."""
    seen: list[list[str]] = []
    validate = mc.builder.validate

    def spy(source, held, origin, prefix, **options):
        seen.append([ex.question for ex in held])
        return validate(source, held, origin, prefix, **options)

    mc.builder.validate = spy  # type: ignore[method-assign]
    return seen


def test_requests_an_entry_failed_on_join_the_next_builds_validation_set(make):
    mc = make(use_rules=False, validate_n=2)
    for values in CR_VALUES[:3]:
        mc.solve(CURRENT_RATIO.ask(*values))
    first = mc.store.list_entries("default", "active")[0]
    mc.small.mode = "raise"
    failed = [CURRENT_RATIO.ask(*values) for values in CR_VALUES[3:6]]
    for question in failed:
        assert mc.solve(question).route == "fallback"
    assert mc.store.get_entry("default", first.id).status == "evicted"
    record = mc.store.group_failure("default", first.group_id)
    assert set(record["requests"]) == set(failed) and record["hit_errors"]
    mc.small.mode = "ok"
    seen = held_questions(mc)
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[6])).route == "miss"
    assert seen and set(failed) <= set(seen[0])  # more than validate_n: the failures were added
    rebuilt = mc.store.active_entry("default", first.group_id)
    assert rebuilt is not None and rebuilt.id != first.id
    assert mc.store.group_failure("default", first.group_id) is None  # learned: the record is spent


def test_a_request_an_entry_failed_on_vetoes_one_build_only(make):
    """The request's miss answer is one sample and may be the wrong side (on Formula's Net Present
    Value such a request vetoed all six builds). The first rebuild must answer it; once a build has failed on
    it, it is an ordinary held example and the group's agreeing programs make the entry."""
    mc = make(admission=AdmissionConfig(enabled=False), max_build_failures=6)
    for values in CR_VALUES[:3]:
        mc.solve(CURRENT_RATIO.ask(*values))
    first = mc.store.list_entries("default", "active")[0]
    question = CURRENT_RATIO.ask(*CR_VALUES[3])
    mc.hits.count_failure(
        "default", first, question, "probation: the would-be hit disagreed", evict=True
    )
    mc.target.mode = "other"  # the miss path answers this request wrong
    assert mc.solve(question).route == "miss"
    group = mc.store.get_group("default", first.group_id)
    record = mc.store.group_failure("default", first.group_id)
    assert group.build_failures == 1 and mc.store.active_entry("default", first.group_id) is None
    assert "it fails a request the group failed on before" in {
        a["error"] for a in record["attempts"]
    }
    wrong = [
        ex.id for ex in mc.store.examples("default", first.group_id) if ex.question == question
    ]
    assert record["vetoed"] == wrong
    mc.target.mode = "ok"
    seen = held_questions(mc)
    assert mc.solve(CURRENT_RATIO.ask(*CR_VALUES[4])).route == "miss"
    assert seen and question in seen[0]  # still validated on, no longer required
    rebuilt = mc.store.active_entry("default", first.group_id)
    assert rebuilt is not None and mc.store.group_failure("default", first.group_id) is None


def test_examples_a_failed_build_checked_wrong_are_validated_on_but_not_required():
    examples = [
        Example(
            id=f"ex{i}",
            tenant="t",
            group_id="g",
            question=f"q{i}",
            context=None,
            program="",
            variables={},
            answer=i,
            created_at=0.0,
        )
        for i in range(6)
    ]
    held, must = validation_set(
        examples, {"examples": ["ex0"], "requests": ["q1", "q2"], "vetoed": ["ex2"]}, 2
    )
    assert [ex.id for ex in held] == ["ex0", "ex1", "ex2", "ex4", "ex5"]
    assert must == {"ex1"}


def test_a_failed_build_records_which_examples_failed_which_check_and_the_retry_validates_on_them(
    make,
):
    mc = make(small=FakeSmall(mode="wrong"), admission=AdmissionConfig(enabled=False))
    questions = [CURRENT_RATIO.ask(*values) for values in CR_VALUES[:3]]
    for question in questions:
        mc.solve(question)
    group = mc.store.list_groups("default")[0]
    record = mc.store.group_failure("default", group.id)
    assert record["kind"] == "build" and record["failures"] == 1 and record["n_examples"] == 3
    assert record["checks"] and all(
        {"example", "expected", "got", "variables"} <= set(c) for c in record["checks"]
    )
    failing = {
        ex.question for ex in mc.store.examples("default", group.id) if ex.id in record["examples"]
    }
    assert failing and record["feedback"]
    seen = held_questions(mc)
    mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))  # the first failure waits only for a new example
    assert seen and all(failing <= set(held) for held in seen)
    assert mc.store.get_group("default", group.id).build_failures == 2


def test_the_target_is_asked_again_with_the_recorded_feedback(make):
    mc = make(small=FakeSmall(mode="wrong"), admission=AdmissionConfig(enabled=False))
    for values in CR_VALUES[:3]:
        mc.solve(CURRENT_RATIO.ask(*values))
    feedback = mc.store.group_failure("default", mc.store.list_groups("default")[0].id)["feedback"]
    mc.target.calls.clear()
    mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
    prompts = ["\n".join(m.content for m in call.messages) for call in mc.target.calls]
    assert any(feedback.splitlines()[0] in p for p in prompts)


# -- back-off ----------------------------------------------------------------------------------


def test_a_group_that_keeps_failing_backs_off_exponentially(make):
    config = AdmissionConfig(enabled=False, backoff_s=10.0)
    mc = make(small=FakeSmall(mode="wrong"), admission=config)
    waits = []
    values = iter(CR_VALUES)
    for _ in range(3):
        mc.solve(CURRENT_RATIO.ask(*next(values)))
    group_id = mc.store.list_groups("default")[0].id
    for _ in range(3):
        record = mc.store.group_failure("default", group_id)
        group = mc.store.get_group("default", group_id)
        waits.append(record["backoff_s"])
        assert group.uncacheable_until == pytest.approx(record["at"] + record["backoff_s"], abs=1.0)
        if record["backoff_s"]:  # while backing off, a new example does not retry
            builds = mc.stats()["builds_failed"]
            mc.solve(CURRENT_RATIO.ask(*next(values)))
            assert mc.stats()["builds_failed"] == builds
            group.uncacheable_until = time.time() - 1  # the back-off runs out
            mc.store.update_group(group)
        mc.solve(CURRENT_RATIO.ask(*next(values)))
    assert waits == [0.0, 10.0, 20.0]
    assert mc.store.group_failure("default", group_id)["backoff_s"] == 40.0
    assert mc.store.get_group("default", group_id).status == "uncacheable"


def test_replaying_the_observations_gives_the_state_they_gave_live():
    live, replayed = Admission(AdmissionConfig(alpha=0.3)), Admission(AdmissionConfig(alpha=0.3))
    told: list[tuple[float, bool]] = []
    replayed.on_build = lambda s, ok: told.append((s, ok))
    events = [
        ("request", "t", "g1", "miss", 4.0),
        ("request", "t", "g1", "miss", 6.5),
        ("build", 9.0, True),
        ("request", "t", "g1", "hit", 0.5),
        ("request", "t", "g2", "fallback", 7.0),
        ("build", 3.0, False),
        ("request", "u", "g1", "miss", 5.0),
    ]
    for kind, *args in events:
        (live.observe_request if kind == "request" else live.observe_build)(*args)
    replayed.replay(events)
    for n in (1, 2, 3):
        assert replayed.estimate("t", n) == live.estimate("t", n)
    assert (
        replayed.requests,
        replayed.builds_ok,
        replayed.builds_failed,
        replayed.build_s_total,
    ) == (5, 1, 1, 12.0)
    assert replayed.arrivals("t", "g1") == 3 and replayed.arrivals("u", "g1") == 1
    assert told == []  # a replayed build is not a new one
    with pytest.raises(ValueError, match="unknown admission event"):
        replayed.replay([("arrival", "t", "g1")])


def test_arrivals_a_new_entry_answers_as_misses_on_probation_bring_no_gain():
    admission = Admission(AdmissionConfig(warmup_requests=0))
    costs(admission, miss=10.0, hit=1.0, build=20.0)
    _random_stream(admission, seed=7)
    plain, on_probation = admission.estimate("t", 2), admission.estimate("t", 2, first_misses=1)
    assert on_probation["future"] == pytest.approx(plain["future"] - 1)
    assert on_probation["gain_s"] < plain["gain_s"]
    assert admission.estimate("t", 2, first_misses=100)["future"] == 0.0


# -- the target's generalization, priced by the tenant's record ---------------------------------


def test_a_generalization_is_priced_by_the_tenants_record_of_them():
    admission = Admission(
        AdmissionConfig(warmup_requests=0, horizon_requests=40, generalize_prior=8.0)
    )
    costs(admission, miss=10.0, hit=1.0, build=5.0)
    for _ in range(3):
        admission.observe_request("t", "g", "miss", 10.0)
    unmeasured = admission.generalization_estimate("t", 3, {})
    assert (unmeasured["p_ok"], unmeasured["cost_s"]) == (
        0.5,
        pytest.approx(8 * admission.miss.value),
    )
    assert admission.target_declined("t", 3, {}) is None  # 0.5 x 40 arrivals x 7.9 s > 80 s
    never_made = {"generalizations": 4, "generalizations_ok": 0, "generalize_ms": 4 * 90_000}
    terms = admission.generalization_estimate("t", 3, never_made)
    assert (terms["p_ok"], terms["cost_s"]) == (
        pytest.approx(1 / 6),
        pytest.approx(90.0),
    ) and terms["gain_s"] < 0
    reason = admission.target_declined("t", 3, never_made)
    assert (
        reason is not None
        and reason.startswith(TARGET_NOT_ADMITTED)
        and "0 of the tenant's 4" in reason
    )
    usually_made = {"generalizations": 4, "generalizations_ok": 3, "generalize_ms": 4 * 20_000}
    assert admission.target_declined("t", 3, usually_made) is None


def test_during_the_warm_up_the_target_is_asked_whatever_the_record():
    admission = Admission(AdmissionConfig(warmup_requests=100))
    admission.observe_request("t", "g", "miss", 10.0)
    record = {"generalizations": 9, "generalizations_ok": 0, "generalize_ms": 9 * 500_000}
    assert admission.generalization_estimate("t", 3, record)["gain_s"] < 0
    assert admission.target_declined("t", 3, record) is None


def generalizing(make, record: dict[str, int]) -> MiniCache:
    """An engine past its warm-up whose misses write nothing to lift (the target must generalize),
    with ``record`` as the tenant's past generalizations and costs that make the build itself pay."""
    mc = make(admission=AdmissionConfig(warmup_requests=0, horizon_requests=50))
    mc.target.mode = "constant"
    costs(mc.admission, miss=100.0, hit=0.0, build=0.001)
    for name, value in record.items():
        mc.store.bump("default", name, value)
    return mc


def test_a_tenant_whose_generalizations_never_made_an_entry_stops_asking_the_target(make):
    mc = generalizing(
        make, {"generalizations": 4, "generalizations_ok": 0, "generalize_ms": 4 * 1_000_000}
    )
    for values in CR_VALUES[:3]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    group = mc.store.list_groups("default")[0]
    assert mc.target.build_calls == 0 and mc.store.list_entries("default") == []
    attempt = mc.store.group_failure("default", group.id)["attempts"][-1]
    assert attempt["source"] == "target-build" and attempt["error"].startswith(TARGET_NOT_ADMITTED)
    assert mc.store.counters("default")["generalizations"] == 4  # nothing asked, nothing added


def test_a_generalization_asked_adds_its_outcome_and_seconds_to_the_tenants_record(make):
    mc = generalizing(make, {})
    for values in CR_VALUES[:3]:
        mc.solve(CURRENT_RATIO.ask(*values))
    entry = mc.store.list_entries("default", "active")[0]
    assert mc.target.build_calls == 1 and entry.validation["source"] == "target-build"
    stats = mc.stats()
    assert (stats["generalizations"], stats["generalizations_ok"]) == (1, 1) and stats[
        "generalize_s"
    ] >= 0


def test_a_generalization_that_fails_counts_as_asked_and_not_made(make):
    mc = generalizing(make, {})
    mc.target.build_mode = "broken"
    for values in CR_VALUES[:3]:
        mc.solve(CURRENT_RATIO.ask(*values))
    counters = mc.store.counters("default")
    assert mc.target.build_calls == 1 and counters["generalizations"] == 1
    assert counters.get("generalizations_ok", 0) == 0


# -- early builds (EngineConfig.build_early) ---------------------------------------------------


def early(make, **config) -> MiniCache:
    """An engine past admission's warm-up whose measured costs make every build pay."""
    mc = make(admission=AdmissionConfig(warmup_requests=0), **config)
    costs(mc.admission, miss=100.0, hit=0.0, build=0.001)
    return mc


def test_two_examples_whose_programs_give_each_others_answers_are_built_early_and_serve_the_third(
    make,
):
    mc = early(make)
    for values in CR_VALUES[:2]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    group = mc.store.list_groups("default")[0]
    entry = mc.store.active_entry("default", group.id)
    assert entry is not None and group.n_examples == 2 and entry.validation["passed"] == 2
    result = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[2]))
    assert result.route == "hit" and result.answer == pytest.approx(
        CURRENT_RATIO.answer(*CR_VALUES[2])
    )
    assert mc.target.build_calls == 0  # an early build never asks the target


def test_two_examples_that_disagree_wait_for_build_after_and_record_no_failure(make):
    mc = early(make)
    mc.target.mode = "other"  # the first example's program computes something else
    mc.solve(CURRENT_RATIO.ask(*CR_VALUES[0]))
    mc.target.mode = "ok"
    mc.solve(CURRENT_RATIO.ask(*CR_VALUES[1]))
    group = mc.store.list_groups("default")[0]
    assert mc.store.list_entries("default") == [] and mc.target.build_calls == 0
    assert mc.store.group_failure("default", group.id) is None and group.build_failures == 0
    assert mc.stats()["builds_failed"] == 0 and mc.admission.snapshot()["builds_failed"] == 0
    mc.solve(
        CURRENT_RATIO.ask(*CR_VALUES[2])
    )  # build_after: the two agreeing of three are a majority
    assert mc.store.active_entry("default", group.id) is not None


def test_a_request_sent_twice_does_not_back_an_early_build(make):
    mc = early(make)
    question = CURRENT_RATIO.ask(*CR_VALUES[0])
    for _ in range(2):
        mc.solve(question, force_refresh=True)
    assert mc.store.list_groups("default")[0].n_examples == 2
    assert mc.store.list_entries("default") == []


def test_no_group_is_built_early_when_switched_off(make):
    mc = early(make, build_early=0)
    for values in CR_VALUES[:2]:
        mc.solve(CURRENT_RATIO.ask(*values))
    assert mc.store.list_entries("default") == []


def test_a_group_is_built_early_during_admissions_warm_up_and_serves_its_third_request(make):
    """Admission is still warming up (nothing measured yet), yet a group whose two programs back each
    other is built on its second miss, so its third request is a hit, not a third miss."""
    mc = make()
    for values in CR_VALUES[:2]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    assert not mc.admission.trusted()
    entry = mc.store.list_entries("default")[0]
    assert entry.validation["passed"] == 2
    result = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[2]))
    assert result.route == "hit" and result.answer == pytest.approx(
        CURRENT_RATIO.answer(*CR_VALUES[2])
    )
    assert mc.target.build_calls == 0  # an early build never asks the target


# -- the small model's checks in a build, priced (Admission.model_checks_declined) ---------------


def checks_priced(make, check_ms: int) -> tuple[MiniCache, FakeSmall]:
    """An engine past the warm-up where builds pay, no alignment (held examples need the small model),
    and a tenant whose one measured build spent ``check_ms`` on the small model's checks."""
    small = FakeSmall()
    mc = make(
        small=small, admission=AdmissionConfig(warmup_requests=0), use_rules=False, build_early=0
    )
    costs(mc.admission, miss=100.0, hit=0.0, build=0.001)
    mc.store.bump("default", "model_check_builds")
    mc.store.bump("default", "model_check_ms", check_ms)
    return mc, small


def test_a_build_whose_model_checks_are_not_expected_to_pay_asks_no_model_and_records_no_failure(
    make,
):
    mc, small = checks_priced(
        make, check_ms=1_000_000
    )  # 1,000 s of checks against a few arrivals' savings
    for values in CR_VALUES[:3]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    group = mc.store.list_groups("default")[0]
    assert mc.store.list_entries("default") == [] and small.calls == []
    assert group.build_failures == 0 and mc.store.group_failure("default", group.id) is None
    counters = mc.store.counters("default")
    assert (
        counters["builds_declined"] >= 1 and counters["model_check_builds"] == 1
    )  # nothing spent, nothing added
    assert (
        mc.stats()["builds_declined"] == counters["builds_declined"]
    )  # shown by `minicache stats`, /metrics


def test_a_build_whose_model_checks_pay_asks_the_model_and_adds_its_seconds_to_the_record(make):
    mc, small = checks_priced(make, check_ms=1)
    for values in CR_VALUES[:3]:
        mc.solve(CURRENT_RATIO.ask(*values))
    assert mc.store.list_entries("default") != [] and small.calls != []
    counters = mc.store.counters("default")
    assert counters["model_check_builds"] == 2 and counters.get("builds_declined", 0) == 0


def test_model_checks_are_never_declined_before_the_estimates_are_trusted():
    admission = Admission(AdmissionConfig(warmup_requests=1000))
    costs(admission, miss=1.0, hit=0.9, build=0.001)
    record = {"model_check_builds": 1, "model_check_ms": 100_000}
    assert admission.model_checks_declined("default", 3, record) is None
    admission.config.warmup_requests = 0
    assert admission.model_checks_declined("default", 3, record).startswith(
        MODEL_CHECKS_NOT_ADMITTED
    )


def test_the_target_is_not_asked_to_generalize_when_the_small_models_checks_of_its_program_would_be_declined(
    make,
):
    """Its program would be trusted only through the small model's checks; with those declined the
    build does not pay for the generalization either, and records no failure."""
    mc = generalizing(make, {"model_check_builds": 1, "model_check_ms": 100_000_000})
    for values in CR_VALUES[:3]:
        assert mc.solve(CURRENT_RATIO.ask(*values)).route == "miss"
    group = mc.store.list_groups("default")[0]
    assert mc.target.build_calls == 0 and mc.store.list_entries("default") == []
    assert group.build_failures == 0 and mc.store.counters("default")["builds_declined"] >= 1
