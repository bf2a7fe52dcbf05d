#!/usr/bin/env python3
"""How many groups of a committed run have a program another example backs at their first K
examples: as the build compares them today (only examples whose own programs use the same
parameter names), and also through an alignment of the other request with the candidate's own
example (reading exactly the numbers the other example's program used). No model involved.

usage: python scripts/cross_name_backing.py RUN_DIR [--first K] [--groups]

RUN_DIR/minicache.db holds each group's recorded examples (miss programs and answers). A candidate
is an example's program lifted against its own request (``minicache.lifting.lift``); it is backed
when it gives another example's answer on that example's values. ``same names`` takes those values
from the other example's own lifted program when the parameter names are the same
(``minicache.candidates.own_candidates``); ``renamed`` also accepts, where they differ, the
candidate's exemplar (``minicache.align.learn_exemplar`` on its own request) aligned with the other
request, completely or by one exemplar's elimination, when the aligned numbers are exactly the
numbers the other program used. This is the comparison docs/results.md ("At formula-v25") weighs
and leaves out of the build.
"""

from __future__ import annotations

import argparse
import collections
import json
import sqlite3
from pathlib import Path
from typing import Any

from minicache.align import align, learn_exemplar
from minicache.answers import check_answer
from minicache.errors import MiniCacheError
from minicache.lifting import lift
from minicache.request import request_text, shared_prefix, strip_prefix
from minicache.sandbox import SandboxPool
from minicache.synthesis import answers_match, parse_signature


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--first", type=int, default=2, help="examples per group compared (default 2)")
    parser.add_argument("--groups", action="store_true", help="print each group's outcome")
    args = parser.parse_args()
    db = sqlite3.connect(args.run / "minicache.db")
    groups: dict[str, list[tuple[str, str | None, str, Any]]] = collections.defaultdict(list)
    for gid, question, context, program, answer in db.execute(
            "SELECT group_id, question, context, program, answer FROM examples ORDER BY created_at, seq"):
        groups[gid].append((question, context, program, json.loads(answer)))
    tally: collections.Counter[str] = collections.Counter()
    with SandboxPool() as sandbox:
        for gid, rows in groups.items():
            rows = rows[:args.first]
            if len(rows) < args.first:
                continue
            texts = [request_text(q, c) for q, c, _, _ in rows]
            prefix = shared_prefix(texts)
            texts = [strip_prefix(t, prefix) for t in texts]
            lifted = [lift(program, text) for (_, _, program, _), text in zip(rows, texts, strict=True)]
            outcome = {"same names": False, "renamed": False}
            for i, cand in enumerate(lifted):
                if cand is None:
                    continue
                exemplar = learn_exemplar(parse_signature(cand.program).template, texts[i], cand.defaults)
                for j, other in enumerate(lifted):
                    if j == i or other is None:
                        continue
                    how = "same names"
                    values: dict[str, Any] | None = other.defaults
                    if set(other.defaults) != set(cand.defaults):
                        how, values = "renamed", _renamed(exemplar, texts[j], other.defaults)
                    if values is None:
                        continue
                    try:
                        got = check_answer(sandbox.run(cand.program, values).value)
                    except MiniCacheError:
                        continue
                    if answers_match(got, rows[j][3]):
                        outcome[how] = True
            backed_now = outcome["same names"]
            backed_renamed = backed_now or outcome["renamed"]
            tally["groups"] += 1
            tally["same names"] += backed_now
            tally["renamed"] += backed_renamed
            if args.groups:
                print(f"{gid}: same names {'backed' if backed_now else '-'}, "
                      f"renamed {'backed' if backed_renamed else '-'}")
    print(f"groups with {args.first}+ examples: {tally['groups']}; a program backed at {args.first}: "
          f"{tally['same names']} by same names, {tally['renamed']} with renamed comparisons too")


def _renamed(exemplar: dict[str, Any] | None, text: str, own: dict[str, Any]) -> dict[str, Any] | None:
    """The other request's numbers under the candidate's names, read by alignment, when they are
    exactly the numbers the other example's own program used; else None."""
    if exemplar is None or not own:
        return None
    found = align(exemplar, text)
    values = found.values if found.complete else found.by_elimination
    if values is None or sorted(map(repr, values.values())) != sorted(map(repr, own.values())):
        return None
    return values


if __name__ == "__main__":
    main()
