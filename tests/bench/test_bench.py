"""The benchmark harness on a known stream with fake models: metrics, outputs, resumption."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from minicache.config.engine import AdmissionConfig
from minicache.programs.signature import answers_match
from minicache.sandbox import SandboxPool
from minicache_bench import regenerate_report, run_benchmark, run_seeds
from minicache_bench.baselines import GENCACHE_SYSTEM, GenCacheLike, Outcome, PoT
from minicache_bench.data import (
    BenchRequest,
    action_matches,
    is_correct,
    load,
    load_jsonl,
    pad_context,
    select,
    webshop_gold,
)
from minicache_bench.datasets import equation_skeleton
from minicache_bench.methods import METHOD_NAMES, METHODS, build_method, canonical, row_method
from minicache_bench.regenerate import main as regenerate_main
from minicache_bench.report import accuracy_latency
from minicache_bench.runner import (
    group_purity,
    percentile,
    read_done,
    record_interleaved,
    record_stream,
    route_breakdown,
    same_requests,
    summarize,
)
from minicache_bench.stats import SEED, compare, compare_all, mcnemar_exact_p
from tests.fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
)


def row(route, correct, latency, target=0, small=0, group=None, formed=None):
    return {
        "route": route,
        "correct": correct,
        "latency_s": latency,
        "tokens": {"target": target, "small": small},
        "group": group,
        "detail": {"group": formed} if formed else {},
    }


def test_summary_metrics_on_a_known_stream():
    rows = [
        row("miss", True, 4.0, target=100),
        row("miss", False, 6.0, target=120),
        row("hit", True, 0.2, small=10),
        row("hit", False, 0.4, small=12),
        row("hit", True, 0.3, small=8),
    ]
    s = summarize(rows)
    assert s["n"] == 5
    assert s["accuracy"] == pytest.approx(3 / 5)
    assert s["hit_rate"] == pytest.approx(3 / 5)
    assert s["wrong_hit_rate"] == pytest.approx(1 / 3)
    assert s["latency_s"]["mean"] == pytest.approx((4 + 6 + 0.2 + 0.4 + 0.3) / 5)
    assert s["latency_s"]["p50"] == pytest.approx(0.4)
    assert s["hit_latency_s"]["p50"] == pytest.approx(0.3)
    assert s["tokens"] == {"target": 220, "small": 30}


def test_route_breakdown_splits_hits_by_extraction_and_compares_pot_on_the_same_requests():
    def mc(i, route, extraction, correct, latency):
        return {
            "id": i,
            "route": "hit" if route == "hit" else "miss",
            "correct": correct,
            "latency_s": latency,
            "detail": {"route": route, "extraction": extraction},
        }

    rows = [
        mc(1, "miss", None, True, 4.0),
        mc(2, "hit", "rule", True, 0.1),
        mc(3, "hit", "rule", False, 0.3),
        mc(4, "hit", "choice", True, 1.5),
        mc(5, "fallback", None, False, 6.0),
    ]
    pot = [{"id": i, "correct": i != 3, "latency_s": 3.0 + i} for i in range(1, 6)]
    table = {b["route"]: b for b in route_breakdown(rows, pot)}
    assert list(table) == ["hit (choice)", "hit (rule)", "fallback", "miss"]
    assert (table["hit (rule)"]["n"], table["hit (rule)"]["accuracy"]) == (2, 0.5)
    assert table["hit (rule)"]["latency_mean"] == pytest.approx(0.2)
    assert table["hit (rule)"]["baseline_accuracy"] == 0.5  # pot got request 3 wrong too
    assert table["hit (rule)"]["baseline_latency_mean"] == pytest.approx(5.5)
    assert table["fallback"]["baseline_n"] == 1 and table["miss"]["accuracy"] == 1.0


def test_a_subset_method_is_compared_with_pot_on_its_own_requests_and_says_when_it_ran():
    t0 = 1796112000.0  # 2026-12-01 08:00 UTC
    pot = [
        {"id": i, "correct": i != 2, "latency_s": 2.0 * i, "started_at": t0 + 10 * i}
        for i in range(1, 5)
    ]
    sub = [
        {"id": i, "correct": True, "latency_s": 1.0, "started_at": t0 + 3600 + i} for i in (1, 2)
    ]
    other = [{"id": 9, "correct": True, "latency_s": 1.0}]  # a request pot never ran: no comparison
    table = {c["method"]: c for c in same_requests({"pot": pot, "exact": sub, "other": other})}
    assert set(table) == {"pot", "exact"}
    assert (table["exact"]["n"], table["exact"]["accuracy"], table["exact"]["ref_accuracy"]) == (
        2,
        1.0,
        0.5,
    )
    assert table["exact"]["ref_latency_mean"] == pytest.approx(3.0)  # pot on requests 1 and 2 only
    assert table["exact"]["speedup"] == pytest.approx(3.0)
    assert table["exact"]["measured"] == "2026-12-01 09:00 to 09:00"
    assert table["pot"]["speedup"] == pytest.approx(1.0)


def test_percentile_interpolates_between_ranks():
    assert percentile([1, 2, 3, 4], 0.5) == pytest.approx(2.5)
    assert percentile([5], 0.99) == 5
    assert percentile([], 0.5) == 0.0


def test_group_purity_counts_requests_outside_their_groups_majority():
    rows = [
        row("miss", True, 1, group="a", formed="g1"),
        row("miss", True, 1, group="a", formed="g1"),
        row("miss", True, 1, group="b", formed="g1"),
        row("miss", True, 1, group="b", formed="g2"),
    ]
    assert group_purity(rows) == {
        "groups_formed": 2,
        "labels": 2,
        "groups_per_label": 1.0,
        "purity": pytest.approx(3 / 4),
    }


def test_group_purity_says_how_many_groups_one_computation_was_split_into():
    rows = [row("miss", True, 1, group="a", formed=g) for g in ("g1", "g2", "g3")]
    rows.append(row("miss", True, 1, group="b", formed="g4"))
    assert group_purity(rows)["groups_per_label"] == 2.0  # 4 groups formed for 2 computations


def test_webshop_matcher_needs_exact_price_and_half_the_keywords():
    gold = webshop_gold(
        "i need a long clip-in hair extension which is natural looking, and price lower than "
        "40.00 dollars"
    )
    assert (
        gold["max_price"] == 40.0
        and "clip-in" in gold["keywords"]
        and "price" not in gold["keywords"]
    )
    assert action_matches(
        {"keywords": "long clip-in hair extension natural looking", "max_price": "40"}, gold
    )
    assert action_matches(
        'Search({"keywords": "clip-in hair extension natural", "max_price": 40})', gold
    )
    assert not action_matches(
        {"keywords": "long clip-in hair extension natural looking", "max_price": 50}, gold
    )
    assert not action_matches({"keywords": "shoes", "max_price": 40}, gold)
    assert webshop_gold("a red scarf")["max_price"] == 1000000.0


def _dataset(tmp_path):
    lines = []
    for i, v in enumerate(CR_VALUES[:6]):
        lines.append(
            {
                "id": f"cr{i}",
                "question": CURRENT_RATIO.ask(*v),
                "answer": CURRENT_RATIO.answer(*v),
                "group": "cr",
            }
        )
    for i, v in enumerate(SI_VALUES[:5]):
        lines.append(
            {
                "id": f"si{i}",
                "question": SIMPLE_INTEREST.ask(*v),
                "answer": SIMPLE_INTEREST.answer(*v),
                "group": "si",
            }
        )
    lines.append(
        {"id": "dup", "question": CURRENT_RATIO.ask(*CR_VALUES[0]), "answer": 1.5, "group": "cr"}
    )
    path = tmp_path / "known.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    return path


def test_jsonl_loader_rejects_lines_without_an_answer(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1, "question": "q"}\n')
    with pytest.raises(ValueError, match="missing answer"):
        load_jsonl(path)


def test_select_keeps_whole_groups_and_is_seeded(tmp_path):
    reqs = load_jsonl(_dataset(tmp_path))
    a = select(reqs, limit=None, groups=1, seed=3)
    assert {r.group for r in a} == {"cr"} and len(a) == 7
    assert [r.id for r in a] == [r.id for r in select(reqs, limit=None, groups=1, seed=3)]


def test_benchmark_writes_the_contract_and_resumes_without_recomputing(tmp_path):
    dataset = _dataset(tmp_path)
    out = tmp_path / "out"
    target, small = FakeTarget(), FakeSmall()
    with SandboxPool(size=2) as sandbox:
        kwargs = dict(
            dataset=str(dataset),
            methods=["pot", "exact", "gptcache-like", "minicache"],
            target=target,
            small=small,
            embedder=HashEmbedder(),
            out=out,
            seed=1,
            concurrency=[1, 2],
            throughput_requests=4,
            sandbox=sandbox,
            command="test",
            background_builds=False,
        )
        results = run_benchmark(**kwargs)
        calls = len(target.calls)
        again = run_benchmark(**dict(kwargs, concurrency=[]))
    methods = results["methods"]
    assert set(methods) == {"pot", "exact", "gptcache-like", "minicache"}
    for m in methods.values():
        assert m["n"] == 12
        assert set(m) >= {
            "n",
            "accuracy",
            "hit_rate",
            "wrong_hit_rate",
            "latency_s",
            "hit_latency_s",
            "tokens",
        }
        assert set(m["latency_s"]) == {"mean", "p50", "p95", "p99"}
    assert methods["pot"]["accuracy"] == 1.0 and methods["pot"]["hit_rate"] == 0.0
    assert methods["exact"]["hit_rate"] == pytest.approx(1 / 12)  # only the duplicate request
    assert methods["minicache"]["hit_rate"] > 0.3 and methods["minicache"]["accuracy"] == 1.0
    assert methods["minicache"]["routing"]["purity"] == 1.0
    routing = methods["minicache"]["routing"]
    assert routing["groups_per_label"] == routing["groups_formed"] / routing["labels"]
    assert set(methods["pot"]["throughput_rps"]) == {"1", "2"}
    lines = (out / "requests.jsonl").read_text().splitlines()
    assert (
        sum(
            json.loads(x)["method"] in {"pot", "exact", "gptcache-like", "minicache"} for x in lines
        )
        == 48
    )
    report = (out / "report.md").read_text()
    assert report.count("| pot |") == 3  # main table, throughput table, same-requests table
    assert "| exact | 12 | 100.0% | 100.0% |" in report
    assert "## Where minicache's time and errors go" in report and "| hit (rule) |" in report
    # Each method against pot with how sure the difference is, the same in results.json and report.md.
    assert set(results["paired"]["methods"]) == {"exact", "gptcache-like", "minicache"}
    for c in results["paired"]["methods"].values():
        lo, hi = c["accuracy_diff_ci95"]
        assert c["n"] == 12 and lo <= c["accuracy_diff"] <= hi
        assert c["latency_ratio_ci95"][0] <= c["latency_ratio"] <= c["latency_ratio_ci95"][1]
    assert json.loads((out / "results.json").read_text())["paired"] == results["paired"]
    assert (
        "| difference [95% CI] | McNemar p |" in report
        and "| exact | 12 | 100.0% | 100.0% | +0.0 pts" in report
    )
    assert "minicache builds: inline" in report
    build_tokens = methods["minicache"]["engine_stats"]["build_target_tokens"]
    assert f"Builds spent {build_tokens:,} target tokens." in report
    assert f"({routing['groups_per_label']:.2f} groups per computation)" in report
    for png in ("latency_cdf.png", "cold_start.png", "throughput.png", "accuracy_latency.png"):
        assert (out / png).stat().st_size > 1000
    # The rerun read every request back instead of asking the models again.
    assert len(target.calls) == calls
    assert again["methods"]["pot"]["accuracy"] == 1.0
    # ...and kept the sandbox counters measured by the first run, which live in that process only.
    assert methods["minicache"]["engine_stats"]["sandbox"]["runs"] > 0
    assert again["methods"]["minicache"]["engine_stats"] == methods["minicache"]["engine_stats"]


@pytest.mark.parametrize(("limit", "held_out"), [(6, True), (None, False)])
def test_throughput_is_measured_on_held_out_requests_or_says_it_is_not(
    tmp_path, capsys, limit, held_out
):
    """Throughput on requests the caches already served flatters them: the run uses requests of the
    stream's groups left out of the stream, and when there are none it says so (stderr, results, report)."""
    out = tmp_path / "out"
    with SandboxPool(size=2) as sandbox:
        results = run_benchmark(
            dataset=str(_dataset(tmp_path)),
            methods=["pot"],
            target=FakeTarget(),
            small=FakeSmall(),
            embedder=HashEmbedder(),
            out=out,
            limit=limit,
            seed=1,
            concurrency=[1],
            throughput_requests=3,
            sandbox=sandbox,
            command="test",
        )
    assert results["config"]["throughput_held_out"] is held_out
    report = (out / "report.md").read_text()
    warned = "favourable to them" in capsys.readouterr().err
    assert warned is not held_out
    assert ("held-out requests of the stream's groups" in report) is held_out
    assert ("already seen by the caches" in report) is not held_out


