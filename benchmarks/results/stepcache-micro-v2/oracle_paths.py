"""StepCache's path mix and model calls per seed with a scripted, always-right target (no real model).

Not a latency measurement: it shows which path each request of the generator's mix takes when the
target's answers are the solver's steps and the gold JSON, and how many target calls each path
makes, which does not depend on the machine's load. usage: python oracle_paths.py SEED [SEED...]
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from minicache.models.fake import FakeBackend
from minicache.stepcache import StepCache, independent_check, linear, micro, parse
from minicache.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.fakes import HashEmbedder  # noqa: E402  (the test suite's bag-of-words embedder)


def oracle(seed: int) -> FakeBackend:
    gold = {r.text: r for r in micro.generate(seed)}

    def reply(messages, options):
        r = gold[messages[-1].content.split("\n\n")[0]]
        if r.task == "json":
            keys = list(options.json_schema["properties"]) if options.json_schema else list(r.gold)
            return json.dumps({k: r.gold[k] for k in keys})
        steps = linear.solver_steps(parse(r.text))
        if "single line" in messages[-1].content:
            return steps[-1]
        return "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps[:-1])) + "\n" + steps[-1]

    return FakeBackend(reply)


for seed in map(int, sys.argv[1:]):
    target = oracle(seed)
    with tempfile.TemporaryDirectory() as tmp:
        sc = StepCache(target, open_store(str(Path(tmp) / "s.db")), HashEmbedder())
        paths, calls, correct = Counter(), Counter(), 0
        for r in micro.generate(seed):
            before = len(target.calls)
            out = sc.solve(r.text)
            paths[(out.route, r.perturbation)] += 1
            calls[out.route] += len(target.calls) - before
            correct += independent_check.check(r.task, out.output, r.text, float(r.gold) if r.task == "linear" else r.gold)[0]
    total = {p: sum(n for (q, _), n in paths.items() if q == p) for p in ("step-reuse", "step-patch", "step-skip")}
    print(json.dumps({"seed": seed, "paths": total, "target_calls": dict(calls), "correct": correct,
                      "by_perturbation": {f"{a}/{b}": n for (a, b), n in sorted(paths.items())}}))
