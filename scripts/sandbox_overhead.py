"""Measure the sandbox: time per hit-sized call (p50/p99), now and at an earlier commit, and how
many programs an earlier commit's policy accepted that today's refuses.

    .venv/bin/python scripts/sandbox_overhead.py --before 810343c            # overhead, before/after
    .venv/bin/python scripts/sandbox_overhead.py --before 810343c --policy   # plus the policy comparison

"Sandbox time" is ``SandboxResult.seconds``, what the engine records as ``sandbox_s`` on a hit;
"worker CPU" is the CPU the pool's worker processes and their children used per call. Calls
are made one after another with ``--gap-ms`` between them (a hit's extraction by the small model
takes far longer than that, so a worker is idle between hits) and also back to back (gap 0).
The earlier commit's ``minicache/sandbox`` is loaded from git into a temporary package, so both run
on the same machine at the same time. Figures move with the machine's load: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ("import math\n"
           "def solve(principal=1000.0,  # loan principal, dollars\n"
           "          rate_pct=5.0,  # annual rate, percent\n"
           "          years=2):  # term, years\n"
           "    return round(principal * math.pow(1 + rate_pct / 100, years), 2)\n")


def load_sandbox(rev: str | None) -> Any:
    """``minicache.sandbox`` now, or at ``rev`` as a package of its own (``minicache_at_<rev>``)."""
    if rev is None:
        sys.path.insert(0, str(ROOT))
        return importlib.import_module("minicache.sandbox")
    name = "minicache_at_" + "".join(c for c in rev if c.isalnum())
    pkg = Path(tempfile.mkdtemp()) / name
    files = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", rev, "minicache/sandbox/"],
                           capture_output=True, text=True, check=True).stdout.split()
    for path in files + ["minicache/errors.py"]:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"],
                              capture_output=True, text=True, check=True).stdout
        target = pkg / Path(path).relative_to("minicache")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (pkg / "__init__.py").write_text("")
    sys.path.insert(0, str(pkg.parent))
    return importlib.import_module(f"{name}.sandbox")


def worker_cpu_s(pool: Any) -> float:
    """CPU time of the pool's worker processes and of the children they reaped (Linux /proc)."""
    import os
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for worker in list(pool._idle.queue):
        fields = Path(f"/proc/{worker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def measure(sandbox: Any, n: int, gap_s: float) -> dict[str, float]:
    with sandbox.SandboxPool(size=2) as pool:
        for i in range(10):  # warm up both workers
            pool.run(PROGRAM, {"principal": 1000 + i})
        time.sleep(0.2)
        cpu_before = worker_cpu_s(pool)
        seconds, walls = [], []
        for i in range(n):
            if gap_s:
                time.sleep(gap_s)
            began = time.perf_counter()
            result = pool.run(PROGRAM, {"principal": 1000.0 + i, "rate_pct": 5.0, "years": 2})
            walls.append(time.perf_counter() - began)
            seconds.append(result.seconds)
            assert result.value == round((1000.0 + i) * 1.05 ** 2, 2)
        time.sleep(0.2)
        cpu_ms = (worker_cpu_s(pool) - cpu_before) / n * 1e3
    q = statistics.quantiles(seconds, n=100)
    return {"p50_ms": statistics.median(seconds) * 1e3, "p99_ms": q[98] * 1e3,
            "wall_p50_ms": statistics.median(walls) * 1e3, "cpu_ms": cpu_ms}


def repo_programs() -> list[str]:
    """Every ``def solve`` program written as a string constant in the repository's tests and code,
    except the hostile corpus, plus the ConvFinQA PoT programs if the data is on this machine."""
    programs = []
    for path in sorted(ROOT.glob("tests/*.py")) + sorted(ROOT.glob("minicache/**/*.py")):
        if path.name in ("hostile_programs.py", "test_sandbox_hostile.py", "test_sandbox_http.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "def solve" in node.value:
                programs.append(node.value)
    convfinqa = ROOT.parent / "shared/data/convfinqa_pot/convfinqa_dev.json"
    if convfinqa.exists():
        for example in json.loads(convfinqa.read_text()):
            for program in example["programs"]:
                body = "\n".join("    " + line.strip() for line in program.split(";"))
                programs.append(f"def solve():\n{body}\n    return ans\n")
    return programs


def compare_policies(before: Any, now: Any) -> dict[str, Any]:
    def accepts(module: Any, source: str) -> bool:
        try:
            module.check_program(source)
            return True
        except Exception:  # noqa: BLE001 - any refusal counts
            return False
    programs = repo_programs()
    was = [p for p in programs if accepts(before, p)]
    refused = [p for p in was if not accepts(now, p)]
    return {"programs": len(programs), "accepted_before": len(was), "refused_now": len(refused),
            "refused_examples": [p[:120] for p in refused[:5]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="a git revision whose sandbox to measure too")
    parser.add_argument("-n", type=int, default=300, help="calls per measurement")
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--policy", action="store_true", help="also compare the policies (needs --before)")
    args = parser.parse_args()
    versions = {"now": load_sandbox(None)}
    if args.before:
        versions[f"at {args.before}"] = load_sandbox(args.before)
    for label, sandbox in versions.items():
        for gap in (args.gap_ms / 1000, 0.0):
            m = measure(sandbox, args.n, gap)
            print(f"{label:>14}  gap {gap * 1000:4.0f} ms  n={args.n}  sandbox_s p50 {m['p50_ms']:.2f} ms  "
                  f"p99 {m['p99_ms']:.2f} ms  (caller wall p50 {m['wall_p50_ms']:.2f} ms; "
                  f"worker CPU {m['cpu_ms']:.2f} ms per call)")
    if args.policy and args.before:
        print(json.dumps(compare_policies(versions[f"at {args.before}"].policy, versions["now"].policy), indent=1))


if __name__ == "__main__":
    main()
