"""The StepCache micro-benchmark's summary: both baselines, per-path latency, two checkers.

``python -m minicache.stepcache.benchsummary DIR`` reads the rows ``minicache bench --dataset
stepcache-micro`` wrote (``DIR/seed<N>/requests.jsonl``, or ``DIR/requests.jsonl`` for one seed),
regenerates each seed's requests (generation is deterministic) to get the questions and golds, and
writes ``DIR/stepcache-summary.md`` and ``DIR/stepcache-summary.json``:

* every method's accuracy under the independent checker (:mod:`.independent_check`, the benchmark's
  score) and, for contrast, under the verifier-based ``micro.check_output``, with the requests on
  which the two disagree;
* mean, p50 and p95 latency and the mean-latency ratio to ``no-reuse`` and ``no-reuse+solver``;
* StepCache's latency per path (reuse, patch, skip), per seed.

Everything is recomputed from the rows' answers and latencies; nothing is read from report.md.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from . import independent_check, micro

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
    return {"n": len(rows), "mean": statistics.mean(lat) if lat else 0.0, "p50": _pct(lat, 0.5),
            "p95": _pct(lat, 0.95)}


def load_rows(out: Path) -> dict[int, list[dict[str, Any]]]:
    """Rows per seed (the last row per method and request wins, as in a resumed run)."""
    files = sorted(out.glob("seed*/requests.jsonl")) or [out / "requests.jsonl"]
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


def summarize(per_seed: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    methods: dict[str, list[dict[str, Any]]] = {}
    disagreements: list[dict[str, Any]] = []
    for seed, rows in per_seed.items():
        requests = {r.id: r for r in micro.generate(seed)}
        for row in rows:
            req = requests[row["id"]]
            ok, why = independent_check.check(req.task, row["answer"], req.text, row["gold"])
            ok_verifier, why_verifier = micro.check_output(req.task, row["answer"] or "", req.text, req.gold)
            row = dict(row, seed=seed, independent=ok, verifier=ok_verifier, task=req.task,
                       perturbation=req.perturbation)
            if ok != ok_verifier:
                disagreements.append({"method": row["method"], "id": row["id"], "independent": why,
                                      "verifier": why_verifier})
            methods.setdefault(row["method"], []).append(row)
    out: dict[str, Any] = {"seeds": list(per_seed), "methods": {}, "disagreements": disagreements}
    for name, rows in methods.items():
        block: dict[str, Any] = {
            "n": len(rows), "correct_independent": sum(r["independent"] for r in rows),
            "correct_verifier": sum(r["verifier"] for r in rows), "latency_s": _lat(rows),
            "target_tokens": sum(r["tokens"]["target"] for r in rows),
            "solver_fallbacks": sum(bool((r.get("detail") or {}).get("solver_fallback")) for r in rows),
            "per_seed": {str(s): _lat([r for r in rows if r["seed"] == s]) for s in per_seed},
            "measured_from": min((r.get("started_at") or 0) for r in rows),
            "measured_to": max((r.get("started_at") or 0) + r["latency_s"] for r in rows)}
        routes = {(r.get("detail") or {}).get("route") for r in rows}
        if routes & set(PATHS):
            block["paths"] = {}
            for path in PATHS:
                sel = [r for r in rows if (r.get("detail") or {}).get("route") == path]
                block["paths"][path] = dict(_lat(sel), share=len(sel) / len(rows),
                                            correct=sum(r["independent"] for r in sel),
                                            by_task={t: _lat([r for r in sel if r["task"] == t])
                                                     for t in ("linear", "json")})
        out["methods"][name] = block
    return out


def render(summary: dict[str, Any]) -> str:
    import datetime

    methods = summary["methods"]
    stamp = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%H:%M")  # noqa: E731
    refs = [m for m in ("no-reuse", "no-reuse+solver") if m in methods]
    lines = [f"# StepCache micro-benchmark summary (seeds {', '.join(map(str, summary['seeds']))})", "",
             "Correct = the independent checker (`minicache/stepcache/independent_check.py`, no code shared "
             "with StepCache's verifier); the verifier-based `micro.check_output` is shown for contrast. "
             "Our generator, not the paper's: its perturbation mix is ours.", "",
             "| method | n | correct (independent) | correct (verifier-based) | mean latency | p50 | p95 | "
             + " | ".join(f"speedup vs {r}" for r in refs) + " | solver fallbacks | target tokens | measured (UTC) |",
             "|---|---|---|---|---|---|---|" + "---|" * len(refs) + "---|---|---|"]
    for name, m in methods.items():
        lat = m["latency_s"]
        ratios = " | ".join(f"{methods[r]['latency_s']['mean'] / lat['mean']:.2f}x" if lat["mean"] else "-" for r in refs)
        lines.append(f"| {name} | {m['n']} | {m['correct_independent']}/{m['n']} | {m['correct_verifier']}/{m['n']} | "
                     f"{lat['mean']:.2f}s | {lat['p50']:.2f}s | {lat['p95']:.2f}s | {ratios} | {m['solver_fallbacks']} | "
                     f"{m['target_tokens']:,} | {stamp(m['measured_from'])}–{stamp(m['measured_to'])} |")
    for name, m in methods.items():
        if "paths" not in m:
            continue
        lines += ["", f"## {name}: latency per path", "",
                  "| path | share | n | correct (independent) | mean | p50 | p95 | mean, linear | mean, JSON |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for path, p in m["paths"].items():
            lin, js = p["by_task"]["linear"], p["by_task"]["json"]
            lines.append(f"| {path} | {p['share']:.1%} | {p['n']} | {p['correct']}/{p['n']} | {p['mean']:.2f}s | "
                         f"{p['p50']:.2f}s | {p['p95']:.2f}s | {lin['mean']:.2f}s ({lin['n']}) | "
                         f"{js['mean']:.2f}s ({js['n']}) |")
    lines += ["", "## Per seed (mean / p95 latency)", "", "| seed | " + " | ".join(methods) + " |",
              "|---|" + "---|" * len(methods)]
    for seed in summary["seeds"]:
        cells = [f"{m['per_seed'][str(seed)]['mean']:.2f}s / {m['per_seed'][str(seed)]['p95']:.2f}s"
                 if m["per_seed"][str(seed)]["n"] else "-" for m in methods.values()]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    lines += ["", f"## Where the two checkers disagree ({len(summary['disagreements'])})", ""]
    lines += [f"- {d['method']} `{d['id']}`: independent: {d['independent'] or 'correct'}; verifier-based: "
              f"{d['verifier'] or 'correct'}" for d in summary["disagreements"]] or ["None."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m minicache.stepcache.benchsummary DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    summary = summarize(load_rows(out))
    (out / "stepcache-summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    text = render(summary)
    (out / "stepcache-summary.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