def test_throughput_runs_record_each_requests_row_and_report_their_accuracy(tmp_path):
    """The requests served under load are scored like the stream's: each gets a row
    (METHOD@cC) in requests.jsonl, and results.json and the report give their accuracy."""
    known = [json.loads(x) for x in _dataset(tmp_path).read_text().splitlines()]
    for x in known:  # golds the fake target cannot match: some throughput answers are wrong
        x["answer"] = -1.0 if x["group"] == "si" else x["answer"]
    dataset = tmp_path / "half_wrong.jsonl"
    dataset.write_text("\n".join(json.dumps(x) for x in known), encoding="utf-8")
    out = tmp_path / "out"
    with SandboxPool(size=2) as sandbox:
        results = run_seeds(
            dataset=str(dataset),
            methods=["pot", "minicache"],
            target=FakeTarget(),
            small=FakeSmall(),
            embedder=HashEmbedder(),
            out=out,
            limit=6,
            seeds=[1, 2],
            concurrency=[1, 2],
            throughput_requests=5,
            sandbox=sandbox,
            command="test",
            background_builds=False,
        )
    assert set(results["methods"]) == {"pot", "minicache"}  # throughput rows are not methods
    for seed in (1, 2):
        run = json.loads((out / f"seed{seed}" / "results.json").read_text())
        rows = [
            json.loads(x) for x in (out / f"seed{seed}" / "requests.jsonl").read_text().splitlines()
        ]
        for name in ("pot", "minicache"):
            for c in ("1", "2"):
                mine = [r for r in rows if r["method"] == f"{name}@c{c}"]
                assert len(mine) == 5 and all(
                    {"answer", "correct", "latency_s"} <= set(r) for r in mine
                )
                assert all(r["correct"] == (r["group"] == "cr") for r in mine)
                accuracy = run["methods"][name]["throughput_accuracy"][c]
                assert accuracy == sum(r["correct"] for r in mine) / 5
                assert f" ({accuracy:.1%})" in (out / f"seed{seed}" / "report.md").read_text()
        assert 0 < accuracy < 1  # both groups were among the held-out requests
        assert "accuracy of those answers" in (out / f"seed{seed}" / "report.md").read_text()


