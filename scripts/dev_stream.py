"""Try engine changes on Formula groups the benchmark does not use (tuning never sees its stream).

    .venv/bin/python scripts/dev_stream.py [--groups 6] [--per-group 7] [--seed 3]

`minicache bench --dataset formula --groups 21` takes every second formula of the 50 (in
``bench.data.load_formula`` order). This script takes formulas from the other half, streams
``--per-group`` requests of each through a cold MiniCache on the embedded models with synchronous
builds, and prints every request, every build, and a summary per route.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import OrderedDict, defaultdict

from minicache.bench.data import is_correct, load_formula
from minicache.engine import EngineConfig, MiniCache, SolveError


def dev_groups(groups: int, benchmark_groups: int = 21) -> list[str]:
    by: OrderedDict[str, int] = OrderedDict()
    for r in load_formula():
        by[r.group] = by.get(r.group, 0) + 1
    names = list(by)
    used = set(names[:: max(1, len(names) // benchmark_groups)][:benchmark_groups])
    return [n for n in names if n not in used][:groups]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=6)
    ap.add_argument("--per-group", type=int, default=7)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    names = dev_groups(args.groups)
    by: dict[str, list] = defaultdict(list)
    for r in load_formula():
        if r.group in names:
            by[r.group].append(r)
    rng = random.Random(args.seed)
    stream = [r for n in names for r in rng.sample(by[n], min(args.per_group, len(by[n])))]
    rng.shuffle(stream)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, MiniCache.local(
            store=f"{tmp}/mc.db", config=EngineConfig(background_builds=False)) as mc:
        for r in stream:
            seen = len(mc.events)
            t = time.perf_counter()
            try:
                res = mc.solve(r.question, r.context)
                route, answer, extraction = res.route, res.answer, res.extraction
            except SolveError as exc:
                route, answer, extraction = "error", None, None
                print(f"  error: {exc}", file=sys.stderr)
            seconds = time.perf_counter() - t
            ok = is_correct(r, answer)
            rows.append((route, extraction, ok, seconds))
            print(f"{route:8} {extraction or '':7} {seconds:6.2f}s {'ok ' if ok else 'BAD'} {str(answer)[:12]:>12} "
                  f"(gold {r.answer}) {r.group}", flush=True)
            for ev in mc.events[seen:]:
                print(f"    event: {ev}", flush=True)
        for e in mc.store.list_entries("default", "active"):
            print(f"\nentry {e.group_id} ({e.validation.get('source')}, rules {sorted(e.rules)}):\n{e.program}")
    print("\nroute      n  accuracy  mean")
    buckets: dict[str, list] = defaultdict(list)
    for route, extraction, ok, seconds in rows:
        buckets[f"{route}/{extraction}" if extraction else route].append((ok, seconds))
    for name, xs in sorted(buckets.items()):
        print(f"{name:12} {len(xs):3} {sum(o for o, _ in xs) / len(xs):8.0%} {statistics.mean(s for _, s in xs):6.2f}s")
    right, seconds = sum(r[2] for r in rows) / len(rows), statistics.mean(r[3] for r in rows)
    print(f"all        {len(rows):3} {right:8.0%} {seconds:6.2f}s")


if __name__ == "__main__":
    main()
