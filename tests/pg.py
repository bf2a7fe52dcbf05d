"""A real PostgreSQL server for the tests: started once per session, a fresh database per test.

``pg_server`` (session) starts a throwaway server with scripts/pg-test-server.sh in a temporary
directory and stops it at the end; with ``MINICACHE_TEST_PG_DSN`` set (a superuser DSN, e.g.
``postgresql://postgres@127.0.0.1:5432/postgres``) it uses that server instead and starts nothing.
``pg_dsn`` is a DSN to a new, empty database that is dropped after the test. ``pg_database`` is a
factory for more of them.

Where no server can be had (no PostgreSQL binaries and no root to install them) the tests are
skipped, unless ``MINICACHE_TEST_PG_REQUIRED=1`` (set it in CI), which makes that an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pg-test-server.sh"
NO_POSTGRES = 3  # the script's exit status when there are no binaries and none can be installed


def dsn_with_database(dsn: str, dbname: str) -> str:
    """``dsn`` pointing at database ``dbname`` (URL or key=value form)."""
    if dsn.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(dsn)
        return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, dbname=dbname)


def _script(command: str, directory: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), command, directory],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The admin DSN of a PostgreSQL server for this test session."""
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    given = os.environ.get("MINICACHE_TEST_PG_DSN")
    if given:
        yield given
        return
    directory = tempfile.mkdtemp(prefix="minicache-pgtest-")
    try:
        started = _script("start", directory)
        if started.returncode != 0:
            message = f"cannot start a test PostgreSQL server:\n{started.stderr.strip()}"
            if (
                started.returncode == NO_POSTGRES
                and os.environ.get("MINICACHE_TEST_PG_REQUIRED") != "1"
            ):
                pytest.skip(message)
            pytest.fail(message, pytrace=False)
        yield started.stdout.strip().splitlines()[-1]
    finally:
        stopped = _script("stop", directory, timeout=60)
        shutil.rmtree(directory, ignore_errors=True)
        if stopped.returncode != 0:
            print(f"pg-test-server.sh stop failed: {stopped.stderr}")


@pytest.fixture
def pg_database(pg_server) -> Iterator[Callable[[], str]]:
    """Factory: a DSN to a new, empty database (dropped, connections and all, after the test)."""
    import psycopg

    created: list[str] = []

    def make() -> str:
        name = f"mc_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_server, autocommit=True) as admin:
            # PostgreSQL 15+ copies the template through the WAL by default: ~8x slower here.
            strategy = " STRATEGY FILE_COPY" if admin.info.server_version >= 150000 else ""
            admin.execute(f'CREATE DATABASE "{name}"{strategy}')
        created.append(name)
        return dsn_with_database(pg_server, name)

    yield make
    with psycopg.connect(pg_server, autocommit=True) as admin:
        for name in created:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_dsn(pg_database) -> str:
    return pg_database()
