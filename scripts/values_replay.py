#!/usr/bin/env python3
"""Replay the hit path's value checks (``minicache.hit.check_values``: range, unit, unwritten) on the
hits of a committed run whose programs return their variables (WebShop's search actions), no model.

usage: python scripts/values_replay.py RUN_DIR [--dataset webshop]

Each hit's served answer is its variables there; they are checked against its entry's stored
profile, with the request text as the hit path saw it. Prints, by extraction path and whether the
hit was right, how many the checks keep and refuse, and each refusal. The value range is taken as
wide (1000x) so that only the written-form checks can refuse; the served hits passed the run's own.
"""

from __future__ import annotations

import argparse
import collections
import json
import sqlite3
from pathlib import Path

from minicache.bench.data import LOADERS
from minicache.errors import HitRefused
from minicache.hit import check_values
from minicache.request import request_text, strip_prefix
from minicache.store.base import Variable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--dataset", default="webshop")
    args = parser.parse_args()
    db = sqlite3.connect(args.run / "minicache.db")
    entries = {gid: (json.loads(t), json.loads(v))
               for gid, t, v in db.execute("SELECT group_id, template, validation FROM entries")}
    requests = {r.id: r for r in LOADERS[args.dataset]()}
    tally: collections.Counter[tuple[str, bool, str]] = collections.Counter()
    for line in open(args.run / "requests.jsonl", encoding="utf-8"):
        row = json.loads(line)
        if row["method"] != "minicache" or row["route"] != "hit" or not isinstance(row["answer"], dict):
            continue
        template, validation = entries[row["detail"]["group"]]
        req = requests[row["id"]]
        text = strip_prefix(request_text(req.question, req.context), validation.get("shared_prefix", ""))
        try:
            check_values(validation["profile"], [Variable(**v) for v in template], row["answer"], text, 1000.0)
            outcome = "kept"
        except HitRefused as exc:
            outcome = "refused"
            print(f"{row['id']}: {exc}")
        tally[(row["detail"].get("extraction"), bool(row["correct"]), outcome)] += 1
    for (path, right, outcome), n in sorted(tally.items()):
        print(f"{path:8s} {'right' if right else 'wrong':5s} {outcome:8s} {n}")


if __name__ == "__main__":
    main()
