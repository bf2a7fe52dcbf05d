"""The StepCache micro-benchmark's summary: both baselines, per-path latency, two checkers.

``python -m minicache_bench.stepcache.benchsummary DIR`` reads the rows ``minicache bench --dataset
stepcache-micro`` wrote (``DIR/seed<N>/requests.jsonl``, or ``DIR/requests.jsonl`` for one seed),
regenerates each seed's requests (generation is deterministic) to get the questions and golds, and
writes ``DIR/stepcache-summary.md`` and ``DIR/stepcache-summary.json``:

* every method's accuracy under the independent checker (:mod:`.independent_check`, the benchmark's
  score) and, for contrast, under the verifier-based ``micro.check_output``, with the requests on
  which the two disagree;
* mean, p50 and p95 latency and the mean-latency ratio to ``no-reuse`` and ``no-reuse+solver``;
* StepCache's latency per path (reuse, patch, skip), per seed.

Everything is recomputed from the rows' answers and latencies; nothing is read from report.md.

``python -m minicache_bench.stepcache.benchsummary --derive-solver DIR`` writes the ``no-reuse+solver``
rows from the ``no-reuse`` rows instead of generating again (``derived-no-reuse+solver.jsonl`` per
seed): both send the same prompt to the same target with greedy decoding, so the full answer is the
same text, and only the checks and fallbacks are run and timed here. A row's latency is the
no-reuse row's plus that measured fallback time. Used when the machine is too slow to generate
every answer twice; the summary says which rows were derived.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from minicache_bench.stepcache import independent_check, micro

PATHS = ("step-reuse", "step-patch", "step-skip")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _lat(rows: list[dict[str, Any]]) -> dict[str, float]:
    lat = [r["latency_s"] for r in rows]
    return {
        "n": len(rows),
        "mean": statistics.mean(lat) if lat else 0.0,
        "p50": _pct(lat, 0.5),
        "p95": _pct(lat, 0.95),
    }


def load_rows(out: Path) -> dict[int, list[dict[str, Any]]]:
    """Rows per seed (the last row per method and request wins, as in a resumed run)."""
    files = sorted(out.glob("seed*/requests.jsonl")) or [out / "requests.jsonl"]
    files += sorted(out.glob("seed*/derived-*.jsonl")) + sorted(out.glob("derived-*.jsonl"))
    per_seed: dict[int, dict[tuple[str, str], dict[str, Any]]] = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            seed = int(str(row["id"]).split("-")[0][1:])
            per_seed.setdefault(seed, {})[(row["method"], str(row["id"]))] = row
    return {seed: list(rows.values()) for seed, rows in sorted(per_seed.items())}


def derive_no_reuse_solver(out: Path, target: Any) -> int:
    """Write ``no-reuse+solver`` rows next to each seed's ``no-reuse`` rows; returns how many."""
    import tempfile
    import time

    from minicache.stepcache.cache import StepCache
    from minicache.store import open_store

    written = 0
    with tempfile.TemporaryDirectory() as tmp:
        steps = StepCache(target, open_store(str(Path(tmp) / "unused.db")), embedder=None)  # type: ignore[arg-type]
        for seed, rows in load_rows(out).items():
            requests = {r.id: r for r in micro.generate(seed)}
            base = [r for r in rows if r["method"] == "no-reuse"]
            folder = out / f"seed{seed}" if (out / f"seed{seed}").is_dir() else out
            lines = []
            for row in base:
                req = requests[row["id"]]
                began = time.perf_counter()
                result = steps.check_or_fallback(req.text, row["answer"] or "")
                fallback_s = time.perf_counter() - began
                ok, _ = independent_check.check(req.task, result.output, req.text, row["gold"])
                lines.append(
                    json.dumps(
                        {
                            "method": "no-reuse+solver",
                            "id": row["id"],
                            "group": row.get("group"),
                            "route": "miss",
                            "started_at": row.get("started_at"),
                            "answer": result.output,
                            "gold": row["gold"],
                            "correct": ok,
                            "latency_s": row["latency_s"] + fallback_s,
                            "tokens": {
                                "target": row["tokens"]["target"] + result.tokens,
                                "small": 0,
                            },
                            "detail": {
                                "route": "full",
                                "derived_from": "no-reuse",
                                "generation_s": row["latency_s"],
                                "fallback_s": fallback_s,
                                "verified": result.verified,
                                "solver_fallback": result.solver_fallback,
                                "reason": result.reason,
                            },
                        }
                    )
                )
            (folder / "derived-no-reuse+solver.jsonl").write_text(
                "".join(x + "\n" for x in lines), encoding="utf-8"
            )
            written += len(lines)
    return written


