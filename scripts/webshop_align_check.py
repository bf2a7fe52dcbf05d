"""Zero-model alignment of WebShop's search actions, offline: how many instructions align, and rightly.

No model runs. The exemplars are learned from the first ``--exemplars`` instructions of the dataset
with the *reference* action as their validated values (``minicache.bench.data.webshop_gold``: the
instruction minus its price clause and filler words), standing in for the target's own keywords,
which only a model run gives. Every other instruction is aligned (the first complete alignment
wins, as on the hit path), and the result is scored with the benchmark's own check
(``action_matches``: the same max_price, at least half the reference keywords' content words).

    .venv/bin/python scripts/webshop_align_check.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minicache.align import align, learn_exemplar
from minicache.bench.data import action_matches, load
from minicache.request import shared_prefix, strip_prefix
from minicache.store.base import Variable

TEMPLATE = [Variable("keywords", "string"), Variable("max_price", "number")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exemplars", type=int, default=3, help="instructions the exemplars are learned from")
    args = parser.parse_args()
    requests = load("webshop")
    prefix = shared_prefix([r.question for r in requests[: args.exemplars]])
    exemplars = [e for r in requests[: args.exemplars]
                 if (e := learn_exemplar(TEMPLATE, strip_prefix(r.question, prefix), dict(r.answer))) is not None]
    right = wrong = refused = 0
    for r in requests[args.exemplars:]:
        found = [a for e in exemplars if (a := align(e, strip_prefix(r.question, prefix))).complete]
        if not found:
            refused += 1
        elif action_matches(found[0].values, r.answer):
            right += 1
        else:
            wrong += 1
    print(json.dumps({"instructions": len(requests) - args.exemplars, "exemplars": len(exemplars),
                      "aligned_right": right, "aligned_wrong": wrong, "not_aligned": refused}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
