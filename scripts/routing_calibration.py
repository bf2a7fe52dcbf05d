"""Routing calibration: replay a request stream through nearest-example routing at several thresholds
and report how many groups form and how many requests land in a group of another computation.

    .venv/bin/python scripts/routing_calibration.py

Formula: 20 formulas x 8 requests (label = formula). SVAMP (from ../shared/data/svamp if present):
300 random problems (label = equation with numbers masked), the near-duplicate stress case.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from minicache.embedding import shared_embedder
from minicache.mainjob import formula_stream
from minicache.routing import skeleton


def assign(vectors: np.ndarray, threshold: float) -> list[int]:
    """Each request's group (the index of its group's first request): the group of its most similar
    earlier request if the cosine reaches ``threshold``, else its own (Router.route, uncapped)."""
    group_of: list[int] = []
    for i in range(len(vectors)):
        g = i
        if i:
            sims = vectors[:i] @ vectors[i]
            j = int(np.argmax(sims))
            if sims[j] >= threshold:
                g = group_of[j]
        group_of.append(g)
    return group_of


def replay(vectors: np.ndarray, labels: list[str], threshold: float) -> tuple[int, int, int, int]:
    """Groups formed, requests outside their group's majority, and - treating every request after a
    group's third as a hit on an entry built from the first three - hits and wrong hits."""
    members: dict[int, list[int]] = defaultdict(list)
    hits = wrong = 0
    for i, g in enumerate(assign(vectors, threshold)):
        if len(members[g]) >= 3:
            hits += 1
            wrong += labels[i] != Counter(labels[k] for k in members[g][:3]).most_common(1)[0][0]
        members[g].append(i)
    impure = sum(len(v) - Counter(labels[k] for k in v).most_common(1)[0][1] for v in members.values())
    return len(members), impure, hits, wrong


def report(name: str, texts: list[str], labels: list[str]) -> None:
    vectors = shared_embedder().embed([skeleton(t) for t in texts])
    print(f"{name}: {len(texts)} requests, {len(set(labels))} true groups")
    for threshold in (0.75, 0.80, 0.84, 0.88, 0.92):
        groups, impure, hits, wrong = replay(vectors, labels, threshold)
        print(f"  threshold {threshold:.2f}: {groups:4d} groups, {impure:4d} requests in another computation's group; "
              f"would-be hits {hits:4d}, of them wrong {wrong:4d}")


def main() -> None:
    stream = formula_stream(20, 8, seed=3)
    report("FinLoRA Formula", [r.question for r in stream], [r.group or "" for r in stream])
    svamp = Path(__file__).resolve().parents[2] / "shared" / "data" / "svamp" / "SVAMP.json"
    if svamp.exists():
        rows = random.Random(0).sample(json.loads(svamp.read_text()), 300)
        report("SVAMP", [r["Body"].strip() + " " + r["Question"].strip() for r in rows],
               [re.sub(r"[\d.]+", "N", r["Equation"]).replace(" ", "") for r in rows])


if __name__ == "__main__":
    main()
