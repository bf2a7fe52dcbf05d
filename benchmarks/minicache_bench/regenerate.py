"""``python -m minicache_bench.regenerate DIR [DIR ...]``: a results folder's report again, no models.

Results measured before the report said how sure its differences are (the ``paired`` block) get it
from their own requests.jsonl; report.md and the plots are rewritten, the measured rows are not.
"""

from __future__ import annotations

import sys
from pathlib import Path

from minicache_bench import regenerate_report


def main(argv: list[str] | None = None) -> int:
    dirs = sys.argv[1:] if argv is None else argv
    if not dirs:
        print(
            "usage: python -m minicache_bench.regenerate DIR [DIR ...]  (folders holding results.json)",
            file=sys.stderr,
        )
        return 2
    missing = [d for d in dirs if not (Path(d) / "results.json").is_file()]
    if missing:  # checked before any folder is written: all or nothing
        print(f"error: no results.json in {', '.join(missing)}", file=sys.stderr)
        return 1
    for d in dirs:
        regenerate_report(Path(d))
        print(f"wrote {Path(d) / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
