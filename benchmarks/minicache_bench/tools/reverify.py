"""What the current hit checks would do to a finished run's zero-model hits, without any model.

usage: python -m minicache_bench.tools.reverify RUN_DIR [--dataset NAME] [--split S] [--seed N]
       [--list] [--json]

Why: a change to the hit checks (a new check, a threshold) is measured on a real run's hits in
seconds instead of a new run of hours. Every minicache hit of ``RUN_DIR/requests.jsonl`` whose
values were read without the small model (``detail.extraction`` ``rule`` or ``align``) is read
again by :meth:`minicache.hit.verify.HitVerifier.extract`, with the code as it is now, on the
entry that served it, twice: with ``VerifyConfig.corroborate_zero_model`` off and on (every other
check at its default). The entry comes from the run's store (``RUN_DIR/minicache.db``, opened
read-only, so a run still writing it is safe to read): by ``detail.entry_id`` where the row names
it, else the group's version that was not yet superseded when the request started (a revision
writes a new entry and keeps the old one as ``superseded``, stamped when it was replaced). The
request's text comes from the dataset the run streamed (``results.json``'s, else ``--dataset``).

The small model is never asked: a hit whose values only it could read counts as "needs the small
model". Each re-read is served with the row's values, served with other values (whose answer is not
computed: the program is not run), or refused by a check. The table cross-tabulates that with
the row's correctness and pot's on the same request: right hits refused (each would cost a miss),
wrong hits refused where pot was right (cache errors avoided), wrong hits still served.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from minicache.config.engine import VerifyConfig
from minicache.errors import ExtractionError, HitRefused
from minicache.hit.align import same_values
from minicache.hit.extraction import Extractor
from minicache.hit.verify import ZERO_MODEL_PATHS, HitVerifier
from minicache.models.base import Completion, GenerationOptions, Message
from minicache.request import request_text
from minicache.store.base import Entry
from minicache.store.rows import to_entry

STORE_FILE = "minicache.db"  # what ``minicache bench`` names the minicache method's store
SETTINGS = {"off": False, "on": True}  # corroborate_zero_model, as the table's columns
NEEDS_MODEL = "needs the small model"


class Verdict(StrEnum):
    """What the re-read does with a hit."""

    SAME = "served, same values"
    OTHER = "served, other values"
    REFUSED = "refused"
    NEEDS_MODEL = NEEDS_MODEL


class RefusingSmall:
    """A small model that refuses to be asked: the re-read measures the zero-model readings only."""

    name = "refusing-small"

    def complete(
        self, messages: list[Message], options: GenerationOptions | None = None
    ) -> Completion:
        raise RuntimeError("reverify asks no model")

    def close(self) -> None:
        pass


@dataclass
class Reread:
    """One hit read again under each setting: the verdict and, where refused, the check and why."""

    row: dict[str, Any]
    entry_id: str
    pot_correct: bool | None
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    checks: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        detail = self.row.get("detail") or {}
        return {
            "id": self.row["id"],
            "group": self.row.get("group"),
            "entry": self.entry_id,
            "extraction": detail.get("extraction"),
            "correct": self.row.get("correct"),
            "pot_correct": self.pot_correct,
            **{
                name: {
                    "verdict": str(self.verdicts[name]),
                    "check": self.checks.get(name),
                    "reason": self.reasons.get(name),
                }
                for name in self.verdicts
            },
        }


def open_entries(run_dir: Path) -> list[Entry]:
    """Every entry of the run's store, superseded versions included, opened read-only."""
    path = run_dir / STORE_FILE
    if not path.is_file():
        raise SystemExit(f"no {STORE_FILE} in {run_dir}")
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [to_entry(r) for r in conn.execute("SELECT * FROM entries ORDER BY version")]
    finally:
        conn.close()


