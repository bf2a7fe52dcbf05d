"""One tenant's programs that run to their time limit do not hold every sandbox worker: another
tenant's jobs start at once (a worker is kept for a tenant that holds none) and wait only for their
turn among tenants, not behind the first tenant's queue."""

from __future__ import annotations

import threading
import time

import pytest

from minicache.models.compute import working_for
from minicache.sandbox import SandboxError, SandboxPool

ENDLESS = (
    "def solve(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"
)
QUICK = "def solve(a, b):\n    return a * b\n"
BOUND_S = 0.3  # a quick job's wall time beside the loops: below one loop's 0.5 s


def test_a_tenants_endless_programs_do_not_delay_another_tenants_jobs():
    with SandboxPool(size=2, timeout_s=0.5, cpu_s=0.5, memory_mb=256) as pool:
        stop = threading.Event()
        a_jobs: list[str] = []

        def tenant_a() -> None:
            with working_for("a"):
                while not stop.is_set():
                    try:
                        pool.run(ENDLESS, {"n": 10**9})
                    except SandboxError as exc:
                        a_jobs.append(exc.kind)

        flood = [threading.Thread(target=tenant_a, daemon=True) for _ in range(3)]
        for t in flood:
            t.start()
        time.sleep(0.3)  # a's loops hold what they may
        took = []
        try:
            for n in range(15):
                began = time.perf_counter()
                assert pool.run(QUICK, {"a": n, "b": 3}, tenant="b").value == 3 * n
                took.append(time.perf_counter() - began)
                time.sleep(0.05)
        finally:
            stop.set()
            for t in flood:
                t.join(10)
        print(f"\nb's jobs beside a's loops: max {max(took) * 1000:.0f} ms")
        assert max(took) < BOUND_S, took
        assert a_jobs and set(a_jobs) == {"timeout"}  # a's loops did run, to their limit


@pytest.mark.parametrize("size", [1])
def test_a_pool_of_one_still_serves_everyone_in_turn(size):
    with SandboxPool(size=size, timeout_s=2.0) as pool:
        assert pool.run(QUICK, {"a": 2, "b": 3}, tenant="a").value == 6
        assert pool.run(QUICK, {"a": 2, "b": 4}).value == 8
