"""Replay a run's refused would-be hits through today's hit verifier: with a second choice, or another model choosing.

For each minicache row of ``RUN/requests.jsonl`` that fell back on a refusal of one of the ``--checks``
(by default the refutations that get a second choice: range, unit, unwritten, duplicate; ``all``: every
refusal but probation, audit and answer), the group's entry that was active when the request came (the
latest one created before it, from ``RUN/minicache.db``) verifies the request again: a hit runs the
entry's program in the sandbox and its answer is compared with the gold answer and with pot's on the
same request (same row file). Nothing is written to the run's folder (the store is copied to a
temporary file). ``--model target`` has the target choose the values instead of the small model (would
escalating a refused choice to the bigger model make hits?); ``--no-second-choice`` turns that off.
``--no-pin`` has the model choose every value even where a rule or the alignment reads one
(``VerifyConfig.pin_readings``); ``--choice-hits`` replays the run's hits whose values the model chose
as well (does a change turn a right hit wrong?).

    .venv/bin/python scripts/second_choice_replay.py benchmarks/results/formula-v11 --dataset formula
    .venv/bin/python scripts/second_choice_replay.py benchmarks/results/formula-v12 --dataset formula \
        --checks all --model target --no-second-choice
    .venv/bin/python scripts/second_choice_replay.py benchmarks/results/formula-v15 --dataset formula \
        --checks rule,align --no-second-choice --choice-hits
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from minicache.answers import check_answer
from minicache.bench.data import is_correct, load
from minicache.errors import MiniCacheError
from minicache.extraction import Extractor
from minicache.hit import REFUTING, HitRefused, HitVerifier, VerifyConfig
from minicache.models.base import set_real_models_allowed
from minicache.models.llamacpp import LlamaCppBackend
from minicache.request import request_text
from minicache.sandbox import SandboxPool
from minicache.store import SQLiteStore

SKIPPED = ("probation", "audit", "answer")  # not a reading: --checks all leaves them out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a benchmark result folder (requests.jsonl, minicache.db)")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--checks", default=",".join(REFUTING),
                    help="refusal checks to replay (comma-separated), or all")
    ap.add_argument("--model", choices=("small", "target"), default="small", help="the model that chooses values")
    ap.add_argument("--second-choice", action=argparse.BooleanOptionalAction, default=True,
                    help="choose once more when a check refutes one value")
    ap.add_argument("--pin", action=argparse.BooleanOptionalAction, default=VerifyConfig.pin_readings,
                    help="give the model the values a rule or the alignment reads (VerifyConfig.pin_readings)")
    ap.add_argument("--choice-hits", action="store_true", help="replay the run's model-chosen hits too")
    args = ap.parse_args()
    checks = set(args.checks.split(","))
    seconds: list[float] = []
    rows = [json.loads(line) for line in (args.run / "requests.jsonl").read_text().splitlines() if line.strip()]
    pot = {r["id"]: r for r in rows if r["method"] == "pot"}
    requests = {str(r.id): r for r in load(args.dataset)}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "minicache.db"
        shutil.copy(args.run / "minicache.db", db)
        entries = sqlite3.connect(db).execute("select id, group_id, created_at from entries").fetchall()
        store = SQLiteStore(db)
        set_real_models_allowed(True)
        verifier = HitVerifier(Extractor(LlamaCppBackend.embedded(args.model)),
                               VerifyConfig(second_choice=args.second_choice, pin_readings=args.pin))
        tally: dict[str, int] = {}
        with SandboxPool() as sandbox:
            for row in rows:
                reason = (row["detail"] or {}).get("fallback_reason") or ""
                check = reason.removeprefix("HitRefused: ").split(":", 1)[0]
                wanted = check not in SKIPPED if "all" in checks else check in checks
                chosen_hit = args.choice_hits and row["route"] == "hit" and row["detail"].get("extraction") == "choice"
                if chosen_hit:
                    check = "choice hit"
                elif row["method"] != "minicache" or not reason.startswith("HitRefused") or not wanted:
                    continue
                group = row["detail"]["group"]
                before = [e for e in entries if e[1] == group and e[2] <= row["started_at"]]
                entry = store.get_entry("default", max(before, key=lambda e: e[2])[0]) if before else None
                if entry is None:
                    continue
                req = requests[str(row["id"])]
                began = time.perf_counter()
                try:
                    ex = verifier.extract(entry, request_text(req.question, req.context))
                    answer = check_answer(sandbox.run(entry.program, ex.variables).value)
                    verifier.check_answer(entry, answer)
                except HitRefused as exc:
                    outcome = f"refused {exc.check}"
                except MiniCacheError as exc:
                    outcome = f"failed {type(exc).__name__}"
                else:
                    right = is_correct(req, answer)
                    outcome = f"hit {ex.method}{' pinned' if ex.detail.get('pinned') else ''} " \
                              f"{'right' if right else 'wrong'}"
                    outcome += " (pot right)" if pot[row["id"]]["correct"] else " (pot wrong)"
                tally[outcome] = tally.get(outcome, 0) + 1
                seconds.append(time.perf_counter() - began)
                shown = f"  {ex.variables} pinned {ex.detail['pinned']}" if outcome.startswith("hit") \
                    and ex.detail.get("pinned") else ""
                print(f"{row['id']:24} was {check:10} -> {outcome:32} {seconds[-1]:5.2f} s{shown}", flush=True)
        store.close()
    print("\n" + "\n".join(f"{n:4}  {k}" for k, n in sorted(tally.items(), key=lambda t: -t[1])))
    if seconds:
        print(f"seconds a replayed request: median {statistics.median(seconds):.2f}, "
              f"mean {statistics.fmean(seconds):.2f}")


if __name__ == "__main__":
    main()