class EntryFinder:
    """The entry that served a row: by the id the row names, else by the group and the time."""

    def __init__(self, entries: list[Entry]) -> None:
        self.by_id = {e.id: e for e in entries}
        self.by_group: dict[str, list[Entry]] = {}
        for e in sorted(entries, key=lambda e: e.version):
            if e.status != "candidate":  # never served
                self.by_group.setdefault(e.group_id, []).append(e)
        self.found_by: Counter[str] = Counter()

    def __call__(self, row: dict[str, Any]) -> Entry | None:
        detail = row.get("detail") or {}
        named = detail.get("entry_id")
        if named:  # a version the store no longer holds is no entry, not one found by id
            found = self.by_id.get(named)
            if found is not None:
                self.found_by["id"] += 1
            return found
        started = row.get("started_at")
        for e in self.by_group.get(detail.get("group") or "", []):
            # A replaced version's updated_at is when the next one replaced it.
            if e.status == "active" or started is None or e.updated_at > started:
                self.found_by["time"] += 1
                return e
        return None


def read_rows(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, bool | None]]:
    """minicache's zero-model hits in stream order, and pot's correctness by request id."""
    path = run_dir / "requests.jsonl"
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    pot = {str(r["id"]): r.get("correct") for r in rows if r["method"] == "pot"}
    hits = [
        r
        for r in rows
        if r["method"] == "minicache"
        and r["route"] == "hit"
        and (r.get("detail") or {}).get("extraction") in ZERO_MODEL_PATHS
    ]
    return hits, pot


def dataset_texts(
    run_dir: Path, dataset: str | None, split: str | None, seed: int | None
) -> dict[str, str]:
    """The request texts by id, of the dataset the run streamed (results.json's config) unless
    named here."""
    from minicache_bench.data import load

    config: dict[str, Any] = {}
    results = run_dir / "results.json"
    if results.is_file():
        config = json.loads(results.read_text()).get("config") or {}
    name = dataset or config.get("dataset") or "formula"
    requests = load(
        name,
        seed=seed if seed is not None else int(config.get("seed") or 0),
        split=split or config.get("split"),
    )
    return {str(r.id): request_text(r.question, r.context) for r in requests}


def reread(
    entry: Entry, text: str, on: bool
) -> tuple[Verdict, str | None, str | None, dict[str, Any] | None]:
    """One setting's (verdict, check, reason, values): a served reading is ``SAME`` with its
    values here, and :func:`reverify` compares them with the row's."""
    verifier = HitVerifier(Extractor(RefusingSmall()), VerifyConfig(corroborate_zero_model=on))
    try:
        got = verifier.extract(entry, text, no_model=HitRefused(NEEDS_MODEL, NEEDS_MODEL))
    except HitRefused as refused:
        if refused.check == NEEDS_MODEL:
            return Verdict.NEEDS_MODEL, None, None, None
        return Verdict.REFUSED, str(refused.check), refused.reason, None
    except ExtractionError as failed:
        return Verdict.REFUSED, type(failed).__name__, str(failed), None
    return Verdict.SAME, None, None, dict(got.variables)


def reverify(run_dir: Path, texts: dict[str, str]) -> tuple[list[Reread], Counter[str]]:
    """Every zero-model hit of the run read again under each setting, and how their entries were
    found (or why a hit was not read)."""
    hits, pot = read_rows(run_dir)
    find = EntryFinder(open_entries(run_dir))
    out: list[Reread] = []
    coverage: Counter[str] = Counter()
    for row in hits:
        text = texts.get(str(row["id"]))
        entry = find(row)
        if text is None or entry is None:
            coverage["no request text" if text is None else "no entry"] += 1
            continue
        one = Reread(row, entry.id, pot.get(str(row["id"])))
        served_as = (row.get("detail") or {}).get("variables") or {}
        for name, on in SETTINGS.items():
            verdict, check, reason, values = reread(entry, text, on)
            if (
                verdict == Verdict.SAME
                and values is not None
                and not same_values(values, served_as)
            ):
                verdict = Verdict.OTHER
            one.verdicts[name] = verdict
            if check is not None:
                one.checks[name], one.reasons[name] = check, reason or ""
        out.append(one)
    coverage.update({f"entry found by {k}": v for k, v in find.found_by.items()})
    return out, coverage


