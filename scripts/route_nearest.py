#!/usr/bin/env python3
"""Why a request of a committed run started a new group: its skeleton's cosine (lexical embedder,
the default router's) to the examples the group it would have joined had recorded before it, and
to the hits that group had served before it. No model involved.

usage: python scripts/route_nearest.py RUN_DIR REQUEST_ID [--group GROUP_ID] [--dataset NAME]

GROUP_ID defaults to the group of the run's first minicache request. Examples are the requests the
miss path answered in that group (misses and refused hits, which are recorded), in stream order;
hits are not recorded as examples, so the router does not see them. The router joins the nearest
example's group when the cosine reaches its threshold (0.82 for the lexical embedder).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from minicache.bench.data import LOADERS
from minicache.lexical import LexicalEmbedder
from minicache.request import request_text
from minicache.routing import skeleton


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("request")
    parser.add_argument("--group")
    parser.add_argument("--dataset", default="webshop", choices=sorted(LOADERS))
    args = parser.parse_args()
    requests = {r.id: r for r in LOADERS[args.dataset]()}
    rows = [json.loads(line) for line in open(args.run / "requests.jsonl", encoding="utf-8")]
    served = [r for r in rows if r["method"] == "minicache"]
    group = args.group or (served[0].get("detail") or {}).get("group")
    embedder = LexicalEmbedder()

    def vector(rid: str) -> np.ndarray:
        req = requests[rid]
        return embedder.embed([skeleton(request_text(req.question, req.context))])[0]

    target = vector(args.request)
    before = served[:next(i for i, r in enumerate(served) if r["id"] == args.request)]
    for label, route in (("examples", "miss"), ("hits", "hit")):
        ids = [r["id"] for r in before if r["route"] == route and (r.get("detail") or {}).get("group") == group]
        sims = [float(vector(i) @ target) for i in ids]
        best = f"{max(sims):.3f}" if sims else "-"
        print(f"{args.request} against {group}'s {len(ids)} {label} before it: nearest {best}")


if __name__ == "__main__":
    main()