def test_pad_context_reruns_the_first_requests_with_filler_and_reports_each_length(tmp_path):
    dataset = _dataset(tmp_path)
    out = tmp_path / "out"
    target = FakeTarget()
    with SandboxPool(size=2) as sandbox:
        kwargs = dict(
            dataset=str(dataset),
            methods=["pot", "minicache"],
            target=target,
            small=FakeSmall(),
            embedder=HashEmbedder(),
            out=out,
            seed=1,
            pad_tokens=[0, 300],
            pad_requests=4,
            sandbox=sandbox,
            command="test",
        )
        results = run_benchmark(**kwargs)
        calls = len(target.calls)
        again = run_benchmark(**kwargs)
        calls_after_rerun = len(target.calls)
        longer = run_benchmark(**dict(kwargs, pad_tokens=[0, 300, 600]))
    stream = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    for name in ("pot", "minicache"):
        per = results["methods"][name]["pad_context"]
        assert set(per) == {"0", "300"} and all(m["n"] == 4 for m in per.values())
        assert (
            per["300"]["accuracy"] == 1.0
        )  # the filler carries no numbers, so the fake still answers right
        tagged = [r["id"] for r in stream if r["method"] == f"{name}@pad300"]
        main = [r["id"] for r in stream if r["method"] == name]
        assert tagged == main[:4]  # the stream's first requests, served again after it
    # By the time the padded requests come, minicache has entries for them; pot never hits.
    assert results["methods"]["minicache"]["pad_context"]["300"]["hit_rate"] > 0
    assert results["methods"]["pot"]["pad_context"]["300"]["hit_rate"] == 0
    report = (out / "report.md").read_text()
    assert "## Long-context robustness" in report and "| pot | 300 | 4 | 100.0% | 0.0% |" in report
    # A rerun reads the padded rows back too: no model call, and the measured engine stats stay.
    assert calls_after_rerun == calls
    assert (
        again["methods"]["minicache"]["engine_stats"]
        == results["methods"]["minicache"]["engine_stats"]
    )
    # A new length serves only padded requests: the stream's snapshot, taken before them, stays.
    assert set(longer["methods"]["pot"]["pad_context"]) == {"0", "300", "600"}
    assert (
        longer["methods"]["minicache"]["engine_stats"]
        == results["methods"]["minicache"]["engine_stats"]
    )


def test_pad_context_adds_about_the_asked_tokens_before_the_context():
    request = BenchRequest("r", "What is 2 + 2?", 4.0, "The table.", "g", "numeric", {})
    padded = pad_context(request, 400)
    filler = padded.context[: -len("The table.")]
    assert padded.context.endswith("\n\nThe table.") and padded.question == request.question
    assert 250 <= len(filler.split()) <= 320  # about 0.75 words per token
    assert not any(ch.isdigit() for ch in filler) and padded.meta["pad"] == 400
    assert pad_context(request, 0) is request
    # Each request gets its own filler: a shared one would be a prompt prefix the KV cache reuses.
    other = pad_context(
        BenchRequest("s", "What is 3 + 3?", 6.0, "The table.", "g", "numeric", {}), 400
    )
    assert other.context[:200] != padded.context[:200]
    assert pad_context(request, 400) == padded  # and the same one on every run


def test_a_failing_program_is_recorded_as_a_wrong_answer_with_its_error(tmp_path):
    dataset = _dataset(tmp_path)
    with SandboxPool(size=1) as sandbox:
        results = run_benchmark(
            dataset=str(dataset),
            methods=["pot"],
            target=FakeTarget(mode="broken"),
            small=FakeSmall(),
            embedder=HashEmbedder(),
            out=tmp_path / "o",
            sandbox=sandbox,
        )
    rows = [json.loads(x) for x in (tmp_path / "o" / "requests.jsonl").read_text().splitlines()]
    assert results["methods"]["pot"]["accuracy"] == 0.0
    assert all(r["tokens"]["small"] == 0 and "error" in r["detail"] for r in rows)


REGEX_PROGRAM = """```python
import re

def extract(text):
    assets = re.search(r"current assets are \\$([0-9.]+)", text)
    liabilities = re.search(r"current liabilities are \\$([0-9.]+)", text)
    return {"assets": float(assets.group(1)), "liabilities": float(liabilities.group(1))}

def solve(assets, liabilities):
    return assets / liabilities
```"""


