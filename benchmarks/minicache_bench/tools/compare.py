"""Which requests two benchmark runs of one stream served differently.

Reads two runs' ``requests.jsonl`` and compares minicache's row for each request both hold (rows
read with ``minicache_bench.tools.breakdown.load``, so only requests pot answered too): the route,
the answer, whether it was right, and why a hit was refused (``fallback_reason``). Why: the speed
ratio of two runs of identical work moves by a few percent with the machine, so a change is read
request by request first: "every request took the same route with the same answer" says a
ratio's move is noise; a list of the requests that moved says what the change did.

Usage: python -m minicache_bench.tools.compare EARLIER/requests.jsonl LATER/requests.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from minicache_bench.tools.breakdown import load


def minicache_rows(path: Path) -> dict[str, dict[str, Any]]:
    """minicache's rows of the requests pot also answered, by request id, in stream order."""
    return {r["id"]: r for r in load(path)[0]}


def outcome(row: dict[str, Any]) -> tuple[Any, ...]:
    reason = (row.get("detail") or {}).get("fallback_reason") or ""
    return row["route"], row["answer"], row["correct"], reason


def main(earlier: str, later: str) -> None:
    a, b = minicache_rows(Path(earlier)), minicache_rows(Path(later))
    both = [i for i in b if i in a]
    moved = [(n, i) for n, i in enumerate(b) if i in a and outcome(a[i]) != outcome(b[i])]
    print(
        f"{len(b)} requests in the later run, {len(both)} in both, {len(moved)} served differently"
    )
    for n, i in moved:
        x, y = a[i], b[i]
        print(
            f"#{n} {i} ({x['group'][:30]}): {x['route']} {'right' if x['correct'] else 'wrong'} -> "
            f"{y['route']} {'right' if y['correct'] else 'wrong'}"
        )
        for label, row in (("earlier", x), ("later", y)):
            reason = (row.get("detail") or {}).get("fallback_reason")
            if reason:
                print(f"    {label}: {reason[:140]}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
