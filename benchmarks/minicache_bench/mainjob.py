"""The main job (`make run` / `minicache run`): a stream of Formula requests through MiniCache.

Requests from several FinLoRA formulas arrive interleaved, as a service would see them, with no
group labels. The cache starts cold: early requests of a group are misses (the target writes a
program), a build turns them into a validated entry, and later requests of the group are hits.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from minicache.engine import MiniCache, SolveError
from minicache.programs.signature import answers_match
from minicache_bench.datasets import Request, formula


def formula_stream(
    groups: int, per_group: int, seed: int = 0, split: str = "train"
) -> list[Request]:
    """``per_group`` requests from each of ``groups`` formulas (spread over all 50), shuffled."""
    by_group: OrderedDict[str, list[Request]] = OrderedDict()
    for req in formula(split):
        by_group.setdefault(req.group or "", []).append(req)
    names = list(by_group)
    step = max(1, len(names) // groups)
    chosen = names[::step][:groups]
    stream = [r for name in chosen for r in by_group[name][:per_group]]
    rng = random.Random(seed)
    rng.shuffle(stream)
    return stream


def serve_and_show(
    mc: MiniCache,
    stream: list[Request],
    echo: Callable[[str], None] = print,
    wait_builds: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    """Solve ``stream`` in order on the engine, showing each request's route, latency and correctness
    and each build as it happens (on stderr), and return the summary with every request's row.
    ``wait_builds`` lets a build finish before the next request, so the log reads in stream order."""
    from tqdm import tqdm

    rows = []
    seen_events = len(mc.events)
    bar = tqdm(stream, desc="requests", unit="req", file=sys.stderr, disable=not progress)
    for req in bar:
        t = time.perf_counter()
        route: str
        try:
            result = mc.solve(req.question, req.context)
            route, answer = result.route, result.answer
        except SolveError as exc:
            route, answer, result = "error", None, None
            echo(f"  error on {req.id}: {exc}")
        latency = time.perf_counter() - t
        correct = answer is not None and answers_match(answer, req.answer)
        rows.append(
            {
                "id": req.id,
                "group": req.group,
                "route": route,
                "latency_s": latency,
                "correct": correct,
                "answer": answer,
                "gold": req.answer,
                "extraction": result.extraction if result else None,
            }
        )
        mark = "ok " if correct else "BAD"
        bar.write(
            f"  {route:<8} {latency:6.2f}s  {mark} {str(answer)[:14]:>14} (gold {req.answer:>10})  {req.group}",
            file=sys.stderr,
        )
        if wait_builds:
            mc.wait_for_builds()
        for event in mc.events[seen_events:]:
            if event["event"] == "build":
                what = (
                    f"entry {event.get('entry')} from {event.get('source')}, {event.get('rules', 0)} rules"
                    if event["ok"]
                    else f"failed after {event['attempts']} attempts"
                )
                bar.write(f"  [build] group {event['group']}: {what}", file=sys.stderr)
            else:
                bar.write(f"  [{event['event']}] group {event['group']}", file=sys.stderr)
        seen_events = len(mc.events)
    return summarize(rows)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(xs):
        return statistics.mean(xs) if xs else 0.0

    hits = [r for r in rows if r["route"] == "hit"]
    misses = [r for r in rows if r["route"] in ("miss", "fallback")]
    return {
        "requests": len(rows),
        "hits": len(hits),
        "misses": sum(r["route"] == "miss" for r in rows),
        "fallbacks": sum(r["route"] == "fallback" for r in rows),
        "errors": sum(r["route"] == "error" for r in rows),
        "hit_rate": len(hits) / len(rows) if rows else 0.0,
        "accuracy": mean([r["correct"] for r in rows]),
        "hit_accuracy": mean([r["correct"] for r in hits]),
        "miss_accuracy": mean([r["correct"] for r in misses]),
        "mean_latency_s": mean([r["latency_s"] for r in rows]),
        "hit_latency_s": mean([r["latency_s"] for r in hits]),
        "hit_p50_s": statistics.median([r["latency_s"] for r in hits]) if hits else 0.0,
        "miss_latency_s": mean([r["latency_s"] for r in misses]),
        "rule_hits": sum(r.get("extraction") == "rule" for r in hits),
        "rows": rows,
    }


def format_summary(s: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"requests {s['requests']}: {s['hits']} hits, {s['misses']} misses, {s['fallbacks']} fallbacks, "
            f"{s['errors']} errors  (hit rate {s['hit_rate']:.0%}; {s['rule_hits']} hits served by learned rules)",
            f"accuracy vs gold: {s['accuracy']:.0%} overall, {s['hit_accuracy']:.0%} of hits, "
            f"{s['miss_accuracy']:.0%} of misses",
            f"mean latency: {s['mean_latency_s']:.2f}s overall, hits {s['hit_latency_s']:.2f}s "
            f"(p50 {s['hit_p50_s']:.2f}s), "
            f"misses {s['miss_latency_s']:.2f}s",
        ]
    )
