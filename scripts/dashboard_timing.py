"""How long each dashboard page takes with many groups in the store (reported, not asserted).

    .venv/bin/python scripts/dashboard_timing.py [--groups 1000] [--repeat 20]

Fills a fresh SQLite store with ``--groups`` groups of one tenant (3 examples each; an active entry
with a 2-variable template for 70% of them, some hits, a few evicted and uncacheable), serves the app
on a loopback uvicorn server and times ``--repeat`` GETs of each page with an admin session: wall time
from request to the last byte, through real HTTP, and the CPU time this process (server and client
together) spent per request, which says what a page costs when other work shares the cores. No model
is loaded: pages only read the store.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.server.testing import BackgroundServer
from minicache.store import Entry, Example, SQLiteStore, Variable

ADMIN_KEY, TENANT = "sk-timing-admin-0001", "default"
PROGRAM = ('def solve(\n    current_assets=45000,  # current assets, dollars\n'
           '    current_liabilities=30000,  # current liabilities, dollars\n):\n'
           '    return current_assets / current_liabilities\n')


class _Unused:
    """Stands in for the models and embedder: dashboard pages never call them."""

    def __getattr__(self, name: str):
        raise RuntimeError(f"the timing run does not use models ({name})")


def fill(store: SQLiteStore, groups: int) -> str:
    """``groups`` groups in the store; returns one active entry's id."""
    rng = np.random.default_rng(0)
    some_entry = ""
    for i in range(groups):
        gid = f"g_{i:05d}"
        group = store.ensure_group(TENANT, gid, label=f"formula-{i}" if i % 3 == 0 else None)
        for j in range(3):
            a, b = 1000 * (i + j + 2), 500 * (j + 1)
            store.add_example(Example(
                id=f"ex_{i}_{j}", tenant=TENANT, group_id=gid,
                question=f"What is the current ratio if current assets are ${a:,} and current liabilities are ${b:,}?",
                context=None, program=PROGRAM, answer=a / b, variables={"current_assets": a, "current_liabilities": b},
                embedding=rng.standard_normal(384).astype(np.float32)))
        if i % 10 < 7:
            entry = store.put_entry(Entry(
                id=f"ent_{i:05d}", tenant=TENANT, group_id=gid, program=PROGRAM,
                template=[Variable("current_assets", description="current assets", unit="dollars"),
                          Variable("current_liabilities", description="current liabilities", unit="dollars")],
                validation={"ok": True, "passed": 3, "of": 3, "source": "lifted", "extraction": "choice",
                            "attempts": [{"source": "lifted", "ok": True, "agreements": 2}]},
                rules={"current_assets": {"kind": "anchor", "words": ["assets", "are"]}},
                status="evicted" if i % 10 == 6 else "active"))
            for _ in range(i % 7):
                store.record_hit(TENANT, entry.id)
            some_entry = some_entry or entry.id
        elif i % 10 == 9:
            group.status, group.uncacheable_until, group.build_failures = "uncacheable", time.time() + 3600, 3
            store.update_group(group)
    store.bump(TENANT, "requests", 5000)
    store.bump(TENANT, "hits", 2000)
    store.bump(TENANT, "misses", 3000)
    return some_entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="minicache-dashboard-timing-")) / "minicache.db"
    store = SQLiteStore(path)
    began = time.perf_counter()
    entry = fill(store, args.groups)
    print(f"store: {args.groups} groups, {len(store.list_entries(TENANT))} entries "
          f"(filled in {time.perf_counter() - began:.1f} s)")
    engine = MiniCache(_Unused(), _Unused(), store=store, embedder=_Unused(), config=EngineConfig())
    config = ServerConfig(api_keys={"sk-timing-tenant-0001": TENANT}, admin_keys={ADMIN_KEY}, rate_per_s=0)
    pages = {"overview": "/dashboard", "overview per hour": "/dashboard?unit=hour",
             "groups page 1": "/dashboard/groups",
             f"groups page {args.groups // 50}": f"/dashboard/groups?page={args.groups // 50}",
             "entry": f"/dashboard/entries/{entry}", "live events": "/dashboard/events",
             "events feed": "/dashboard/events/feed?after=0"}
    try:
        with BackgroundServer(create_app(engine, config)) as server, httpx.Client(base_url=server.url) as http:
            assert http.post("/dashboard/login", data={"key": ADMIN_KEY}).status_code == 303
            print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
            print(f"{'page':<22} {'median ms':>10} {'p95 ms':>8} {'max ms':>8} {'CPU ms':>7} {'KiB':>6}")
            for name, url in pages.items():
                times, cpu, size = [], [], 0
                for _ in range(args.repeat + 1):
                    t, c = time.perf_counter(), time.process_time()
                    r = http.get(url)
                    cpu.append((time.process_time() - c) * 1000)
                    times.append((time.perf_counter() - t) * 1000)
                    assert r.status_code == 200, (url, r.status_code, r.text[:300])
                    size = len(r.content)
                times, cpu = times[1:], cpu[1:]  # the first request warms templates and caches
                p95 = sorted(times)[max(0, int(round(0.95 * len(times))) - 1)]
                print(f"{name:<22} {statistics.median(times):>10.1f} {p95:>8.1f} {max(times):>8.1f} "
                      f"{statistics.median(cpu):>7.1f} {size / 1024:>6.0f}")
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
