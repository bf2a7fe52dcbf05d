"""Replay committed benchmark streams through nearest-example routing with each routing embedder.

For each stream (the minicache rows of a committed ``requests.jsonl``, in the order the run sent
them; the label is the row's gold group: the formula on Formula, the equation with its numbers
masked on SVAMP, the derivation's equation with its numbers masked on TAT-QA, one label on WebShop) every request joins
the group of its most similar earlier request if the cosine similarity is at least the threshold,
or starts a group (what ``minicache.routing.Router`` does, without the per-group cap). Printed per
embedder and threshold: groups formed, requests outside their group's majority label (impure), and
groups per label (over-splitting), and the embedder's time per request on this machine; and, at the
embedder's own threshold, routing_calibration.py's would-be hits and wrong ones. Then the
same for all 999 packaged Formula requests (50 formulas, label = formula) in the data's order. No
LLM runs.

    .venv/bin/python scripts/routing_embedders.py
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from minicache.bench.data import load
from minicache.blas import one_blas_thread
from minicache.routing import route_embedder, skeleton, threshold_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
from routing_calibration import assign, replay

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
STREAMS = [("formula", "formula-v17"), ("svamp", "svamp-v9"), ("tatqa", "tatqa-v9"), ("webshop", "webshop-v2")]
THRESHOLDS = (0.75, 0.78, 0.80, 0.82, 0.85, 0.90)


def stream(dataset: str, run: str) -> tuple[list[str], list[str]]:
    requests = {str(r.id): r for r in load(dataset)}
    rows = [json.loads(line) for line in (RESULTS / run / "requests.jsonl").read_text().splitlines() if line.strip()]
    chosen = [r for r in rows if r["method"] == "minicache"]
    return [skeleton(requests[str(r["id"])].question) for r in chosen], [str(r["group"]) for r in chosen]


def purity(vectors: np.ndarray, labels: list[str], threshold: float) -> tuple[int, int, float]:
    """Groups formed, requests outside their group's majority label, and groups per label."""
    group_of = assign(vectors, threshold)
    members: dict[int, list[str]] = defaultdict(list)
    per_label: dict[str, set[int]] = defaultdict(set)
    for label, g in zip(labels, group_of, strict=True):
        members[g].append(label)
        per_label[label].add(g)
    impure = sum(len(m) - Counter(m).most_common(1)[0][1] for m in members.values())
    return len(members), impure, float(np.mean([len(s) for s in per_label.values()]))


def main() -> None:
    names = sys.argv[1:] or ["lexical", "minilm"]
    streams = {dataset: stream(dataset, run) for dataset, run in STREAMS}
    formula = load("formula")  # all 999 packaged requests (50 formulas), in the data's order
    streams["formula-all"] = ([skeleton(r.question) for r in formula], [str(r.group) for r in formula])
    for name in names:
        embedder = route_embedder(name)
        embedder.embed(["warm up"])
        print(f"{name}: groups / requests outside their group's majority / groups per label")
        for dataset, (texts, labels) in streams.items():
            with one_blas_thread():  # as routing runs it (minicache.embedding)
                began = time.perf_counter()
                vectors = np.stack([embedder.embed([t])[0] for t in texts]).astype(np.float32)
                ms = (time.perf_counter() - began) / len(texts) * 1000
            cells = []
            for threshold in THRESHOLDS:
                groups, impure, per = purity(vectors, labels, threshold)
                cells.append(f"{threshold:.2f}: {groups:3d}/{impure:3d}/{per:5.2f}")
            head = f"  {dataset:11s} {len(texts):3d} requests, {len(set(labels)):2d} labels, {ms:6.2f} ms  "
            print(head + "  ".join(cells))
            threshold = threshold_for(embedder)
            _, _, hits, wrong = replay(vectors, labels, threshold)
            print(f"  {'':11s} at {threshold:.2f}: would-be hits {hits} (every request after its group's third), "
                  f"{wrong} of them in another computation than the group's first three")


if __name__ == "__main__":
    main()
