"""Where a pot-vs-minicache stream's time and refusals went, from its ``requests.jsonl``.

usage: python -m minicache_bench.tools.breakdown RESULTS_DIR_OR_REQUESTS_JSONL [--block 25] [--slow 1.0]

``report.md`` gives the totals; this prints what the notes on a long run need besides, read from
the rows alone (no model, no store):

* per block of ``--block`` requests, in stream order: minicache's hits, both methods' mean latency
  and their ratio (is the cache warming up, and when);
* minicache's refused hits (the engine's route ``fallback``, a ``miss`` in the row) by check, and
  its errors by message;
* the hits slower than ``--slow`` seconds, with the stage that took the time and the seconds the
  request waited for the compute lock (``lock_wait_s``; rows without it show ``nan``);
* the builds: how many, how many succeeded, and their compute seconds (wall time less lock waits);
* the seconds requests waited, before their timers, for a build to step aside (``waited_s``).

Only the requests both methods answered are compared. ``--first N`` reads only the first ``N`` of
them, and the first line then gives their speed and accuracy against pot with the report's paired
intervals (:func:`minicache_bench.stats.compare`): a stopped run compared with the same prefix of a
finished one.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import Counter
from pathlib import Path

from minicache_bench.stats import compare


def load(path: Path) -> tuple[list[dict], dict[str, dict]]:
    """minicache's rows in stream order, and pot's rows by request id."""
    rows = [
        json.loads(line) for line in (path / "requests.jsonl" if path.is_dir() else path).open()
    ]
    pot = {r["id"]: r for r in rows if r["method"] == "pot"}
    cache = [r for r in rows if r["method"] == "minicache" and r["id"] in pot]
    return cache, pot


def prefix_line(cache: list[dict], pot: dict[str, dict]) -> str:
    """The speed and accuracy of ``cache``'s requests against pot's, with 95% paired intervals."""
    result = compare(cache, [pot[r["id"]] for r in cache])
    if result is None or result["latency_ratio"] is None:
        return "first 0 requests: nothing to compare"
    low, high = result["latency_ratio_ci95"]
    d_low, d_high = (100 * x for x in result["accuracy_diff_ci95"])
    return (
        f"first {result['n']} requests: {result['latency_ratio']:.3f}x pot [{low:.3f}, {high:.3f}], "
        f"accuracy {result['accuracy']:.1%} against pot's {result['ref_accuracy']:.1%} "
        f"({100 * result['accuracy_diff']:+.1f} points [{d_low:+.1f}, {d_high:+.1f}], "
        f"McNemar p = {result['mcnemar_p']:.2g})"
    )


def refusal_kind(reason: str) -> str:
    """``HitRefused: probation: ...`` -> ``probation``; other exceptions by their name."""
    head, _, rest = reason.partition(":")
    if head.strip() == "HitRefused":
        return rest.strip().split(":")[0].split(" (")[0][:60]
    return head.strip()[:60]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--block", type=int, default=25, help="requests per block (default 25)")
    ap.add_argument(
        "--slow", type=float, default=1.0, help="list hits slower than this many seconds"
    )
    ap.add_argument(
        "--first", type=int, default=None, help="read only the first N requests (in stream order)"
    )
    args = ap.parse_args()
    cache, pot = load(args.path)
    if args.first is not None:
        cache = cache[: args.first]
        print(prefix_line(cache, pot))
    n = len(cache)
    print(f"{n} requests answered by both methods")

    print(f"\nper block of {args.block}: hits, minicache mean, pot mean, pot/minicache")
    for start in range(0, n, args.block):
        block = cache[start : start + args.block]
        hits = sum(r["route"] == "hit" for r in block)
        mc = statistics.fmean(r["latency_s"] for r in block)
        pp = statistics.fmean(pot[r["id"]]["latency_s"] for r in block)
        print(
            f"  {start + 1:4d}-{start + len(block):<4d} {hits:3d} hits  {mc:6.2f} s  {pp:6.2f} s  {pp / mc:5.2f}x"
        )

    hits = [r for r in cache if r["route"] == "hit"]
    by_path = Counter(r["detail"].get("extraction") or "?" for r in hits)
    print(
        f"\nhits: {len(hits)} of {n} ({len(hits) / max(n, 1):.1%}); by extraction: {dict(by_path)}"
    )
    refused = Counter(
        refusal_kind(r["detail"].get("fallback_reason") or "")
        for r in cache
        if r["detail"].get("route") == "fallback"
    )
    print(
        f"refused hits (served as misses): {sum(refused.values())}: {dict(refused.most_common())}"
    )
    errors = Counter(
        re.sub(r"[-\d.]+", "N", str(r["detail"].get("error")))[:90]
        for r in cache
        if r["route"] == "error"
    )
    print(f"errors: {sum(errors.values())}")
    for message, count in errors.most_common():
        print(f"  {count:3d}  {message}")

    slow = [r for r in hits if r["latency_s"] > args.slow]
    print(f"\nhits slower than {args.slow} s: {len(slow)}")
    for r in slow:
        t = r["detail"].get("timings", {})
        stage = max((k for k in t if k != "total_s"), key=lambda k: t[k], default="?")
        wait = r["detail"].get("lock_wait_s", float("nan"))
        print(
            f"  #{cache.index(r) + 1:4d} {r['latency_s']:6.2f} s  {r['detail'].get('extraction')!s:6}  "
            f"slowest stage {stage} {t.get(stage, 0):.2f} s  lock wait {wait:.2f} s"
        )

    every = [b for r in cache for b in r["detail"].get("builds", [])]
    early = [b[0] for b in every if b[1] is None]  # early builds that made no entry (build_early)
    builds = [b for b in every if b[1] is not None]
    ok = [b[0] for b in builds if b[1]]
    failed = [b[0] for b in builds if not b[1]]
    if early:
        print(
            f"\nearly builds that made no entry (the group waited for build_after): {len(early)}, "
            f"{sum(early):.1f} s in all, at most {max(early):.1f} s"
        )
    print(
        f"\nbuilds: {len(builds)}, {len(ok)} ok"
        + (f" ({min(ok):.1f}-{max(ok):.1f} s, mean {statistics.fmean(ok):.1f} s)" if ok else "")
        + f", {len(failed)} failed"
        + (
            f" ({min(failed):.1f}-{max(failed):.1f} s, mean {statistics.fmean(failed):.1f} s)"
            if failed
            else ""
        )
    )
    waited = sum(r.get("waited_s", 0.0) for r in cache) + sum(
        pot[r["id"]].get("waited_s", 0.0) for r in cache
    )
    print(f"seconds requests waited before their timers for builds to step aside: {waited:.1f}")


if __name__ == "__main__":
    main()
