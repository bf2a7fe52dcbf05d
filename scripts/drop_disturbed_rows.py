"""Drop benchmark rows that were measured while something else loaded the machine.

    .venv/bin/python scripts/drop_disturbed_rows.py WINDOWS.log DIR --methods pot,direct [--dry-run]

WINDOWS.log holds lines ``<unix time> devwin start ...`` and ``<unix time> devwin end ...`` written
around any other work done during a run. Every row of DIR/requests.jsonl whose method is listed
and whose measurement (``started_at`` to ``started_at + latency_s``) overlaps a window is removed,
so that rerunning the same ``minicache bench`` command measures those requests again. Only
stateless methods (pot, direct, pot-spec) can be measured again one request at a time; a stateful
method's stream (minicache, exact, gptcache, gencache) has to be run again whole.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def windows(path: Path) -> list[tuple[float, float]]:
    out, start = [], None
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        if parts[1] == "devwin" and parts[2].startswith("start"):
            start = float(parts[0])
        elif parts[1] == "devwin" and parts[2].startswith("end") and start is not None:
            out.append((start, float(parts[0])))
            start = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("windows", type=Path)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--methods", required=True)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    methods = set(args.methods.split(","))
    spans = windows(args.windows)
    path = args.dir / "requests.jsonl"
    kept, dropped = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        start = row.get("started_at")
        end = (start or 0) + row["latency_s"]
        if row["method"] in methods and start and any(start < b + 1 and end > a - 1 for a, b in spans):
            dropped.append(row)
        else:
            kept.append(line)
    for row in dropped:
        print(f"drop {row['method']} {row['id']} ({row['latency_s']:.1f} s)")
    print(f"{len(dropped)} rows overlap {len(spans)} windows")
    if not args.dry_run:
        path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")


if __name__ == "__main__":
    main()
