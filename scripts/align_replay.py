#!/usr/bin/env python3
"""Replay zero-model alignment on a committed Formula run, with this checkout's minicache/align.py
against another revision's, no model involved.

usage: python scripts/align_replay.py RUN_DIR [--base REV] [--dataset NAME]
       (REV: a git revision, default HEAD~1; NAME: the run's dataset, default formula)

For each entry in RUN_DIR/minicache.db: the group's stored examples that the entry's stored
exemplars align right (the entry's program, run in the sandbox, gives the example's answer) are the
validated pairs; both versions learn exemplars from those same pairs (``learn_exemplars``), then
align every request of the group in RUN_DIR/requests.jsonl (minicache's rows, by routed group).
A request counts as **right** or **wrong** when every complete alignment agrees and the program on
its values gives (or not) the dataset's answer (the benchmark's tolerance), **disagree** when two
exemplars align it differently, **incomplete** otherwise. Where no exemplar aligns completely, a
reading by elimination counts as the hit path takes it (``HitVerifier.aligned``: every exemplar, two at
least, reads the same; revisions without it have none). Prints the counts per version and each
request whose outcome differs, with the route the run gave it and whether pot was right. Requests of
every route are aligned, hits or not: this measures the alignment, not what the run served.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from minicache import align as current
from minicache.answers import check_answer
from minicache.bench.data import LOADERS
from minicache.errors import MiniCacheError
from minicache.request import request_text, strip_prefix
from minicache.sandbox import SandboxPool
from minicache.store.base import Variable
from minicache.synthesis import answers_match


def module_at(rev: str, tmp: Path) -> ModuleType:
    """minicache/align.py as it was at ``rev``, importable beside the current package."""
    source = subprocess.run(["git", "show", f"{rev}:minicache/align.py"], check=True, capture_output=True,
                            text=True).stdout
    path = tmp / "align_base.py"
    path.write_text(source.replace("from .", "from minicache."), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("align_base", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["align_base"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--base", default="HEAD~1")
    parser.add_argument("--dataset", default="formula", choices=sorted(LOADERS))
    args = parser.parse_args()
    requests = {r.id: r for r in LOADERS[args.dataset]()}
    rows = [json.loads(line) for line in open(args.run / "requests.jsonl", encoding="utf-8")]
    pot_right = {r["id"]: bool(r.get("correct")) for r in rows if r["method"] == "pot"}
    by_group: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in rows:
        detail = r.get("detail") if isinstance(r.get("detail"), dict) else {}
        if r["method"] == "minicache" and detail.get("group"):
            by_group[detail["group"]].append(r)
    db = sqlite3.connect(args.run / "minicache.db")
    with tempfile.TemporaryDirectory() as tmp, SandboxPool() as sandbox:
        versions = {"base": module_at(args.base, Path(tmp)), "current": current}
        tally = {name: collections.Counter() for name in versions}
        differ = []

        def answer(program: str, values: dict[str, Any]) -> Any:
            try:
                return check_answer(sandbox.run(program, values).value)
            except MiniCacheError:
                return None

        for gid, program, template, validation in db.execute(
                "SELECT group_id, program, template, validation FROM entries"):
            variables = [Variable(**v) for v in json.loads(template)]
            validation = json.loads(validation)
            prefix = validation.get("shared_prefix", "")
            stored = (validation.get("profile") or {}).get("exemplars", [])
            pairs = []
            for question, context, gold in db.execute(
                    "SELECT question, context, answer FROM examples WHERE group_id = ? ORDER BY created_at", (gid,)):
                text = strip_prefix(request_text(question, context), prefix)
                for exemplar in stored:
                    found = versions["base"].align(exemplar, text)
                    if found.complete and answers_match(answer(program, found.values), json.loads(gold)):
                        pairs.append((text, found.values))
                        break
            learned = {name: m.learn_exemplars(variables, pairs) for name, m in versions.items()}
            for row in by_group[gid]:
                req = requests[row["id"]]
                text = strip_prefix(request_text(req.question, req.context), prefix)
                outcome = {}
                for name, m in versions.items():
                    found = [m.align(e, text) for e in learned[name]]
                    complete = [f.values for f in found if f.complete]
                    whole = [getattr(f, "by_elimination", None) for f in found]
                    if not complete and len(whole) >= 2 and all(w is not None and w == whole[0] for w in whole):
                        complete = [whole[0]]
                    if not complete:
                        outcome[name] = "incomplete"
                    elif any(values != complete[0] for values in complete):
                        outcome[name] = "disagree"
                    else:
                        right = answers_match(answer(program, complete[0]), gold_of(req.answer))
                        outcome[name] = "right" if right else "wrong"
                    tally[name][outcome[name]] += 1
                if outcome["base"] != outcome["current"]:
                    how = row["detail"].get("extraction") or row["route"]
                    reason = (row["detail"].get("fallback_reason") or "").split(":")
                    how += f" ({reason[1].strip()})" if len(reason) > 1 else ""
                    differ.append((row["id"], gid, outcome["base"], outcome["current"], how,
                                   "pot right" if pot_right.get(row["id"]) else "pot wrong"))
    for name, counts in tally.items():
        print(f"{name:8s} " + ", ".join(f"{k} {counts[k]}" for k in ("right", "wrong", "disagree", "incomplete")))
    for rid, gid, before, after, how, pot in differ:
        print(f"  {rid} ({gid}): {before} -> {after}; the run: {how}, {pot}")


def gold_of(answer: Any) -> Any:
    """The dataset's answer as answers_match takes it: a number where it is one (Formula, SVAMP)."""
    try:
        return float(answer)
    except (TypeError, ValueError):
        return answer


if __name__ == "__main__":
    sys.exit(main())
