"""Replay candidate backing over a committed run's store: for each group, its first K examples
(stream order) go through ``own_candidates``, as a build of those examples would, without a model.

Prints how many groups then have a candidate another example backs with other values (what an early
build needs), how many have a vouched one (what lets validation pass with ``validate_min``), and the
seconds ``own_candidates`` took in all and at worst (sandbox runs).

    .venv/bin/python scripts/backing_replay.py benchmarks/results/formula-v12/minicache.db --first 2

Why: whether two examples of one computation back each other decides whether a group can be built
early, and that can be compared between two versions of ``minicache.candidates`` on the same
examples in seconds instead of a stream's 45 minutes. It says nothing of whether the entries built
would then be right: that takes a stream.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from collections import defaultdict
from pathlib import Path

from minicache.candidates import own_candidates
from minicache.sandbox import SandboxPool
from minicache.store import Example
from minicache.synthesis import parse_signature


def groups(db: Path) -> dict[str, list[Example]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT id, tenant, group_id, question, context, program, answer FROM examples "
                           "ORDER BY created_at").fetchall()
    out: dict[str, list[Example]] = defaultdict(list)
    for id_, tenant, group, question, context, program, answer in rows:
        out[group].append(Example(id=id_, tenant=tenant, group_id=group, question=question, context=context,
                                  program=program, answer=json.loads(answer), variables={}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a benchmark's minicache.db")
    ap.add_argument("--first", type=int, default=2, help="examples per group, in stream order (default 2)")
    args = ap.parse_args()
    n = backed = vouched = 0
    total = worst = 0.0
    with SandboxPool(size=1) as sandbox:
        for examples in groups(args.store).values():
            if len(examples) < args.first:
                continue
            t = time.perf_counter()
            candidates, _ = own_candidates(examples[:args.first], "", sandbox, 3)
            took = time.perf_counter() - t
            total, worst, n = total + took, max(worst, took), n + 1
            # as Builder's early build: backed by another example with other values than its own
            backed += any(c.backed and any(values != dict(parse_signature(c.source).defaults)
                                           for _, values in c.agreed) for c in candidates)
            vouched += any(getattr(c, "vouched", c.backed) for c in candidates)  # before 2026-12-04: backed
    print(f"{n} groups with {args.first}+ examples: {backed} with a backed candidate, {vouched} with a vouched one; "
          f"own_candidates {total:.1f} s in all, worst group {worst:.2f} s")


if __name__ == "__main__":
    main()
