#!/usr/bin/env python3
"""Where minicache's seconds went on a benchmark stream, and the ratio the stream allows at best.

Reads a run's ``requests.jsonl`` (pot and minicache rows of the same requests) and sums minicache's
latency by what each request was: a hit; a miss before its gold group's first hit (the cold start a
cache cannot avoid); a later plain miss; a hit refused and served as a miss, by the check that
refused it; an error (after a refused hit, where the row says so). Then the ceiling: the
pot/minicache ratio if every gold group paid pot's latency for its first ``k`` requests and nothing
after (k = 2 is the fewest misses a build needs, ``build_early``; k = 3 is ``build_after``). Why:
issue 16 asks for 4x on Formula; this says which part of the gap is refusals, which is cold starts,
and whether 4x is within reach of the design.

Usage: python3 scripts/time_budget.py RUN/requests.jsonl
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

from stream_breakdown import load, refusal_kind  # scripts/ is on the path when run as a script


def main(path: str) -> None:
    mc, pot = load(Path(path))  # minicache's rows in stream order, pot's by request id
    seconds: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    first_hit_seen: set[str] = set()
    refused: list[dict] = []
    for r in mc:
        reason = (r.get("detail") or {}).get("fallback_reason") or ""
        if r["route"] == "hit":
            kind = "hit"
            first_hit_seen.add(r["group"])
        elif r["route"] == "error":  # rows since f945a8b say what the hit attempt before it ended in
            kind = "error" + (f" after refused: {refusal_kind(reason)}" if reason.startswith("HitRefused:") else "")
        elif reason.startswith("HitRefused:"):
            kind = "refused: " + refusal_kind(reason)
            refused.append(r)
        elif r["group"] not in first_hit_seen:
            kind = "miss before the group's first hit"
        else:
            kind = "miss after the group's first hit"
        seconds[kind] += r["latency_s"]
        count[kind] += 1
    total_mc = sum(seconds.values())
    total_pot = sum(pot[r["id"]]["latency_s"] for r in mc)
    print(f"{len(mc)} requests: pot {total_pot:.0f} s, minicache {total_mc:.0f} s, "
          f"ratio {total_pot / total_mc:.2f}x")
    print(f"{'what the request was':42s} {'requests':>8s} {'seconds':>8s} {'share':>6s}")
    for kind in sorted(seconds, key=lambda k: -seconds[k]):
        print(f"{kind:42s} {count[kind]:8d} {seconds[kind]:8.1f} {100 * seconds[kind] / total_mc:5.1f}%")
    for k in (2, 3):
        seen: Counter[str] = Counter()
        floor = 0.0
        for r in mc:
            seen[r["group"]] += 1
            if seen[r["group"]] <= k:
                floor += pot[r["id"]]["latency_s"]
        print(f"ceiling, pot's latency for each gold group's first {k} requests and nothing after: "
              f"{floor:.0f} s, {total_pot / floor:.2f}x")
    need = total_pot / 4
    print(f"4x needs minicache at {need:.0f} s: {total_mc - need:.0f} s less than measured")
    refusal_bound(mc, refused, total_pot, total_mc)


def refusal_bound(mc: list[dict], refused: list[dict], total_pot: float, total_mc: float) -> None:
    """What perfect extraction would give: each refused request its miss answered right (the entry
    could have been right there) served instead at the stream's median hit latency. Refusals whose
    miss was wrong stay misses: a hit there would have nothing to be checked against."""
    hits = sorted(r["latency_s"] for r in mc if r["route"] == "hit")
    if not hits:
        return
    median_hit = hits[len(hits) // 2]
    right = [r for r in refused if r["correct"]]
    saved = sum(r["latency_s"] - median_hit for r in right)
    n_hits = len(hits) + len(right)
    print(f"refused hits: {len(refused)}, their miss answered right on {len(right)} "
          f"({sum(r['latency_s'] for r in right):.0f} s) and wrong on {len(refused) - len(right)}")
    print(f"if those {len(right)} had been hits at the median hit latency ({median_hit:.3f} s): "
          f"minicache {total_mc - saved:.0f} s, {total_pot / (total_mc - saved):.2f}x, "
          f"hit rate {100 * n_hits / len(mc):.1f}%")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
