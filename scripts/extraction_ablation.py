"""What does each hit-path extraction method buy? Measured on the embedded models.

    .venv/bin/python scripts/extraction_ablation.py [--groups 6] [--warm 3] [--held 5]

For G Formula groups, W requests per group go through MiniCache (cold cache, synchronous builds)
so that entries are built and validated. Then H held-out requests of every group with an entry are
served three ways with the same entry: learned rules (when they apply), candidate choice (the small
model picks among the request's numbers), and free extraction (the small model writes the numbers).
For each: how often it applies, mean/p50 latency of extraction + program, and accuracy vs gold.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import OrderedDict

from minicache.datasets import formula
from minicache.engine import EngineConfig, MiniCache, SolveError, check_answer
from minicache.errors import ProgramError
from minicache.extraction import ExtractionError
from minicache.synthesis import answers_match


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=6)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--held", type=int, default=5)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args()

    by_group: OrderedDict[str, list] = OrderedDict()
    for r in formula("train"):
        by_group.setdefault(r.group, []).append(r)
    names = list(by_group)[:: max(1, len(by_group) // args.groups)][: args.groups]
    with tempfile.TemporaryDirectory() as tmp, MiniCache.local(store=f"{tmp}/mc.db",
                                                              config=EngineConfig(background_builds=False)) as mc:
        group_of = {}
        for name in names:
            for r in by_group[name][: args.warm]:
                try:
                    group_of[name] = mc.solve(r.question).group
                except SolveError as exc:
                    print(f"{name}: miss failed: {exc}")
        rows = []
        for name in names:
            entry = mc.store.active_entry("default", group_of[name]) if name in group_of else None
            if entry is None:
                print(f"{name}: no validated entry after {args.warm} requests")
                continue
            print(f"{name}: rules {entry.rules}")
            for r in by_group[name][args.warm: args.warm + args.held]:
                text = mc.extractor.text_for(entry, r.question)  # as the hit path reads it
                for method in ("rule", "choice", "free"):
                    t = time.perf_counter()
                    try:
                        if method == "rule":
                            values = mc.extractor.by_rules(entry, text)
                            if values is None:
                                rows.append({"group": name, "method": method, "applied": False})
                                continue
                        else:
                            values = mc.extractor.by_model(entry.template, text, choice=(method == "choice")).variables
                        value = check_answer(mc.sandbox.run(entry.program, values).value)
                        ok = answers_match(value, r.answer)
                    except (ExtractionError, ProgramError) as exc:
                        value, ok = f"error: {exc}", False
                    rows.append({"group": name, "method": method, "applied": True, "seconds": time.perf_counter() - t,
                                 "correct": ok, "answer": value, "gold": r.answer})
    print(f"{'method':<8} {'applied':>9} {'mean s':>8} {'p50 s':>7} {'accuracy':>9}")
    for method in ("rule", "choice", "free"):
        mine = [x for x in rows if x["method"] == method]
        used = [x for x in mine if x["applied"]]
        secs = [x["seconds"] for x in used]
        acc = sum(x["correct"] for x in used) / len(used) if used else 0.0
        print(f"{method:<8} {len(used):>4}/{len(mine):<4} {statistics.mean(secs) if secs else 0:8.3f} "
              f"{statistics.median(secs) if secs else 0:7.3f} {acc:9.0%}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=2, default=str)


if __name__ == "__main__":
    main()