class _LazyTarget:
    """The embedded target, loaded on the first call (only a JSON repair needs a model)."""

    name = "embedded-target"

    def __init__(self) -> None:
        self._backend: Any = None

    def complete(self, messages: Any, options: Any = None) -> Any:
        if self._backend is None:
            from minicache.models.llamacpp import LlamaCppBackend

            self._backend = LlamaCppBackend.embedded("target")
        return self._backend.complete(messages, options)


def summarize(per_seed: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Every method on the requests that every method served (a run stopped mid-stream compares
    like with like), with the count of rows left out."""
    methods: dict[str, list[dict[str, Any]]] = {}
    disagreements: list[dict[str, Any]] = []
    left_out = 0
    for seed, rows in per_seed.items():
        requests = {r.id: r for r in micro.generate(seed)}
        names = {r["method"] for r in rows}
        common = (
            set.intersection(*({r["id"] for r in rows if r["method"] == n} for n in names))
            if names
            else set()
        )
        left_out += sum(r["id"] not in common for r in rows)
        for row in rows:
            if row["id"] not in common:
                continue
            req = requests[row["id"]]
            ok, why = independent_check.check(req.task, row["answer"], req.text, row["gold"])
            ok_verifier, why_verifier = micro.check_output(
                req.task, row["answer"] or "", req.text, req.gold
            )
            row = dict(
                row,
                seed=seed,
                independent=ok,
                verifier=ok_verifier,
                task=req.task,
                perturbation=req.perturbation,
            )
            if ok != ok_verifier:
                disagreements.append(
                    {
                        "method": row["method"],
                        "id": row["id"],
                        "independent": why,
                        "verifier": why_verifier,
                    }
                )
            methods.setdefault(row["method"], []).append(row)
    out: dict[str, Any] = {
        "seeds": list(per_seed),
        "methods": {},
        "disagreements": disagreements,
        "rows_left_out": left_out,
    }
    for name, rows in methods.items():
        block: dict[str, Any] = {
            "n": len(rows),
            "correct_independent": sum(r["independent"] for r in rows),
            "correct_verifier": sum(r["verifier"] for r in rows),
            "latency_s": _lat(rows),
            "target_tokens": sum(r["tokens"]["target"] for r in rows),
            "solver_fallbacks": sum(
                bool((r.get("detail") or {}).get("solver_fallback")) for r in rows
            ),
            "derived": sum(bool((r.get("detail") or {}).get("derived_from")) for r in rows),
            "per_seed": {str(s): _lat([r for r in rows if r["seed"] == s]) for s in per_seed},
            "measured_from": min((r.get("started_at") or 0) for r in rows),
            "measured_to": max((r.get("started_at") or 0) + r["latency_s"] for r in rows),
        }
        routes = {(r.get("detail") or {}).get("route") for r in rows}
        if routes & set(PATHS):
            block["paths"] = {}
            for path in PATHS:
                sel = [r for r in rows if (r.get("detail") or {}).get("route") == path]
                block["paths"][path] = dict(
                    _lat(sel),
                    share=len(sel) / len(rows),
                    correct=sum(r["independent"] for r in sel),
                    by_task={
                        t: _lat([r for r in sel if r["task"] == t]) for t in ("linear", "json")
                    },
                )
        out["methods"][name] = block
    return out


def render(summary: dict[str, Any]) -> str:
    import datetime

    methods = summary["methods"]

    def stamp(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%H:%M")

    refs = [m for m in ("no-reuse", "no-reuse+solver") if m in methods]
    lines = [
        f"# StepCache micro-benchmark summary (seeds {', '.join(map(str, summary['seeds']))})",
        "",
        "Correct = the independent checker (`minicache_bench/stepcache/independent_check.py`, no code shared "
        "with StepCache's verifier); the verifier-based `micro.check_output` is shown for contrast. "
        "Our generator, not the paper's: its perturbation mix is ours. Every method is summarized on the "
        f"requests that every method served ({summary['rows_left_out']} rows of requests not served by all "
        "methods left out).",
        "",
        "| method | n | correct (independent) | correct (verifier-based) | mean latency | p50 | p95 | "
        + " | ".join(f"speedup vs {r}" for r in refs)
        + " | solver fallbacks | target tokens | measured (UTC) |",
        "|---|---|---|---|---|---|---|" + "---|" * len(refs) + "---|---|---|",
    ]
    for name, m in methods.items():
        lat = m["latency_s"]
        ratios = " | ".join(
            f"{methods[r]['latency_s']['mean'] / lat['mean']:.2f}x" if lat["mean"] else "-"
            for r in refs
        )
        lines.append(
            f"| {name} | {m['n']} | {m['correct_independent']}/{m['n']} | {m['correct_verifier']}/{m['n']} | "
            f"{lat['mean']:.2f}s | {lat['p50']:.2f}s | {lat['p95']:.2f}s | {ratios} | "
            f"{m['solver_fallbacks']} | {m['target_tokens']:,} | "
            f"{stamp(m['measured_from'])}–{stamp(m['measured_to'])} |"
        )
    for name, m in methods.items():
        if m.get("derived"):
            lines += [
                "",
                f"{name}: {m['derived']} of its {m['n']} rows were derived from no-reuse's answers (same "
                "prompt, greedy decoding): only the checks and fallbacks were run for them, and their latency "
                "is no-reuse's plus the measured fallback time.",
            ]
    for name, m in methods.items():
        if "paths" not in m:
            continue
        lines += [
            "",
            f"## {name}: latency per path",
            "",
            "| path | share | n | correct (independent) | mean | p50 | p95 | mean, linear | mean, JSON |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for path, p in m["paths"].items():
            lin, js = p["by_task"]["linear"], p["by_task"]["json"]
            lines.append(
                f"| {path} | {p['share']:.1%} | {p['n']} | {p['correct']}/{p['n']} | {p['mean']:.2f}s | "
                f"{p['p50']:.2f}s | {p['p95']:.2f}s | {lin['mean']:.2f}s ({lin['n']}) | "
                f"{js['mean']:.2f}s ({js['n']}) |"
            )
    lines += [
        "",
        "## Per seed (mean / p95 latency)",
        "",
        "| seed | " + " | ".join(methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for seed in summary["seeds"]:
        cells = [
            f"{m['per_seed'][str(seed)]['mean']:.2f}s / {m['per_seed'][str(seed)]['p95']:.2f}s"
            if m["per_seed"][str(seed)]["n"]
            else "-"
            for m in methods.values()
        ]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    lines += ["", f"## Where the two checkers disagree ({len(summary['disagreements'])})", ""]
    lines += [
        f"- {d['method']} `{d['id']}`: independent: {d['independent'] or 'correct'}; verifier-based: "
        f"{d['verifier'] or 'correct'}"
        for d in summary["disagreements"]
    ] or ["None."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    derive = argv[:1] == ["--derive-solver"]
    argv = argv[1:] if derive else argv
    if len(argv) != 1:
        print(
            "usage: python -m minicache_bench.stepcache.benchsummary [--derive-solver] DIR",
            file=sys.stderr,
        )
        return 2
    out = Path(argv[0])
    if derive:
        print(
            f"derived {derive_no_reuse_solver(out, _LazyTarget())} no-reuse+solver rows",
            file=sys.stderr,
        )
    summary = summarize(load_rows(out))
    (out / "stepcache-summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    text = render(summary)
    (out / "stepcache-summary.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
