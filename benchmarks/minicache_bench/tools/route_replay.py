"""How routing groups a benchmark stream, replayed without a model.

usage: python -m minicache_bench.tools.route_replay DATASET [--split dev|test] [--limit N]
       [--groups G] [--seed S] [--after K]

Why: a computation split over many groups pays a cold start per group (its own misses and build),
and most of a split stream's groups never reach a build. This replays the stream ``minicache bench``
would send (the same selection and order) through :meth:`minicache.MiniCache.solve` at the default
routing (the lexical embedder at its threshold), with a fake target that writes one constant
program, so every request is a recorded miss and no entry is built: what routing alone does. It
runs twice, at the default (``route_table_rows``: the words that name a row of the request's
table are masked, :func:`minicache.programs.tables.without_row`) and with that option off, and prints
for each

* the groups formed for the gold computations (the dataset's labels, which routing never reads);
* purity: the share of requests in their group's most common computation;
* reach: the requests that came to a group already holding ``--after`` (3, ``build_after``) or
  more, the requests a built entry could serve;
* the largest groups that mix computations.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from minicache.config.engine import EngineConfig
from minicache.engine import MiniCache
from minicache.models import FakeBackend
from minicache.route.lexical import LexicalEmbedder
from minicache.sandbox import SandboxPool
from minicache.store import SQLiteStore
from minicache_bench.data import BenchRequest, load, select

CONSTANT = "```python\ndef solve():\n    return 1\n```"
SHOWN = 4  # mixed groups printed per run


def _no_model(messages: Any, options: Any) -> str:
    raise AssertionError("routing alone asks no small model")


def replay(
    requests: list[BenchRequest], pool: SandboxPool, folder: Path, table_rows: bool = True
) -> list[str]:
    """Each request's group, routed as ``MiniCache.solve`` routes it (no label, no build)."""
    mc = MiniCache(
        FakeBackend(lambda messages, options: CONSTANT, name="constant"),
        FakeBackend(_no_model, name="no-model"),
        store=SQLiteStore(folder / "replay.db"),
        embedder=LexicalEmbedder(),
        sandbox=pool,
        config=EngineConfig(
            background_builds=False,
            build_after=10**9,
            build_early=0,
            route_table_rows=table_rows,
        ),
    )
    try:
        return [mc.solve(r.question, r.context).group for r in requests]
    finally:
        mc.close()


def summary(requests: list[BenchRequest], groups: list[str], after: int) -> dict[str, Any]:
    """Groups, purity, reach and mixed groups of one replay."""
    held: dict[str, Counter[str]] = defaultdict(Counter)
    reach = 0
    for r, g in zip(requests, groups, strict=True):
        reach += sum(held[g].values()) >= after
        held[g][r.group or r.id] += 1
    mixed = sorted((c for c in held.values() if len(c) > 1), key=lambda c: -sum(c.values()))
    return {
        "groups": len(held),
        "computations": len({r.group or r.id for r in requests}),
        "purity": sum(max(c.values()) for c in held.values()) / max(1, len(requests)),
        "reach": reach,
        "mixed": [dict(c.most_common()) for c in mixed[:SHOWN]],
    }


def measure(
    dataset: str, split: str | None, limit: int | None, groups: int | None, seed: int, after: int
) -> str:
    requests = select(load(dataset, split=split), limit=limit, groups=groups, seed=seed)
    lines = [f"{dataset}{f' ({split})' if split else ''}: {len(requests)} requests"]
    with SandboxPool(size=1) as pool, tempfile.TemporaryDirectory() as tmp:
        for name, on in (("table rows masked", True), ("rows as written", False)):
            folder = Path(tmp) / name.replace(" ", "-")
            folder.mkdir()
            s = summary(requests, replay(requests, pool, folder, on), after)
            lines.append(
                f"{name:>16}: {s['groups']} groups for {s['computations']} computations, "
                f"purity {s['purity']:.3f}, reach {s['reach']} (to a group holding {after}+)"
            )
            lines += [f"{'':>18}mixed: {m}" for m in s["mixed"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="formula, tatqa, svamp, ... (minicache_bench.data.load)")
    parser.add_argument("--split", choices=("dev", "test"), default=None)
    parser.add_argument("--limit", type=int, default=None, help="the stream's first N requests")
    parser.add_argument("--groups", type=int, default=None, help="as minicache bench --groups")
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed (default 0)")
    parser.add_argument("--after", type=int, default=3, help="reach counts from K (default 3)")
    args = parser.parse_args(argv)
    print(measure(args.dataset, args.split, args.limit, args.groups, args.seed, args.after))


if __name__ == "__main__":
    main()
