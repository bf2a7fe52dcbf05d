"""Issue 17's before/after check: the first 40 requests of the Formula stream through `minicache`,
made deterministic (inline builds; admission's time-measured estimates off by a warm-up longer than
the stream), so two code versions can be compared request by request.

usage: PYTHONPATH=<tree> MINICACHE_THREADS=1 python formula40.py OUT_DIR
"""
import sys
from pathlib import Path

import minicache.bench as bench
from minicache.cli_engine import Runtime

_build = bench.build_method


def build_method(name, *args, **kwargs):
    method = _build(name, *args, **kwargs)
    engine = getattr(method, "engine", None)
    if engine is not None:
        engine.config.background_builds = False
        engine.admission.config.warmup_requests = 10**9
    return method


bench.build_method = build_method
rt = Runtime()
target, small = rt.backends()
bench.run_benchmark(dataset="formula", methods=["minicache"], target=target, small=small, embedder=rt.embedder(),
                    out=Path(sys.argv[1]), limit=40, groups=21, seed=0, background_builds=False,
                    command="formula40.py (bench --dataset formula --groups 21 --limit 40 --methods minicache, inline builds)")
print(open(Path(sys.argv[1]) / "report.md").read())
