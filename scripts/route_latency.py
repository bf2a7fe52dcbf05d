"""Route latency against the number of stored examples, for SQLite and PostgreSQL (docs/scale.md).

Stores grow to each size in turn (1k, 10k, 100k by default) with synthetic unit vectors,
1,024 wide by default (``--width``: the lexical route embedder's width, the default since 67cc0db;
384 is MiniLM's, the width the 2026-12-02 figures were taken at): each group has a centre, its
examples scatter around it. Three layouts:

* ``fixed``: 1,000 groups whatever the size (history grows, the computations do not);
* ``growing``: one group per 10 examples (a workload that keeps bringing new computations);
* ``one``: a single group (one template served over and over: the per-group selection at its largest).

At each size, in a fresh router, it times the index load (``load_s``: what a server does for each
tenant at start-up, ``RouteIndex.tenant``), and apart from it the store read alone (``read_s``:
every example's row through ``examples_since``, as the load reads them), then the first routed
request after the load (``first_ms``) and ``--requests`` routes of requests near random groups, with
the index refreshing from the store on *every* request (``refresh_s=0``, the worst case; the default
is once a second). Each routed request also reports, untimed, whether it went to the group its
vector was drawn around (``right``) and to the group exact search over every kept row picks
(``as_exact``: below 1 only where the coarse buckets of ``minicache.route_partition`` are in use,
past ``--exact-rows`` kept rows; ``buckets`` says how many). The embedder is a stub returning the
request's precomputed vector, so the figures are routing alone (MiniLM adds a constant few
milliseconds). ``--old`` also times the previous path: every example's embedding read from the
store (``routing_index``) and searched. SQLite is filled through ``import_entries``; PostgreSQL
with one ``executemany`` (add_example's round trips took minutes per 10k rows on this machine).

    .venv/bin/python scripts/route_latency.py --store sqlite
    .venv/bin/python scripts/route_latency.py --store postgresql://... --old 10
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minicache.lexical import DIM
from minicache.route_index import EXACT_ROWS
from minicache.routing import Router
from minicache.store import Example, open_store

TENANT = "default"


class StubEmbedder:
    """Returns the vector set for the next request: routing is timed without the embedding model."""

    def __init__(self, width: int) -> None:
        self.next = np.zeros(width, dtype=np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.next[None, :]


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def scatter(rng: np.random.Generator, n: int, width: int) -> np.ndarray:
    """Offsets of norm about 0.25 whatever the width: the same spread around a centre at 384 or 1,024."""
    return 0.25 * rng.standard_normal((n, width)).astype(np.float32) / np.sqrt(width)


def group_of(layout: str, i: np.ndarray) -> np.ndarray:
    return {"fixed": i % 1000, "growing": i // 10, "one": i * 0}[layout]


def groups_at(layout: str, size: int) -> int:
    return {"fixed": 1000, "growing": size // 10, "one": 1}[layout]


def grow(store, centres: np.ndarray, start: int, stop: int, layout: str, rng: np.random.Generator) -> None:
    """Add examples ``start..stop-1`` (example i in group ``group_of(layout, i)``)."""
    for lo in range(start, stop, 5000):
        hi = min(stop, lo + 5000)
        ids = group_of(layout, np.arange(lo, hi))
        vectors = unit(centres[ids] + scatter(rng, hi - lo, centres.shape[1]))
        for g in sorted(set(ids.tolist())):
            store.ensure_group(TENANT, f"g{g}")
        examples = [Example(id=f"ex{i}", tenant=TENANT, group_id=f"g{g}", question="q", context=None,
                            program="def solve():\n    return 1\n", answer=1, variables={}, embedding=v)
                    for i, g, v in zip(range(lo, hi), ids, vectors, strict=True)]
        if hasattr(store, "_pool"):  # PostgreSQL: one executemany (add_example's round trips took minutes)
            with store._tx() as c:
                c.cursor().executemany(
                    "INSERT INTO examples (tenant, id, group_id, question, context, program, answer, variables, "
                    "embedding, created_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                    [(e.tenant, e.id, e.group_id, e.question, None, e.program, "1", "{}", v.tobytes(),
                      e.created_at) for e, v in zip(examples, vectors, strict=True)])
        else:
            store.import_entries([], examples)


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3)}


def measure(store, centres: np.ndarray, groups: int, requests: int, old: int, rng: np.random.Generator,
            exact_rows: int) -> dict:
    embedder = StubEmbedder(centres.shape[1])
    router = Router(store, embedder, refresh_s=0.0)
    router.index.exact_rows = exact_rows
    own = rng.integers(0, groups, requests)
    queries = unit(centres[own] + scatter(rng, requests, centres.shape[1]))
    t = time.perf_counter()
    cursor = 0
    while rows := store.examples_since(TENANT, cursor, router.index.batch):
        cursor = rows[-1].seq
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    router.index.tenant(TENANT)
    row: dict = {"load_s": round(time.perf_counter() - t, 3), "read_s": round(read_s, 3),
                 **router.index.stats(TENANT)}
    embedder.next = queries[0]
    t = time.perf_counter()
    router.route(TENANT, "q")
    row["first_ms"] = round((time.perf_counter() - t) * 1000, 3)
    times, joined, right, as_exact = [], 0, 0, 0
    index = router.index.tenant(TENANT)
    for g, q in zip(own.tolist(), queries, strict=True):
        embedder.next = q
        t = time.perf_counter()
        decision = router.route(TENANT, "q")
        times.append(time.perf_counter() - t)
        joined += not decision.new_group
        right += decision.group_id == f"g{g}"
        as_exact += decision.group_id == index.exact_nearest(q)[0]  # untimed: what exact search picks
    row.update(new=percentiles(times), joined=joined / requests, right=right / requests, as_exact=as_exact / requests,
               buckets=len(index.partition.centres) if index.partition else 0)
    if old:
        times = []
        for q in queries[:old]:
            t = time.perf_counter()
            ids, matrix = store.routing_index(TENANT)
            ids[int(np.argmax(matrix @ q))]
            times.append(time.perf_counter() - t)
        row["old"] = percentiles(times)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", default="sqlite", help="'sqlite' (a temporary file) or a PostgreSQL DSN")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--layouts", default="fixed,growing,one")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--old", type=int, default=0, metavar="N",
                        help="also time N requests of the previous path (every embedding read per request)")
    parser.add_argument("--exact-rows", type=int, default=EXACT_ROWS, metavar="N",
                        help=f"kept rows up to which search is exact (default {EXACT_ROWS:,}; past it, coarse "
                             "buckets: minicache.route_partition); a large N times exact search at every size")
    parser.add_argument("--width", type=int, default=DIM,
                        help=f"the vectors' width (default {DIM}, the lexical embedder's; 384 for MiniLM's)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for layout in args.layouts.split(","):
            rng = np.random.default_rng(0)
            target = f"{tmp}/{layout}.db" if args.store == "sqlite" else args.store
            store = open_store(target)
            if args.store != "sqlite":  # a PostgreSQL database is reused: start from an empty tenant
                for g in store.list_groups(TENANT):
                    store.delete_group(TENANT, g.id)
            n_groups = max(groups_at(layout, s) for s in sizes)
            centres = unit(rng.standard_normal((n_groups, args.width)).astype(np.float32))
            have = 0
            for size in sizes:
                t = time.perf_counter()
                grow(store, centres, have, size, layout, rng)
                fill_s = time.perf_counter() - t
                have = size
                row = {"store": "sqlite" if args.store == "sqlite" else "postgresql", "layout": layout,
                       "examples": size, "fill_s": round(fill_s, 1),
                       **measure(store, centres, groups_at(layout, size), args.requests, args.old, rng,
                                 args.exact_rows)}
                print(json.dumps(row), flush=True)
                results.append(row)
            store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
