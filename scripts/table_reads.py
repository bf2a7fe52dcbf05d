"""How well a committed TAT-QA run's examples are read from their tables, without a stream.

Two measurements on a benchmark's ``minicache.db`` (its examples: each request the target answered,
with its program) and ``requests.jsonl`` (gold answers, and whether pot was right on each request):

* **replay** (default, no model): the examples in stream order, group by group. A group's first
  example whose values pot got right and whose values are cells of its table (minicache.tables)
  becomes a stand-in entry: its lifted program and its table exemplar. Each later request of the
  group is read from its table; a complete reading runs the program, and the answer is scored
  against gold and against pot on the same request (a hit wrong where pot was right is a cache
  error). No build validation, probation, admission or range check is applied, so this is an upper
  bound on what table hits can serve, not a stream's result.
* ``--model GROUP ...``: for each example of the named groups, the small model (0.5B, embedded)
  chooses its own lifted program's values among the request's numbers, as a build's validation
  would without a table reading; prints the values it chose beside the program's.

    .venv/bin/python scripts/table_reads.py benchmarks/results/tatqa-v6
    .venv/bin/python scripts/table_reads.py benchmarks/results/tatqa-v6 --model grp_d35a80cb1a904a77
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from minicache.align import align
from minicache.bench.data import is_correct, load_tatqa
from minicache.errors import ProgramError, ProgramShapeError
from minicache.lifting import lift
from minicache.request import request_text
from minicache.sandbox import SandboxPool
from minicache.synthesis import ProgramSignature, parse_signature
from minicache.tables import learn_table_exemplar


def signature_of(program: str, text: str) -> tuple[ProgramSignature, str] | None:
    """The example's program as a parameterized one (lifted when it is plain), or None."""
    try:
        return parse_signature(program), program
    except ProgramShapeError:
        lifted = lift(program, text)
        if lifted is None:
            return None
        try:
            return parse_signature(lifted.program), lifted.program
        except ProgramShapeError:
            return None


def replay(run: Path) -> Counter[str]:
    requests = {(r.question, r.context): r for r in load_tatqa()}
    pot: dict[str, bool] = {}
    for line in (run / "requests.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["method"] == "pot":
            pot[row["id"]] = bool(row["correct"])
    counts: Counter[str] = Counter()
    entries: dict[str, tuple[dict[str, Any], str]] = {}
    with sqlite3.connect(run / "minicache.db") as con, SandboxPool(1) as sandbox:
        rows = con.execute("SELECT group_id, question, context, program FROM examples ORDER BY seq").fetchall()
        for group, question, context, program in rows:
            request = requests.get((question, context))
            if request is None or request.id not in pot:
                counts["not in the run's rows"] += 1
                continue
            text = request_text(question, context)
            if group in entries:
                exemplar, source = entries[group]
                found = align(exemplar, text)
                if not found.complete:
                    counts["not read (miss)"] += 1
                    continue
                try:
                    value = sandbox.run(source, found.values).value
                except ProgramError:
                    counts["program failed (miss)"] += 1
                    continue
                right = is_correct(request, value)
                counts["hits"] += 1
                counts["hits right" if right else "hits wrong"] += 1
                counts["cache errors (wrong where pot was right)"] += (not right) and pot[request.id]
                counts["cache gains (right where pot was wrong)"] += right and not pot[request.id]
                continue
            parsed = signature_of(program, text)
            if parsed is None or not pot[request.id]:
                continue
            signature, source = parsed
            learned = learn_table_exemplar(signature.template, text, dict(signature.defaults))
            if learned is not None:
                entries[group] = (learned, source)
                counts["stand-in entries"] += 1
    return counts


def model_reads(run: Path, groups: list[str]) -> None:
    """The small model's reading of each example of ``groups``, from a copy of the run's store (the
    committed one is never opened) and with the small model alone loaded."""
    from minicache.extraction import Extractor
    from minicache.models.base import set_real_models_allowed
    from minicache.models.llamacpp import LlamaCppBackend
    from minicache.store import SQLiteStore

    set_real_models_allowed(True)
    extractor = Extractor(LlamaCppBackend.embedded("small"))
    right = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(run / "minicache.db", Path(tmp) / "minicache.db")
        store = SQLiteStore(Path(tmp) / "minicache.db")
        try:
            for group in groups:
                for ex in store.examples("default", group):
                    text = request_text(ex.question, ex.context)
                    parsed = signature_of(ex.program, text)
                    if parsed is None:
                        continue
                    signature = parsed[0]
                    chosen = extractor.by_model(signature.template, text, choice=True).variables
                    total += 1
                    right += chosen == dict(signature.defaults)
                    print(f"{ex.question[:60]!r}: program {dict(signature.defaults)}, model {chosen}")
        finally:
            store.close()
    print(f"the small model chose the program's own values on {right} of {total} examples")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a benchmark's results folder (minicache.db, requests.jsonl)")
    ap.add_argument("--model", nargs="+", metavar="GROUP", help="the small model reads these groups' examples")
    args = ap.parse_args()
    if args.model:
        model_reads(args.run, args.model)
        return
    for name, n in replay(args.run).items():
        print(f"{name}: {n}")


if __name__ == "__main__":
    main()
