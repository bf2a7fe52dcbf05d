"""How often a request's nearest earlier request (by wording) needs the same computation.

For each request of a run's stream (in the order of ``RUN/requests.jsonl``), the earlier request
whose words overlap most (Jaccard over lower-cased words, numbers masked) is its nearest; if the
overlap exceeds ``--min-overlap``, the pair counts as near-duplicates, and the dataset's gold label
says whether they share the computation. On SVAMP most near-duplicates ask another question of the
same story, which is why a cache that reused the nearest request's program would mostly be wrong.

    python3 scripts/near_duplicates.py benchmarks/results/svamp-v5 --dataset svamp
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from minicache.bench.data import load


def words(text: str) -> set[str]:
    return set(re.sub(r"\d+(?:\.\d+)?", "N", text.lower()).split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--min-overlap", type=float, default=0.6)
    args = ap.parse_args()
    requests = {str(r.id): r for r in load(args.dataset)}
    order: list[str] = []
    for line in (args.run / "requests.jsonl").read_text().splitlines():
        row = json.loads(line)
        if str(row["id"]) not in order:
            order.append(str(row["id"]))
    seen: list[tuple[str, set[str]]] = []
    near = same = 0
    for rid in order:
        mine = words(requests[rid].question)
        scored = [(len(mine & w) / len(mine | w), other) for other, w in seen]
        if scored:
            overlap, other = max(scored)
            if overlap > args.min_overlap:
                near += 1
                same += requests[rid].group == requests[other].group
        seen.append((rid, mine))
    print(f"{len(order)} requests; {near} have an earlier near-duplicate (word overlap > {args.min_overlap}); "
          f"{same} of those need the same computation ({same / near:.0%})" if near else f"{len(order)} requests; none")


if __name__ == "__main__":
    main()
