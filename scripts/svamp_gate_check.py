"""Would a computation check before a hit separate SVAMP's mixed groups? (offline, no generating model)

Follows ``svamp_mixing_check.py`` (same stream, MiniLM routing, gold equations as idealized programs,
builds at 3 examples) and replays the hit attempts under candidate gates. A refused attempt is a
miss and is recorded in its group, as the engine would record it. Gates:

* ``none`` - serve every attempt (what the engine does today once values are extracted);
* ``knn-all`` - serve only if every example recorded in the group agrees with the entry (its own
  program, run on its values, gives the entry's answer);
* ``question`` - serve only if an agreeing example asks the same question sentence (numbers
  masked, lower case; from the question word to the end of the last sentence with a ``?``);
* ``template`` - serve only if an agreeing example has the same whole skeleton (same template);
* ``probation-P`` - an entry's first P attempts are answered by the miss path and compared; one
  disagreement and the entry serves nothing more. (The reference here is the gold program, so this
  is the best case: a real miss is wrong on some requests, and a disagreement is then a false alarm.)

    .venv/bin/python scripts/svamp_gate_check.py [--vectors FILE.npy]

``--vectors`` keeps the MiniLM embeddings of the 300 skeletons in a file (computed if absent).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from svamp_mixing_check import agrees as program_agrees
from svamp_mixing_check import chosen, program, route

from minicache.bench.data import load, select
from minicache.routing import skeleton

_SENTENCE = re.compile(r"(?<=[.?!])\s+")
_ASKS = re.compile(r"\b(how|what|which|find|calculate|compute|determine)\b.*", re.I)


def question_form(text: str) -> str:
    parts = [p.strip() for p in _SENTENCE.split(text.strip()) if p.strip()]
    asked = [p for p in parts if "?" in p]
    sentence = asked[-1] if asked else parts[-1]
    found = _ASKS.search(sentence)  # SVAMP often runs "If ... How many" together in one sentence
    return normal(found.group(0) if found else sentence)


def normal(text: str) -> str:
    return re.sub(r"\W+", " ", skeleton(text).lower()).strip()


def replay(gate: str, groups: list[str], programs: list[tuple[str, list[float]]], gold: list[float],
           same: Callable[[int, int], bool]) -> dict[str, int]:
    def agrees(entry: dict, i: int) -> bool:
        return program_agrees(entry["expr"], entry["arity"], programs[i], gold[i])

    members: dict[str, list[int]] = collections.defaultdict(list)
    entries: dict[str, dict] = {}
    counts: collections.Counter[str] = collections.Counter()
    for n, group in enumerate(groups):
        entry = entries.get(group)
        if entry is not None:
            right = agrees(entry, n)
            ids = members[group]
            if gate.startswith("probation") and entry["shadowed"] < int(gate.split("-")[1]) and not entry["failed"]:
                entry["shadowed"] += 1
                entry["failed"] |= not right
                counts["probation misses"] += 1
                members[group].append(n)
                continue
            serve = {"none": True, "knn-all": all(agrees(entry, i) for i in ids),
                     "question": any(same(i, n) and agrees(entry, i) for i in ids),
                     "template": any(same(i, n) and agrees(entry, i) for i in ids)}.get(gate, not entry["failed"])
            if serve:
                counts["served right" if right else "served wrong"] += 1
                continue
            counts["refused, entry's computation" if right else "refused, other computation"] += 1
            members[group].append(n)
            continue
        members[group].append(n)
        ids = members[group]
        if len(ids) < 3:
            continue
        c = chosen(ids, programs, gold)
        if c is not None:
            entries[group] = {"expr": programs[c][0], "arity": len(programs[c][1]), "shadowed": 0, "failed": False}
    if gate.startswith("probation"):
        probed = [e for e in entries.values() if e["shadowed"]]
        counts["entries probed"], counts["entries failing probation"] = len(probed), sum(e["failed"] for e in probed)
    return dict(counts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", type=Path, help="cache of the MiniLM embeddings (.npy)")
    args = parser.parse_args()
    rows = {f"svamp-{r['ID']}": r for r in json.loads(
        (Path(__file__).resolve().parents[1] / "minicache/data/svamp/SVAMP.json").read_text(encoding="utf-8"))}
    stream = select(load("svamp"), limit=300, groups=None, seed=0)
    if args.vectors and args.vectors.exists():
        vectors = np.load(args.vectors)
    else:
        from minicache.embedding import MiniLMEmbedder

        vectors = MiniLMEmbedder().embed([skeleton(r.question) for r in stream]).astype(np.float32)
        if args.vectors:
            np.save(args.vectors, vectors)
    groups = route(vectors)
    programs = [program(rows[r.id]["Equation"]) for r in stream]
    gold = [float(r.answer) for r in stream]
    forms = [question_form(r.question) for r in stream]
    templates = [normal(r.question) for r in stream]
    for gate in ("none", "knn-all", "question", "template", "probation-1", "probation-2"):
        keys = forms if gate == "question" else templates
        same = lambda i, n, keys=keys: keys[i] == keys[n]  # noqa: E731
        print(json.dumps({"gate": gate, **replay(gate, groups, programs, gold, same)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
