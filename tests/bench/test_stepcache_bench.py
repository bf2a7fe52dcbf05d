"""The StepCache micro-benchmark: reproducible generation, the independent checker, the summary."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minicache import FakeBackend
from minicache.stepcache import linear, parse
from minicache_bench import run_benchmark
from minicache_bench.stepcache import benchsummary, independent_check, micro
from tests.fakes import FakeSmall, HashEmbedder

EQ = "Solve for x: 3x + 5 = 20. Show your work as numbered steps, one per line, and end with the line 'x = <value>'."
GOOD = "Step 1: Subtract 5 from both sides: 3x = 20 - 5 = 15\nStep 2: Divide both sides by 3: x = 15/3 = 5\nx = 5"
DUMP = (
    "import json, sys; from minicache_bench.stepcache import micro; "
    "print(json.dumps([[r.id, r.task, r.text, str(r.gold), r.family, r.perturbation] "
    "for s in (42, 45) for r in micro.generate(s)]))"
)


def _generate_in_process_with_hash_seed(hash_seed: str) -> list:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    out = subprocess.run(
        [sys.executable, "-c", DUMP],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return json.loads(out.stdout)


def test_generation_is_the_same_in_processes_with_different_hash_seeds():
    first, second = (
        _generate_in_process_with_hash_seed("1"),
        _generate_in_process_with_hash_seed("2"),
    )
    assert first == second
    here = [
        [r.id, r.task, r.text, str(r.gold), r.family, r.perturbation]
        for s in (42, 45)
        for r in micro.generate(s)
    ]
    assert here == first and len(first) == 2 * 222


def test_the_generators_mix_is_unchanged():
    reqs = micro.generate(44)
    kinds = {
        p: sum(r.perturbation == p for r in reqs)
        for p in ("base", "constants", "names", "schema", "semantic")
    }
    assert kinds == {"base": 20, "constants": 60, "names": 60, "schema": 60, "semantic": 22}
    assert {r.task for r in reqs} == {"linear", "json"} and len({r.family for r in reqs}) == 20


# -- the independent checker -------------------------------------------------------------------


def test_independent_checker_imports_nothing_from_minicache():
    source = Path(independent_check.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import would share code with the verifier"
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "json", "re", "fractions", "itertools", "typing"}, (
        imported
    )  # stdlib only


def test_independent_checker_accepts_every_gold_and_solver_solution_of_a_seed():
    for r in micro.generate(43):
        if r.task == "linear":
            steps = linear.solver_steps(parse(r.text))
            text = (
                "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps[:-1])) + "\n" + steps[-1]
            )
            assert independent_check.check("linear", text, r.text, float(r.gold)) == (True, ""), (
                r.text
            )
        else:
            assert independent_check.check("json", json.dumps(r.gold), r.text, r.gold) == (
                True,
                "",
            ), r.text


@pytest.mark.parametrize(
    "output,why",
    [
        (GOOD.replace("= 15\n", "= 16\n"), "does not hold"),  # wrong arithmetic in a middle step
        (
            GOOD.replace("Subtract 5 from both sides: 3x", "Subtract 5 from both sides: 4x"),
            "does not hold",
        ),
        (GOOD.replace("\nx = 5", "\nx = 6").replace("= 5\n", "= 6\n"), "does not hold"),
        (GOOD.replace("\nx = 5", "\nAnswer: 5"), "last line"),
        (GOOD.replace("15/3", "15//3"), "cannot read"),
        ("", "no output"),
    ],
)
def test_independent_checker_rejects_wrong_steps_answers_and_formats(output, why):
    ok, reason = independent_check.check("linear", output, EQ, 5.0)
    assert not ok and why in reason


def test_independent_checker_reads_implicit_products_brackets_and_prose_around_equations():
    q = EQ.replace("3x + 5 = 20", "4(x - 2) = 2x + 6")  # x = 7
    text = (
        "Step 1: Expand the brackets (distribute 4): 4x - 8 = 2x + 6.\nStep 2: Subtract 2x: 2x - 8 = 6\n"
        "Step 3: Add 8 to both sides, so 2x = 14\nStep 4: x = 14 ÷ 2 = 7\nx = 7"
    )
    assert independent_check.check("linear", text, q, 7.0) == (True, "")
    assert not independent_check.check("linear", text, q, 8.0)[
        0
    ]  # the gold is checked, not the verifier's view


def test_independent_json_check_wants_exact_keys_types_and_values():
    r = next(r for r in micro.generate(42) if r.task == "json" and r.perturbation == "base")
    gold = r.gold
    assert independent_check.check("json", "```json\n" + json.dumps(gold) + "\n```", r.text, gold)[
        0
    ]
    assert not independent_check.check("json", "Here: " + json.dumps(gold), r.text, gold)[0]
    assert not independent_check.check("json", json.dumps(dict(gold, extra=1)), r.text, gold)[0]
    key = next(k for k, v in gold.items() if isinstance(v, str))
    changed = json.dumps(dict(gold, **{key: gold[key].upper() + "x"}))
    assert not independent_check.check("json", changed, r.text, gold)[0]
    num = next(k for k, v in gold.items() if not isinstance(v, str))
    assert not independent_check.check(
        "json", json.dumps(dict(gold, **{num: str(gold[num])})), r.text, gold
    )[0]


# -- the benchmark and its summary ---------------------------------------------------------------


def _oracle(seed: int):
    gold = {r.text: r for r in micro.generate(seed)}

    def reply(messages, options):  # a perfect target: solver steps, gold JSON (only the asked keys)
        text = messages[-1].content.split("\n\n")[0]
        r = gold[text]
        if r.task == "json":
            keys = list(options.json_schema["properties"]) if options.json_schema else list(r.gold)
            return json.dumps({k: r.gold[k] for k in keys})
        steps = linear.solver_steps(parse(text))
        if "single line" in messages[-1].content:
            return steps[-1]
        return "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps[:-1])) + "\n" + steps[-1]

    return FakeBackend(reply)


def test_micro_benchmark_runs_both_baselines_and_the_summary_reports_paths(tmp_path):
    out = tmp_path / "out"
    results = run_benchmark(
        dataset="stepcache-micro",
        methods=["no-reuse", "no-reuse+solver", "stepcache"],
        target=_oracle(7),
        small=FakeSmall(),
        embedder=HashEmbedder(),
        out=out,
        seed=7,
        limit=60,
    )
    assert {m: results["methods"][m]["accuracy"] for m in results["methods"]} == {
        "no-reuse": 1.0,
        "no-reuse+solver": 1.0,
        "stepcache": 1.0,
    }
    summary = benchsummary.summarize(benchsummary.load_rows(out))
    sc = summary["methods"]["stepcache"]
    assert sc["n"] == 60 and sc["correct_independent"] == sc["correct_verifier"] == 60
    assert sum(p["n"] for p in sc["paths"].values()) == 60 and sc["paths"]["step-reuse"]["n"] > 0
    assert "paths" not in summary["methods"]["no-reuse+solver"] and summary["disagreements"] == []
    text = benchsummary.render(summary)
    assert "latency per path" in text and "speedup vs no-reuse+solver" in text
    block = results["methods"]["stepcache"]  # the bench's own report still has the paths and ratios
    assert block["hit_rate"] == block["paths"]["step-reuse"] and block["verified"] == 1.0
    report = (out / "report.md").read_text()
    assert "speedup vs no-reuse" in report and "## StepCache paths" in report


def test_the_summary_scores_answers_itself_and_lists_where_the_checkers_disagree(tmp_path):
    r = next(r for r in micro.generate(42) if r.task == "json" and r.perturbation == "base")
    key = next(k for k, v in r.gold.items() if isinstance(v, str))
    answer = json.dumps(
        dict(r.gold, **{key: r.gold[key].lower()})
    )  # the record's value, lower-cased
    (tmp_path / "requests.jsonl").write_text(
        json.dumps(
            {
                "method": "no-reuse",
                "id": r.id,
                "answer": answer,
                "gold": r.gold,
                "latency_s": 1.0,
                "correct": True,
                "tokens": {"target": 1, "small": 0},
                "detail": {},
            }
        )
        + "\n"
    )
    summary = benchsummary.summarize(benchsummary.load_rows(tmp_path))
    m = summary["methods"]["no-reuse"]
    assert m["correct_independent"] == 0  # recomputed, not read from the row's "correct"
    assert (
        m["correct_verifier"] == 1
    )  # the verifier-based check compares strings case-insensitively
    assert [d["id"] for d in summary["disagreements"]] == [r.id]
    assert "Where the two checkers disagree (1)" in benchsummary.render(summary)


def test_derived_no_reuse_solver_rows_match_the_live_method(tmp_path):
    out = tmp_path / "out"
    run_benchmark(
        dataset="stepcache-micro",
        methods=["no-reuse", "no-reuse+solver"],
        target=_oracle(9),
        small=FakeSmall(),
        embedder=HashEmbedder(),
        out=out,
        seed=9,
        limit=30,
    )
    live = {r["id"]: r for r in benchsummary.load_rows(out)[9] if r["method"] == "no-reuse+solver"}
    assert benchsummary.derive_no_reuse_solver(out, _oracle(9)) == 30
    derived = {
        r["id"]: r for r in benchsummary.load_rows(out)[9] if r["method"] == "no-reuse+solver"
    }
    assert {i: r["answer"] for i, r in derived.items()} == {i: r["answer"] for i, r in live.items()}
    assert all(r["detail"]["derived_from"] == "no-reuse" for r in derived.values())
    summary = benchsummary.summarize(benchsummary.load_rows(out))
    assert summary["methods"]["no-reuse+solver"]["derived"] == 30
    assert "were derived from no-reuse's answers" in benchsummary.render(summary)
