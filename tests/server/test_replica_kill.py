"""kill -9 of a replica in the middle of a build leaves the shared PostgreSQL store consistent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.sandbox import SandboxPool
from minicache.store import PostgresStore

pytestmark = pytest.mark.postgres
TESTS = Path(__file__).resolve().parents[1]


def test_killing_a_replica_mid_build_leaves_no_entry_and_its_lease_lapses(pg_dsn):
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{TESTS.parent}")
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "replica_worker.py"), pg_dsn],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()  # the replica is now inside its build, holding the lease
        assert line.strip() == "EXTRACTING", line
        store = PostgresStore(pg_dsn)
        group_id = store.list_groups("default")[0].id
        assert not store.acquire_build_lease("default", group_id, "someone-else", ttl_s=60)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # Consistent: the three examples are there, no entry (not even a half-written one), group open.
    assert len(store.examples("default", group_id)) == 3
    assert store.list_entries("default") == []
    assert store.active_entry("default", group_id) is None
    # Replica B takes over once the dead replica's lease has lapsed (3 s) and builds the entry once.
    with SandboxPool(size=1) as sandbox:
        b = MiniCache(
            FakeTarget(),
            FakeSmall(),
            pg_dsn,
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(
                background_builds=False, verify=VerifyConfig(probation=0), build_early=0
            ),
        )
        time.sleep(3.5)
        b.builder.build("default", group_id)
        assert len(store.list_entries("default", "active")) == 1
        hit = b.solve(CURRENT_RATIO.ask(*CR_VALUES[3]))
        assert hit.route == "hit" and hit.answer == pytest.approx(
            CURRENT_RATIO.answer(*CR_VALUES[3])
        )
        b.close()
    store.close()