def tally(rereads: list[Reread], setting: str) -> dict[str, int]:
    """The table's column for one setting."""
    counts: Counter[str] = Counter(hits_reread=len(rereads))
    for one in rereads:
        verdict = one.verdicts[setting]
        counts[verdict.name.lower()] += 1
        if verdict == Verdict.REFUSED:
            counts[f"refused: {one.checks[setting]}"] += 1
        right, pot_right = bool(one.row.get("correct")), one.pot_correct
        if verdict == Verdict.REFUSED and right:
            counts["right_refused"] += 1
        if verdict == Verdict.REFUSED and not right:
            counts["wrong_refused_pot_right" if pot_right else "wrong_refused_pot_not_right"] += 1
        if verdict in (Verdict.SAME, Verdict.OTHER) and not right:
            counts["wrong_served"] += 1
            counts["wrong_served_pot_right"] += bool(pot_right)
        if verdict == Verdict.NEEDS_MODEL and not right:
            counts["wrong_needs_model"] += 1
    return dict(counts)


LINES = [
    ("hits_reread", "zero-model hits re-read"),
    ("same", "served, same values"),
    ("other", "served, other values"),
    ("needs_model", NEEDS_MODEL),
    ("refused", "refused"),
    ("right_refused", "right hits refused (each a miss instead)"),
    ("wrong_refused_pot_right", "wrong hits refused where pot was right (cache errors avoided)"),
    (
        "wrong_refused_pot_not_right",
        "wrong hits refused where pot was wrong too (or did not answer)",
    ),
    ("wrong_served", "wrong hits still served"),
    ("wrong_served_pot_right", "of which pot was right (cache errors kept)"),
    ("wrong_needs_model", "wrong hits that would need the small model"),
]


POT = {True: "right", False: "wrong", None: "did not answer"}


def markdown(report: dict[str, Any], listed: list[Reread] | None = None) -> str:
    columns = report["settings"]
    refusals = sorted({k for c in columns.values() for k in c if k.startswith("refused: ")})
    lines = [
        f"corroborate_zero_model off and on, on {report['run']}; "
        + ", ".join(f"{k}: {v}" for k, v in sorted(report["coverage"].items())),
        "",
        "| | off | on |",
        "|---|---:|---:|",
    ]
    for key, label in LINES[:5] + [(r, f"&nbsp;&nbsp;{r}") for r in refusals] + LINES[5:]:
        lines.append(f"| {label} | {columns['off'].get(key, 0)} | {columns['on'].get(key, 0)} |")
    for one in listed or []:
        if one.verdicts["off"] != one.verdicts["on"]:
            lines.append(
                f"- {one.row['id']} ({str(one.row.get('group'))[:30]}, "
                f"{'right' if one.row.get('correct') else 'wrong'}, pot {POT[one.pot_correct]}): "
                f"{one.verdicts['off']} -> {one.verdicts['on']} "
                f"{one.checks.get('on', '')}: {one.reasons.get('on', '')[:140]}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--dataset", help="the dataset the run streamed (default: results.json's)")
    ap.add_argument("--split", help="its split, where it has one (default: results.json's)")
    ap.add_argument("--seed", type=int, help="its seed (default: results.json's)")
    ap.add_argument("--list", action="store_true", help="list the hits the check changes")
    ap.add_argument("--json", action="store_true", help="machine output, one hit per request")
    args = ap.parse_args(argv)
    texts = dataset_texts(args.run_dir, args.dataset, args.split, args.seed)
    rereads, coverage = reverify(args.run_dir, texts)
    report = {
        "run": str(args.run_dir),
        "coverage": dict(coverage),
        "settings": {name: tally(rereads, name) for name in SETTINGS},
    }
    if args.json:
        print(json.dumps({**report, "hits": [r.to_json() for r in rereads]}, indent=1))
    else:
        print(markdown(report, rereads if args.list else None))


if __name__ == "__main__":
    main()