class GenCacheTarget(FakeTarget):
    """FakeTarget that answers GenCache's build prompt with a fixed extractor + program."""

    def __init__(self, build_reply: str) -> None:
        super().__init__()
        self.build_reply = build_reply

    def _reply(self, messages, options):
        if messages[0].content == GENCACHE_SYSTEM:
            self.build_calls += 1
            return self.build_reply
        return super()._reply(messages, options)


def _gencache_stream():
    return [
        BenchRequest(
            id=f"cr{i}", question=CURRENT_RATIO.ask(*v), answer=CURRENT_RATIO.answer(*v), group="cr"
        )
        for i, v in enumerate(CR_VALUES[:8])
    ]


def test_gencache_builds_at_nu_examples_and_then_answers_by_regex_without_the_target():
    target = GenCacheTarget(REGEX_PROGRAM)
    with SandboxPool(size=1) as sandbox:
        method = GenCacheLike(PoT(target, sandbox), target, sandbox, HashEmbedder())
        outcomes = [method.solve(r) for r in _gencache_stream()]
    routes = [o.route for o in outcomes]
    assert routes == ["miss"] * 4 + ["hit"] * 4  # nu = 4 examples, then the accepted entry serves
    assert outcomes[3].detail["build"] == {"passed": 4, "of": 4, "accepted": True, "error": None}
    assert target.build_calls == 1 and target.miss_calls == 4
    for o, r in zip(outcomes, _gencache_stream(), strict=True):
        assert answers_match(o.answer, r.answer)


def test_gencache_records_a_rejected_build_and_stops_after_its_attempts():
    target = GenCacheTarget(
        "```python\ndef extract(text):\n    return {}\n\ndef solve():\n    return 0\n```"
    )
    with SandboxPool(size=1) as sandbox:
        method = GenCacheLike(PoT(target, sandbox), target, sandbox, HashEmbedder())
        outcomes = [method.solve(r) for r in _gencache_stream()]
    assert all(o.route == "miss" for o in outcomes)
    builds = [o.detail["build"] for o in outcomes if o.detail.get("build")]
    assert builds == [{"passed": 0, "of": 4, "accepted": False, "error": None}] * 2  # attempts = 2
    assert target.build_calls == 2


# -- how sure a difference is (minicache_bench/stats.py) ------------------------------------------


def paired_rows(correct, latency, ids=None, seed=None):
    ids = ids or range(len(correct))
    return [
        {
            "id": i,
            "correct": c,
            "latency_s": t,
            "route": "miss",
            "tokens": {"target": 0, "small": 0},
            **({"seed": seed} if seed is not None else {}),
        }
        for i, c, t in zip(ids, correct, latency, strict=True)
    ]


def test_identical_rows_give_a_zero_difference_a_degenerate_interval_and_p_one():
    rng = random.Random(5)
    rows = paired_rows(
        [rng.random() < 0.6 for _ in range(50)], [rng.uniform(1, 9) for _ in range(50)]
    )
    c = compare(rows, [dict(r) for r in rows], resamples=500)
    assert c["n"] == 50 and c["accuracy_diff"] == 0.0 and c["accuracy_diff_ci95"] == [0.0, 0.0]
    assert c["discordant"] == {"method_only": 0, "ref_only": 0} and c["mcnemar_p"] == 1.0
    assert c["latency_ratio"] == pytest.approx(1.0) and c["latency_ratio_ci95"] == pytest.approx(
        [1.0, 1.0]
    )


def test_a_constant_2x_latency_gives_a_speedup_interval_of_exactly_2():
    rng = random.Random(6)
    ref = paired_rows([True] * 40, [rng.uniform(2, 30) for _ in range(40)])
    fast = paired_rows([True] * 40, [r["latency_s"] / 2 for r in ref])
    c = compare(fast, ref, resamples=500)
    assert c["latency_ratio"] == pytest.approx(2.0)
    assert c["latency_ratio_ci95"] == pytest.approx([2.0, 2.0])


def test_mcnemar_exact_p_on_known_discordant_counts():
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(0, 6) == pytest.approx(2 / 64)  # all six disagreements one way
    assert mcnemar_exact_p(5, 1) == pytest.approx(
        2 * 7 / 64
    )  # P(X <= 1) for Binomial(6, 1/2), doubled
    assert mcnemar_exact_p(3, 3) == 1.0


def test_a_real_gap_is_separated_a_small_one_is_not_and_the_same_rows_give_the_same_interval():
    ref = paired_rows([i % 2 == 0 for i in range(200)], [10.0] * 200)
    # The method is right on 30 requests the reference got wrong, wrong on none it got right.
    better = paired_rows(
        [i % 2 == 0 or i < 60 for i in range(200)], [5.0 + (i % 7) for i in range(200)]
    )
    c = compare(better, ref, resamples=2000)
    assert c["accuracy_diff"] == pytest.approx(0.15) and c["discordant"] == {
        "method_only": 30,
        "ref_only": 0,
    }
    lo, hi = c["accuracy_diff_ci95"]
    assert 0 < lo < 0.15 < hi and c["mcnemar_p"] < 1e-8
    assert c == compare(better, ref, resamples=2000)  # fixed seed: reports are reproducible
    # One request of 200 apart (0.5 points): the interval holds 0 and McNemar says so too.
    close = paired_rows([r["correct"] or r["id"] == 1 for r in ref], [10.0] * 200)
    c = compare(close, ref, resamples=2000)
    assert c["accuracy_diff_ci95"][0] <= 0 <= c["accuracy_diff_ci95"][1] and c["mcnemar_p"] == 1.0


def test_pooled_rows_are_paired_by_seed_and_request_not_by_id_alone():
    ref = paired_rows([True, False], [4.0, 4.0], ids=["a", "a"])
    ref[0]["seed"], ref[1]["seed"] = 1, 2
    rows = paired_rows([True, True], [2.0, 1.0], ids=["a", "a"])
    rows[0]["seed"], rows[1]["seed"] = 1, 2
    c = compare(rows, ref, resamples=200)
    assert c["n"] == 2 and c["discordant"] == {"method_only": 1, "ref_only": 0}
    assert c["latency_ratio"] == pytest.approx(8.0 / 3.0)


def test_compare_all_covers_every_method_but_the_reference():
    ref = paired_rows([True] * 5, [2.0] * 5)
    block = compare_all(
        {"pot": ref, "minicache": paired_rows([True] * 5, [1.0] * 5), "empty": []},
        "pot",
        resamples=100,
    )
    assert block["reference"] == "pot" and set(block["methods"]) == {"minicache"}
    assert block["methods"]["minicache"]["latency_ratio"] == pytest.approx(2.0)
    assert compare_all({"minicache": ref}, None) is None


# -- method names, and reports regenerated from committed rows ------------------------------------


