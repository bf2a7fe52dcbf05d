"""How much the machine's speed moved between two measurements of the same generations.

    .venv/bin/python scripts/speed_drift.py A.jsonl[:METHOD[:ROUTE]] B.jsonl[:METHOD[:ROUTE]]

Greedy decoding makes a request's program a function of its prompt. So two rows for the same
request with the same target-token count did the same model work. Examples: pot measured twice,
or pot and a cache's miss (which sends pot's prompt). Their latency ratio is then the machine's
speed ratio between the two times, plus the second method's own overhead. The machine is a VM
on a shared host, and its speed drifts over hours. This script says by how much. Latencies
measured hours apart are only compared after it has been run.

Prints the number of matched rows, and the median and mean of latency(B) / latency(A).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from minicache.bench.runner import read_done


def rows(spec: str) -> dict[str, dict]:
    path, _, rest = spec.partition(":")
    method, _, route = rest.partition(":")
    return {rid: row for (m, rid), row in read_done(Path(path)).items()
            if (not method or m == method) and (not route or row["route"] == route)}


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = rows(sys.argv[1]), rows(sys.argv[2])
    ratios = [b[k]["latency_s"] / a[k]["latency_s"] for k in a.keys() & b.keys()
              if a[k]["tokens"]["target"] and a[k]["tokens"]["target"] == b[k]["tokens"]["target"]
              and a[k]["latency_s"] > 0]
    if not ratios:
        sys.exit("no request with the same target-token count in both")
    print(f"{len(ratios)} requests with identical target tokens; latency B/A: "
          f"median {statistics.median(ratios):.2f}, mean {statistics.fmean(ratios):.2f}")


if __name__ == "__main__":
    main()
