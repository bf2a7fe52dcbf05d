"""The before/after check of a refactor: the first 40 Formula requests through MiniCache, made
deterministic, so two versions of the code can be compared request by request.

Why deterministic: builds run inline on the request that triggers them (a background build finishes
at a time that depends on the machine's load) and admission's time-measured estimates stay off for
the whole stream (its warm-up is longer than the stream), so the routes are a function of the code
and the models alone. Latencies of two runs are not comparable; routes, answers and tokens are.

Usage (embedded models, one thread, as the check is meant to run)::

    MINICACHE_THREADS=1 python -m minicache_bench.tools.first40 run OUT_DIR [--groups 21]
    python -m minicache_bench.tools.first40 compare BEFORE_DIR AFTER_DIR

To run an older tree, put it first on the path (``PYTHONPATH=<tree>``): the runner also reads the
layout from before the package was split into stage folders (``minicache.bench``).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any


def run(out: Path, groups: int) -> None:
    try:
        import minicache_bench as bench
        from minicache.cli.options import Runtime
    except ImportError:  # a tree from before the stage folders
        import minicache.bench as bench  # type: ignore[no-redef]
        from minicache.cli_engine import Runtime  # type: ignore[no-redef]

    build = bench.build_method

    def inline_build_method(name: str, *args: Any, **kwargs: Any) -> Any:
        method = build(name, *args, **kwargs)
        engine = getattr(method, "engine", None)
        if engine is not None:
            engine.config.background_builds = False
            engine.admission.config.warmup_requests = 10**9
        return method

    bench.build_method = inline_build_method
    runtime = Runtime()
    target, small = runtime.backends()
    bench.run_benchmark(
        dataset="formula",
        methods=["minicache"],
        target=target,
        small=small,
        embedder=runtime.route_embedder()(),
        out=out,
        limit=40,
        groups=groups,
        seed=0,
        background_builds=False,
        command=f"python -m minicache_bench.tools.first40 run {out} --groups {groups}",
    )


def rows(folder: Path) -> list[dict[str, Any]]:
    """minicache's rows of a run, in stream order."""
    lines = (folder / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("method", "minicache") == "minicache"]


def outcome(row: dict[str, Any]) -> tuple[Any, ...]:
    """What must not move: the request, its route, its answer and its (gold) group."""
    return row.get("id"), row.get("route"), repr(row.get("answer")), row.get("group")


def target_tokens(run_rows: list[dict[str, Any]]) -> int:
    return sum((r.get("tokens") or {}).get("target", 0) for r in run_rows)


def compare(before: Path, after: Path) -> int:
    """Print how the two runs differ; the number of requests that differ."""
    a, b = rows(before), rows(after)
    moved = [(x, y) for x, y in zip(a, b, strict=False) if outcome(x) != outcome(y)]
    for x, y in moved:
        print(f"{x.get('id')}: {outcome(x)[1:]} -> {outcome(y)[1:]}")
    print(
        f"{min(len(a), len(b))} requests compared ({len(a)} before, {len(b)} after), "
        f"{len(moved)} differ in route, answer or group"
    )
    print(f"routes after: {dict(Counter(r.get('route') for r in b))}")
    right = sum(bool(r.get("correct")) for r in a), sum(bool(r.get("correct")) for r in b)
    print(f"correct: {right[0]} before, {right[1]} after")
    print(f"target tokens: {target_tokens(a)} before, {target_tokens(b)} after")
    return len(moved) + abs(len(a) - len(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ran = sub.add_parser("run", help="run the first 40 Formula requests into OUT_DIR")
    ran.add_argument("out", type=Path)
    ran.add_argument("--groups", type=int, default=21, help="Formula groups in the stream")
    compared = sub.add_parser("compare", help="compare two runs request by request")
    compared.add_argument("before", type=Path)
    compared.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out, args.groups)
    else:
        raise SystemExit(1 if compare(args.before, args.after) else 0)


if __name__ == "__main__":
    main()
