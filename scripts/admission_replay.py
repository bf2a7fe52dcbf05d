"""What admission would decide now, replayed from a benchmark's minicache rows.

Feeds ``requests.jsonl``'s minicache rows to a fresh :class:`minicache.admission.Admission`
(builds, then each request's cost under its observed route, as ``minicache bench`` resumes a run)
and prints the measured costs (seconds, samples) and the estimates and decision for a group seen n
times, n = 2..8 (``--failures k``: for a group whose builds failed k times).

    .venv/bin/python scripts/admission_replay.py benchmarks/results/formula-v3/requests.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minicache.admission import Admission, AdmissionConfig, observed_route, request_cost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", type=Path, help="a benchmark's requests.jsonl")
    parser.add_argument("--method", default="minicache")
    parser.add_argument("--first-misses", type=int, default=0,
                        help="arrivals a new entry answers as misses (its probation: 1 by default in serving)")
    parser.add_argument("--failures", type=int, default=0,
                        help="the group's failed builds (a retry's odds: Admission.build_success)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]
    events: list[tuple] = []
    for row in (r for r in rows if r["method"] == args.method):
        detail = row.get("detail") or {}
        events += [("build", float(s), None if ok is None else bool(ok)) for s, ok in detail.get("builds", [])]
        route = observed_route(detail.get("route"), detail.get("fallback_reason"))
        if route in ("hit", "miss", "fallback") and detail.get("group"):
            events.append(("request", "default", detail["group"], route, request_cost(detail.get("timings") or {})))
    admission = Admission(AdmissionConfig())
    admission.replay(events)
    state = admission.snapshot()
    print(json.dumps({"requests": state["requests"], "builds_ok": state["builds_ok"],
                      "builds_failed": state["builds_failed"],
                      **{f"{name}_s": [round(value, 2), n] for name, (value, n) in state["costs"].items()}}))
    for n in range(2, 9):
        admitted, terms = admission.admits("default", n, args.first_misses, args.failures)
        print(json.dumps({"seen": n, "admitted": admitted, **{k: round(v, 2) for k, v in terms.items() if k != "n"}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
