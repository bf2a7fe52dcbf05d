"""How often the coarse buckets route a real request where exact search does (minicache.route_partition).

scripts/route_latency.py checks the buckets on synthetic clusters, which are easy. This script uses
the embedded MiniLM model on every request of the bundled datasets (Formula, TAT-QA, SVAMP, WebShop
instructions), embedded as routing embeds them (their skeletons):

1. groups are formed as the router forms them: requests in a seeded shuffled order, each joining the
   group of its nearest kept vector at cosine >= the threshold (exact search) or starting one; the
   first ``--train`` share of the requests fills the index;
2. each remaining request is routed against that frozen index twice, exactly and through the buckets
   (``exact_rows=0``, so the buckets are used whatever the size), and the two decisions compared: the
   same group joined, or both starting a new group.

Prints one JSON line: requests, groups, buckets, the agreement, and the disagreements split into
"other group" (joined a different group above the threshold) and "new group instead" (started a
group where exact search joined one: an over-split, which costs that request's group a cold start).
The buckets search a subset of the rows, so they cannot join where exact search starts a group.

    .venv/bin/python scripts/route_partition_check.py    # about 7 minutes here: 3,916 texts on one core
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minicache.bench.data import load
from minicache.embedding import MiniLMEmbedder
from minicache.route_index import TenantIndex
from minicache.routing import skeleton

DATASETS = ("formula", "tatqa", "svamp", "webshop")


def decide(index: TenantIndex, vector: np.ndarray, threshold: float) -> str | None:
    group, sim = index.nearest(vector)
    return group if group is not None and sim >= threshold else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threshold", type=float, default=0.80, help="the router's join threshold (default 0.80)")
    parser.add_argument("--train", type=float, default=0.8, help="share of requests that fill the index")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    texts = [skeleton(r.question) for name in DATASETS for r in load(name)]
    order = np.random.default_rng(args.seed).permutation(len(texts))
    embedder = MiniLMEmbedder()
    vectors = np.concatenate([embedder.embed([texts[i] for i in order[lo:lo + 256]])
                              for lo in range(0, len(order), 256)]).astype(np.float32)
    cut = int(len(vectors) * args.train)
    exact = TenantIndex(per_group=32, exact_rows=10**12)
    bucketed = TenantIndex(per_group=32, exact_rows=0)
    made = 0
    for v in vectors[:cut]:
        group = decide(exact, v, args.threshold)
        if group is None:
            group, made = f"g{made}", made + 1
        exact.add(group, v)
        bucketed.add(group, v)
    same = other = split = joined_instead = 0
    for v in vectors[cut:]:
        a, b = decide(exact, v, args.threshold), decide(bucketed, v, args.threshold)
        if a == b:
            same += 1
        elif a is not None and b is None:
            split += 1
        elif a is None:
            joined_instead += 1
        else:
            other += 1
    routed = len(vectors) - cut
    print(json.dumps({"requests": len(vectors), "indexed": cut, "routed": routed, "groups": len(exact.groups),
                      "rows": exact.rows, "buckets": len(bucketed.partition.centres) if bucketed.partition else 0,
                      "same": round(same / routed, 4), "other_group": other, "new_group_instead": split,
                      "joined_instead_of_new": joined_instead}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
