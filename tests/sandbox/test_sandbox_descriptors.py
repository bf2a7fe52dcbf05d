"""A sandbox job still runs when the process holds descriptors above 1023 (a server holding a
thousand idle connections): the pool waits on its pipes with ``poll``, which ``select`` cannot do."""

from __future__ import annotations

import os
import resource

import pytest

from minicache.sandbox import SandboxPool
from minicache.sandbox.pool import raise_open_file_limit

HELD = 1100


def test_raise_open_file_limit_reaches_the_hard_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        raised = raise_open_file_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (raised, hard)
        assert hard == resource.RLIM_INFINITY or raised == hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_job_runs_while_the_process_holds_descriptors_above_1023():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HELD + 200:
        pytest.skip(f"the hard limit on open descriptors is {hard}, below {HELD + 200}")
    held: list[int] = []
    try:
        with SandboxPool(size=1, timeout_s=5.0) as pool:  # raises the soft limit as it starts
            assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= HELD + 200
            while len(held) < HELD:
                held.append(os.open(os.devnull, os.O_RDONLY))
            assert max(held) > 1024
            for n in range(3):  # each job's pipes are now above 1023
                assert pool.run("def solve(n):\n    return n * 2\n", {"n": n}).value == n * 2
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
