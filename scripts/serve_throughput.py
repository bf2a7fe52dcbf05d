"""Throughput of `minicache serve` with the embedded models, at 1, 2, 4, 8 and 16 concurrent clients.

    .venv/bin/python scripts/serve_throughput.py [--groups 4] [--warm 4] [--per-level 16]

A real uvicorn server (loopback) in front of MiniCache on the embedded models. Warm-up: `--warm`
requests from each of `--groups` Formula groups (cold cache, so entries get built). Then, for each
concurrency C, `--per-level` fresh requests of the same groups are sent by C client threads through
the official `openai` client; requests/s, latency p50 and the routes are printed. The models are
one instance each, so concurrent requests queue on them: the point is how the server behaves.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai

from minicache.datasets import formula
from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.server.testing import BackgroundServer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--warm", type=int, default=4)
    ap.add_argument("--per-level", type=int, default=16)
    ap.add_argument("--levels", default="1,2,4,8,16")
    args = ap.parse_args()
    by: OrderedDict[str, list] = OrderedDict()
    for r in formula("train"):
        by.setdefault(r.group, []).append(r)
    names = list(by)[:: max(1, len(by) // args.groups)][: args.groups]
    with tempfile.TemporaryDirectory() as tmp:
        engine = MiniCache.local(store=f"{tmp}/mc.db", config=EngineConfig(background_builds=False))
        app = create_app(engine, ServerConfig())
        with BackgroundServer(app) as server:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=600,
                                   http_client=httpx.Client(timeout=600))

            def ask(question: str) -> tuple[float, str]:
                t = time.perf_counter()
                try:
                    resp = client.chat.completions.create(model="minicache",
                                                          messages=[{"role": "user", "content": question}])
                except openai.APIStatusError as exc:  # e.g. 502 when the target's program fails twice
                    return time.perf_counter() - t, f"http-{exc.status_code}"
                return time.perf_counter() - t, resp.model_extra["minicache"]["route"]

            for i in range(args.warm):
                for name in names:
                    seconds, route = ask(by[name][i].question)
                    print(f"warm-up {name[:30]:<30} {route:<8} {seconds:5.2f}s", flush=True)
            cursor = args.warm
            print(f"\n{'clients':>7} {'req/s':>7} {'p50 s':>7} {'mean s':>7}  routes")
            for level in [int(x) for x in args.levels.split(",")]:
                batch = []
                while len(batch) < args.per_level:
                    for name in names:
                        pool = by[name][args.warm:]
                        batch.append(pool[cursor % len(pool)].question)
                    cursor += 1
                batch = batch[: args.per_level]
                began = time.perf_counter()
                with ThreadPoolExecutor(max_workers=level) as ex:
                    results = list(ex.map(ask, batch))
                wall = time.perf_counter() - began
                lat = [s for s, _ in results]
                routes = Counter(r for _, r in results)
                print(f"{level:>7} {len(batch) / wall:7.2f} {statistics.median(lat):7.2f} {statistics.mean(lat):7.2f}  "
                      f"{dict(routes)}", flush=True)
        engine.close()


if __name__ == "__main__":
    main()