def test_the_reimplemented_baselines_are_named_for_what_they_are_and_the_old_names_still_work():
    """``gencache`` is still read as the re-implementation; ``gptcache`` is now the library, and only
    rows and results written by the re-implementation under that name are read as gptcache-like."""
    assert canonical("gencache") == "gencache-like" and canonical("gptcache") == "gptcache"
    assert canonical("pot@pad512") == "pot@pad512"
    assert {"gptcache", "gencache", "gptcache-like", "gencache-like"} <= set(METHODS)
    assert "gencache" not in METHOD_NAMES and "gptcache" in METHOD_NAMES
    assert row_method({"method": "gptcache", "detail": {"similarity": 0.97}}) == "gptcache-like"
    assert (
        row_method({"method": "gptcache", "detail": {"library": "gptcache==0.1.44"}}) == "gptcache"
    )
    with SandboxPool(size=1) as sandbox:
        for old, new in (("gencache", "gencache-like"),):
            method = build_method(
                old, FakeTarget(), FakeSmall(), sandbox, HashEmbedder(), ":memory:"
            )
            assert method.name == new


def _committed_folder(tmp_path):
    """A results folder as an earlier harness wrote it: method 'gptcache', no paired block."""
    out = tmp_path / "old"
    out.mkdir()
    rng = random.Random(9)
    pot = paired_rows(
        [rng.random() < 0.7 for _ in range(30)], [rng.uniform(5, 9) for _ in range(30)]
    )
    gpt = paired_rows([r["correct"] for r in pot], [r["latency_s"] / 2 for r in pot])
    mc = paired_rows([r["correct"] for r in pot], [r["latency_s"] for r in pot])
    lines = [
        dict(r, method=name)
        for name, rs in (("pot", pot), ("gptcache", gpt), ("minicache", mc))
        for r in rs
    ]
    (out / "requests.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    results = {
        "config": {
            "dataset": "formula",
            "methods": ["pot", "gptcache", "minicache"],
            "command": "old cmd",
            "subset": {"gptcache": 30},
        },
        "machine": {"cpus": 2},
        "methods": {"pot": summarize(pot), "gptcache": summarize(gpt), "minicache": summarize(mc)},
    }
    (out / "results.json").write_text(json.dumps(results))
    return out, results


