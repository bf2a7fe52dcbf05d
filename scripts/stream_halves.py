"""A method against pot on the first and second half of its stream (cold cache, then warm).

    .venv/bin/python scripts/stream_halves.py benchmarks/results/formula [--method minicache] [--ref pot]

Reads DIR/requests.jsonl only. The halves are cut in the order the method measured its rows;
the baseline is scored on the same requests.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from minicache.bench.runner import read_done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--method", default="minicache")
    ap.add_argument("--ref", default="pot")
    args = ap.parse_args()
    rows: dict[str, dict[str, dict]] = {}
    for (method, rid), row in read_done(args.dir / "requests.jsonl").items():
        rows.setdefault(method, {})[rid] = row
    stream = sorted(rows[args.method].values(), key=lambda r: r.get("started_at") or 0)
    half = (len(stream) + 1) // 2
    for label, first, last in (("first half", 0, half), ("second half", half, len(stream))):
        part = stream[first:last]
        ref = [rows[args.ref][str(r["id"])] for r in part]
        hits = statistics.fmean(r["route"] == "hit" for r in part)
        print(f"{label} (requests {first + 1}-{last}): "
              f"{args.method} {_stats(part)}, {hits:.1%} hits; {args.ref} {_stats(ref)}")


def _stats(rows: list[dict]) -> str:
    return (f"{statistics.fmean(r['latency_s'] for r in rows):.2f} s, "
            f"{statistics.fmean(bool(r['correct']) for r in rows):.1%} correct")


if __name__ == "__main__":
    main()