def test_a_committed_report_is_regenerated_from_its_rows_with_intervals_and_current_names(tmp_path):
    out, before = _committed_folder(tmp_path)
    assert regenerate_main([str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert list(results["methods"]) == ["pot", "gptcache-like", "minicache"]
    assert (
        results["methods"]["gptcache-like"] == before["methods"]["gptcache"]
    )  # measured blocks kept
    assert (
        results["config"]["subset"] == {"gptcache-like": 30}
        and results["config"]["command"] == "old cmd"
    )
    paired = results["paired"]
    assert paired["reference"] == "pot" and paired["seed"] == SEED
    assert paired["methods"]["gptcache-like"]["latency_ratio_ci95"] == pytest.approx([2.0, 2.0])
    assert paired["methods"]["minicache"]["accuracy_diff_ci95"] == [0.0, 0.0]
    report = (out / "report.md").read_text()
    assert "| gptcache-like | 30 |" in report and "| gptcache |" not in report
    assert "+0.0 pts [+0.0, +0.0] | 1 |" in report and "| [2.00, 2.00] |" in report
    assert (out / "accuracy_latency.png").stat().st_size > 1000
    first = (out / "report.md").read_text()
    regenerate_report(out)
    assert (out / "report.md").read_text() == first  # the same rows give the same report


def test_regenerate_refuses_folders_without_results_and_writes_none(tmp_path, capsys):
    out, _ = _committed_folder(tmp_path)
    assert regenerate_main([str(out), str(tmp_path / "nowhere")]) == 1
    assert "no results.json" in capsys.readouterr().err
    assert not (out / "report.md").exists()
    assert regenerate_main([]) == 2


def test_a_rerun_under_the_new_name_reads_back_rows_written_under_the_old_one(tmp_path):
    dataset = _dataset(tmp_path)
    out = tmp_path / "out"
    target = FakeTarget()
    with SandboxPool(size=2) as sandbox:
        kwargs = dict(
            dataset=str(dataset),
            target=target,
            small=FakeSmall(),
            embedder=HashEmbedder(),
            out=out,
            seed=1,
            sandbox=sandbox,
            command="test",
        )
        run_benchmark(methods=["pot", "gptcache-like"], **kwargs)
        calls = len(target.calls)
        # As an earlier harness wrote them: rows and results under the old name.
        path = out / "requests.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        path.write_text(
            "".join(
                json.dumps(dict(r, method=r["method"].replace("-like", ""))) + "\n" for r in rows
            )
        )
        old = json.loads((out / "results.json").read_text())
        old["methods"] = {k.replace("-like", ""): v for k, v in old["methods"].items()}
        del old["config"]["format"]
        (out / "results.json").write_text(json.dumps(old))
        again = run_benchmark(
            methods=["pot", "gptcache-like"], subset={"gptcache-like": 12}, **kwargs
        )
    assert len(target.calls) == calls and list(again["methods"]) == ["pot", "gptcache-like"]
    assert len((out / "requests.jsonl").read_text().splitlines()) == len(
        rows
    )  # nothing served again
    assert again["paired"]["methods"]["gptcache-like"]["n"] == 12


def test_the_accuracy_latency_plot_starts_at_zero_and_draws_each_methods_intervals():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = random.Random(3)
    pot = paired_rows(
        [rng.random() < 0.84 for _ in range(100)], [rng.uniform(5, 7) for _ in range(100)]
    )
    mc = paired_rows(
        [rng.random() < 0.85 for _ in range(100)], [rng.uniform(0.5, 4) for _ in range(100)]
    )
    rows = {"pot": pot, "minicache": mc}
    results = {"methods": {name: summarize(rs) for name, rs in rows.items()}}
    fig, ax = plt.subplots()
    accuracy_latency(ax, results, rows)
    assert ax.get_xlim()[0] == 0 and ax.get_ylim() == (
        0,
        1.02,
    )  # not zoomed onto two points near 0.85
    bars = [c for c in ax.containers if c.has_xerr and c.has_yerr]
    assert len(bars) == 2  # one 95% interval cross per method with rows
    plt.close(fig)


# -- long runs in chunks: minicache's admission carried from one call to the next -------------------


def _long_dataset(tmp_path):
    """17 requests of two groups: every value set of the fakes, and cr0 asked again."""
    lines = [
        {
            "id": f"cr{i}",
            "question": CURRENT_RATIO.ask(*v),
            "answer": CURRENT_RATIO.answer(*v),
            "group": "cr",
        }
        for i, v in enumerate(CR_VALUES)
    ]
    lines += [
        {
            "id": f"si{i}",
            "question": SIMPLE_INTEREST.ask(*v),
            "answer": SIMPLE_INTEREST.answer(*v),
            "group": "si",
        }
        for i, v in enumerate(SI_VALUES)
    ]
    lines.append(dict(lines[0], id="dup"))
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    return path


def _minicache_routes(out, method="minicache"):
    """(request, route, group) per row of ``method``, in stream order; groups by order of first
    appearance (their ids are random)."""
    rows = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    order: dict[str, int] = {}
    rows = sorted((r for r in rows if r["method"] == method), key=lambda r: r["started_at"])
    return [
        (
            r["id"],
            r["detail"].get("route", r["route"]),
            order.setdefault(r["detail"].get("group"), len(order)),
        )
        for r in rows
    ]


def _whole_and_chunked(tmp_path, admission, methods=("pot", "minicache"), name="minicache"):
    """The same stream in one call, and in calls of 4 more requests each; ``name``'s results blocks."""
    dataset = _long_dataset(tmp_path)
    with SandboxPool(size=2) as sandbox:
        kwargs = dict(
            dataset=str(dataset),
            methods=list(methods),
            small=FakeSmall(),
            embedder=HashEmbedder(),
            seed=2,
            sandbox=sandbox,
            command="test",
            background_builds=False,
            admission=admission,
        )
        whole = run_benchmark(target=FakeTarget(), out=tmp_path / "whole", **kwargs)
        for limit in (4, 8, 12, 16, 17):
            chunked = run_benchmark(
                target=FakeTarget(), out=tmp_path / "chunks", limit=limit, **kwargs
            )
    return whole["methods"][name], chunked["methods"][name]


def test_a_stream_run_in_chunks_takes_the_same_routes_as_one_continuous_run(tmp_path):
    """Once warmed up (1 request), admission's estimates reject every build here: with no build
    measured yet a build is priced at 100 misses (build_prior), which no arrival count pays back, and
    the sign does not depend on the measured seconds. A chunk that forgot the earlier requests would
    be in its warm-up again, where every group seen twice is admitted, and would build and hit."""
    whole, chunked = _whole_and_chunked(
        tmp_path, AdmissionConfig(warmup_requests=1, build_prior=100.0)
    )
    routes = _minicache_routes(tmp_path / "whole")
    assert len(routes) == 17 and {route for _, route, _ in routes} == {"miss"}
    assert whole["engine_stats"]["builds_ok"] == 0
    assert _minicache_routes(tmp_path / "chunks") == routes
    assert chunked["n"] == 17 and chunked["engine_stats"]["builds_ok"] == 0


def test_a_stream_that_builds_and_hits_takes_the_same_routes_in_chunks(tmp_path):
    """Builds admitted (a long warm-up): entries, rules and the route index come back from the store
    in each chunk, and the hits fall on the same requests as in one run."""
    whole, chunked = _whole_and_chunked(tmp_path, AdmissionConfig(warmup_requests=1000))
    routes = _minicache_routes(tmp_path / "whole")
    assert (
        whole["engine_stats"]["builds_ok"] >= 2
        and sum(route == "hit" for _, route, _ in routes) >= 5
    )
    assert _minicache_routes(tmp_path / "chunks") == routes
    assert chunked["engine_stats"]["builds_ok"] == whole["engine_stats"]["builds_ok"]
    assert chunked["build_compute_s"] > 0 and chunked["tail_builds"]["builds"] == []


@pytest.mark.parametrize("method", ["exact", "gptcache-like"])
def test_the_prompt_caches_answer_from_earlier_chunks_as_in_one_run(tmp_path, method):
    """exact and gptcache-like refill their caches from the rows read back: the repeated request
    hits in a later chunk than its first asking, as it does in one run."""
    whole, chunked = _whole_and_chunked(tmp_path, None, methods=("pot", method), name=method)
    routes = _minicache_routes(tmp_path / "whole", method)
    ids = [i for i, _, _ in routes]
    assert ids.index("dup") // 4 > ids.index("cr0") // 4  # asked again in a later chunk
    assert ("dup", "hit", 0) in [(i, route, 0) for i, route, _ in routes]
    assert _minicache_routes(tmp_path / "chunks", method) == routes
    assert chunked["hit_rate"] == whole["hit_rate"] > 0


def _rows_in_stream_order(path, stream):
    done = read_done(path)
    return [(r, done[("minicache", str(r.id))]) for r in stream]


def test_resume_restores_exactly_the_admission_state_the_rows_were_served_with(tmp_path):
    """Builds, hits and misses: a fresh engine resumed from the rows (and the builds after the last
    row) holds the same estimates, to the bit, as the engine that served them."""
    stream = select(load_jsonl(_long_dataset(tmp_path)), limit=None, groups=None, seed=2)
    with SandboxPool(size=2) as sandbox:

        def make(path, background):
            return build_method(
                "minicache",
                FakeTarget(),
                FakeSmall(),
                sandbox,
                HashEmbedder(),
                str(path),
                background_builds=background,
                admission=AdmissionConfig(warmup_requests=1000),
            )

        for background in (False, True):
            served = make(tmp_path / f"served{background}.db", background)
            rows = record_stream(served, stream, tmp_path / f"requests{background}.jsonl")
            served.engine.wait_for_builds()
            tail = served.tail()
            assert served.engine.admission.builds_ok >= 2
            # Inline builds make hits certain; with background builds whether a build finishes
            # before its group's next request is a race the fast fake models can lose (seen in CI).
            assert background or any(r["route"] == "hit" for r in rows)
            resumed = make(tmp_path / f"resumed{background}.db", background)
            resumed.resume(
                _rows_in_stream_order(tmp_path / f"requests{background}.jsonl", stream), tail
            )
            assert resumed.engine.admission.snapshot() == served.engine.admission.snapshot()
            for m in (served, resumed):
                m.engine.close()


def test_builds_after_the_last_row_are_replayed_once_and_carried_into_the_next_row(tmp_path):
    dataset = _long_dataset(tmp_path)
    stream = select(load_jsonl(dataset), limit=None, groups=None, seed=2)
    timings = {"route_s": 0.5, "miss_s": 1.5, "total_s": 2.5}
    first = {
        "id": stream[0].id,
        "detail": {"route": "miss", "group": "g1", "timings": timings, "builds": [[3.0, True]]},
    }
    second = {
        "id": stream[1].id,
        "detail": {"route": "miss", "group": "g1", "timings": timings, "builds": [[4.0, False]]},
    }
    tail = {
        "after": stream[0].id,
        "builds": [[4.0, False]],
    }  # the tail the second row then recorded
    with SandboxPool(size=2) as sandbox:

        def make():
            return build_method(
                "minicache",
                FakeTarget(),
                FakeSmall(),
                sandbox,
                HashEmbedder(),
                str(tmp_path / f"mc{random.random()}.db"),
                background_builds=False,
            )

        later = make()
        # A row came after the tail: the tail's builds are in that row, and count once.
        later.resume([(stream[0], first), (stream[1], second)], tail)
        a = later.engine.admission
        assert (
            a.build.n,
            a.builds_ok,
            a.builds_failed,
            a.requests,
            a.arrivals("default", "g1"),
        ) == (2, 1, 1, 2, 2)
        assert a.miss.value == pytest.approx(2.0) and a.build_s_total == pytest.approx(7.0)

        next_chunk = make()
        # The tail is the last thing observed: replayed, then carried into the next row.
        next_chunk.resume([(stream[0], first)], tail)
        a = next_chunk.engine.admission
        assert (a.build.n, a.builds_ok, a.builds_failed, a.requests) == (2, 1, 1, 1)
        out = next_chunk.solve(stream[1])
        assert out.detail["builds"] == [[4.0, False]] and out.detail["build_s"] == 4.0
        assert next_chunk.tail() == {"after": stream[1].id, "builds": []}
        for m in (later, next_chunk):
            m.engine.close()


def test_the_chunk_loop_raises_the_limit_logs_the_load_and_stops_at_a_stop_file(tmp_path):
    """scripts/bench_chunks.sh with a fake ``minicache`` that records its arguments."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "bench_chunks.sh"
    calls, out = tmp_path / "calls.txt", tmp_path / "out"
    fake = tmp_path / "minicache"
    fake.write_text(
        f'#!/usr/bin/env bash\necho "$*" >> {calls}\n'
        f'if [[ "$*" == *"--limit 8 "* ]]; then touch {out}/STOP; fi\n'
    )
    fake.chmod(0o755)

    def loop(*args):
        return subprocess.run(
            ["bash", str(script), *args],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "MINICACHE": str(fake)},
        )

    first = loop(str(out), "4", "10", "--", "--dataset", "formula", "--methods", "pot,minicache")
    assert first.returncode == 0 and "STOP exists" in first.stderr
    assert calls.read_text().splitlines() == [
        f"bench --dataset formula --methods pot,minicache --limit {n} --out {out}" for n in (4, 8)
    ]
    log = (out / "load.log").read_text().splitlines()
    assert [x.split(":")[0] for x in log[:4]] == [
        "limit 4 before",
        "limit 4 after",
        "limit 8 before",
        "limit 8 after",
    ]
    assert all("load average" in x for x in log) and "stopped before limit 10" in log[-1]
    (out / "STOP").unlink()
    calls.unlink()
    assert loop(str(out), "4", "10", "--", "--dataset", "formula").returncode == 0
    assert [c.split("--limit ")[1].split()[0] for c in calls.read_text().splitlines()] == [
        "10"
    ]  # resumed
    assert (out / "chunks.done").read_text().strip() == "10"
    refused = loop(str(out), "4", "10", "--", "--dataset", "formula", "--out", "elsewhere")
    assert refused.returncode == 2 and "do not pass --out" in refused.stderr
    refused = loop(str(out), "4", "10", "--", "--dataset", "formula", "--concurrency", "1,4")
    assert refused.returncode == 2 and "do not pass --concurrency" in refused.stderr
    fake.write_text(
        "#!/usr/bin/env bash\nexit 3\n"
    )  # a call that fails: the loop stops with its status
    failed = loop(str(tmp_path / "other"), "4", "10", "--", "--dataset", "formula")
    assert failed.returncode == 3 and not (tmp_path / "other" / "chunks.done").exists()
    assert (
        "exit 3" in (tmp_path / "other" / "load.log").read_text().splitlines()[1]
    )  # "limit 4 after: ... exit 3"


# -- SVAMP and the streams with no repetition ------------------------------------------------------


def test_svamp_loads_its_1000_problems_with_float_golds_and_27_equation_skeletons():
    requests = load("svamp")
    assert len(requests) == 1000 and len({r.id for r in requests}) == 1000
    assert all(
        isinstance(r.answer, float) and r.kind == "numeric" and r.context is None for r in requests
    )
    first = requests[0]  # chal-1, as published: the body has no full stop before the question
    assert first.id == "svamp-chal-1" and first.answer == 51.0 and first.group == "N-N"
    assert first.question == (
        "Each pack of dvds costs 76 dollars. If there is a discount of 25 dollars on each pack "
        "How much do you have to pay to buy each pack?"
    )
    labels = Counter(r.group for r in requests)
    # The data's own count: 27 skeletons (as shared/data/SOURCES.md says), from 404 "N-N" down to
    # six seen once (one of them "N": an equation that is a bare number).
    assert len(labels) == 27
    assert labels["N-N"] == 404 and labels["(N+N)-N"] == 48 and labels["N"] == 1
    assert sum(1 for n in labels.values() if n == 1) == 6


def test_an_equation_skeleton_masks_numbers_signs_and_the_outer_parentheses():
    assert equation_skeleton("( 76.0 - 25.0 )") == "N-N"
    assert equation_skeleton("$1,200 - $300") == equation_skeleton("(1200-300)") == "N-N"
    assert equation_skeleton("( ( 5.0 + 3.0 ) - 2.0 )") == "(N+N)-N"
    assert equation_skeleton("( 5.0 - ( 3.0 + 2.0 ) )") == "N-(N+N)"  # not the same computation
    assert (
        equation_skeleton("(1-1)/(2+2)") == "(N-N)/(N+N)"
    )  # the outer pair only when it encloses all
    assert equation_skeleton("[(12.5% + 3%)/2]") == "(N+N)/N"


def test_svamp_answers_are_scored_with_the_numeric_tolerance():
    request = load("svamp")[0]
    assert is_correct(request, "51") and is_correct(request, 51) and is_correct(request, "51.004")
    assert (
        not is_correct(request, "51.5")
        and not is_correct(request, None)
        and not is_correct(request, "fifty")
    )


def test_the_300_request_svamp_stream_is_the_seeded_prefix_of_the_full_shuffle():
    everything = load("svamp")
    stream = [r.id for r in select(everything, limit=300, groups=None, seed=0)]
    full = [r.id for r in select(everything, limit=None, groups=None, seed=0)]
    assert len(stream) == 300 and stream == full[:300]
    assert [r.id for r in select(everything, limit=100, groups=None, seed=0)] == stream[
        :100
    ]  # chunks extend it
    assert stream != [r.id for r in select(everything, limit=300, groups=None, seed=1)]


@pytest.mark.parametrize(
    "dataset, labels",
    [
        ("tatqa-distinct", 67),
        ("svamp-distinct", 27),
        ("formula-distinct", 50),
        ("mix-distinct", 144),
    ],
)
def test_a_distinct_stream_has_one_request_per_gold_group(dataset, labels):
    requests = load(dataset)
    base = load(dataset.removesuffix("-distinct"))
    assert (
        len(requests) == labels == len({r.group for r in base})
    )  # every label of the dataset, once
    assert len({r.group for r in requests}) == len(requests)
    first = {}
    for r in base:
        first.setdefault(r.group, r.id)
    assert [r.id for r in requests] == list(
        first.values()
    )  # the first of each group, in file order


def test_the_100_request_no_repetition_stream_mixes_datasets_without_repeating_a_group():
    stream = select(load("mix-distinct"), limit=100, groups=None, seed=0)
    assert len(stream) == 100 and len({r.group for r in stream}) == 100
    assert {r.group.split(":")[0] for r in stream} == {"formula", "tatqa", "svamp"}
    # TAT-QA alone has 67 computations (derivation skeletons) among its 1,417 arithmetic questions.
    assert len(load("tatqa-distinct")) < 100


def test_an_unknown_dataset_is_refused_with_the_names_that_exist():
    with pytest.raises(ValueError, match="svamp.*NAME-distinct"):
        load("svamp-unique")
    with pytest.raises(ValueError, match="unknown dataset"):
        load("stepcache-micro-distinct")


def test_a_distinct_svamp_stream_runs_through_the_benchmark(tmp_path):
    out = tmp_path / "out"
    with SandboxPool(size=1) as sandbox:
        results = run_benchmark(
            dataset="svamp-distinct",
            methods=["pot"],
            target=FakeTarget(),
            small=FakeSmall(),
            embedder=HashEmbedder(),
            out=out,
            limit=4,
            seed=0,
            sandbox=sandbox,
            command="test",
            background_builds=False,
        )
    rows = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert results["config"]["dataset"] == "svamp-distinct" and results["methods"]["pot"]["n"] == 4
    assert [r["id"] for r in rows] == [
        r.id for r in select(load("svamp-distinct"), limit=4, groups=None, seed=0)
    ]
    assert len({r["group"] for r in rows}) == 4


# -- interleaved streams (--interleave) ---------------------------------------------------------------------


def test_an_interleaved_run_serves_each_request_with_every_method_in_turn_and_takes_the_same_routes(
    tmp_path,
):
    """Rows alternate method by method per request (file order is serving order), the hits fall
    where a method-by-method run puts them, and so do chunks of an interleaved run."""
    dataset = _long_dataset(tmp_path)
    with SandboxPool(size=2) as sandbox:
        kwargs = dict(
            dataset=str(dataset),
            methods=["pot", "minicache"],
            small=FakeSmall(),
            embedder=HashEmbedder(),
            seed=2,
            sandbox=sandbox,
            command="test",
            background_builds=False,
            admission=AdmissionConfig(warmup_requests=1000),
        )
        run_benchmark(target=FakeTarget(), out=tmp_path / "sequential", **kwargs)
        results = run_benchmark(
            target=FakeTarget(), out=tmp_path / "interleaved", interleave=True, **kwargs
        )
        for limit in (5, 10, 17):
            run_benchmark(
                target=FakeTarget(), out=tmp_path / "chunks", limit=limit, interleave=True, **kwargs
            )
    lines = [
        json.loads(x)
        for x in (tmp_path / "interleaved" / "requests.jsonl").read_text().splitlines()
    ]
    assert [x["method"] for x in lines] == ["pot", "minicache", "minicache", "pot"] * 8 + [
        "pot",
        "minicache",
    ]
    assert [x["id"] for x in lines[::2]] == [x["id"] for x in lines[1::2]]
    pot_rows = [x for x in lines if x["method"] == "pot"]
    mc_rows = [x for x in lines if x["method"] == "minicache"]
    routes = _minicache_routes(tmp_path / "sequential")
    assert sum(route == "hit" for _, route, _ in routes) >= 5
    assert _minicache_routes(tmp_path / "interleaved") == routes
    assert _minicache_routes(tmp_path / "chunks") == routes
    # every request first took the compute lock (minicache's builds wait while pot serves)
    assert all(x["waited_s"] >= 0 for x in pot_rows + mc_rows)
    assert results["config"]["interleave"] is True and "waited_s" in results["methods"]["pot"]
    assert "--interleave" in (tmp_path / "interleaved" / "report.md").read_text()


def test_interleaving_holds_the_lock_for_other_methods_and_skips_past_a_shorter_stream(tmp_path):
    """While a method without background work serves, the lock is held (the other method's build
    cannot run); the order flips every request; ``between`` runs before each request served; a
    method capped to a prefix (--subset) stops there and the rest go on."""
    held = []

    class Lock:
        depth = 0

        def __enter__(self):
            Lock.depth += 1

        def __exit__(self, *exc):
            Lock.depth -= 1

    class Probe:
        def __init__(self, name):
            self.name = name

        def solve(self, r):
            held.append((self.name, r.id, Lock.depth, forgotten[0]))
            return Outcome(1.0, "miss")

    forgotten = [0]

    def forget():
        forgotten[0] += 1

    stream = [BenchRequest(f"r{i}", f"q{i}", 1.0) for i in range(4)]
    rows = record_interleaved(
        {"pot": Probe("pot"), "minicache": Probe("minicache")},
        {"pot": stream[:2], "minicache": stream},
        tmp_path / "requests.jsonl",
        hold=Lock(),
        background=frozenset({"minicache"}),
        between=forget,
    )
    assert held == [
        ("pot", "r0", 1, 1),
        ("minicache", "r0", 0, 2),
        ("minicache", "r1", 0, 3),
        ("pot", "r1", 1, 4),
        ("minicache", "r2", 0, 5),
        ("minicache", "r3", 0, 6),
    ]
    assert all("waited_s" in x for x in rows["pot"] + rows["minicache"])
    assert [len(rows["pot"]), len(rows["minicache"])] == [2, 4]
    again = record_interleaved(
        {"pot": Probe("pot"), "minicache": Probe("minicache")},
        {"pot": stream[:2], "minicache": stream},
        tmp_path / "requests.jsonl",
        hold=Lock(),
        background=frozenset({"minicache"}),
        between=forget,
    )
    assert len(held) == 6 and forgotten == [6] and again == rows  # read back, not served again
