"""SQLite connections: one file, WAL journal, versioned migrations, one connection per thread.

WAL lets readers proceed while a writer commits, and several processes may open the same file.
Every write runs in ``BEGIN IMMEDIATE`` so concurrent writers queue (busy timeout) instead of
failing half-way, and an entry becomes visible only when its transaction commits. The store's
queries are :class:`~minicache.store.sqlite.SQLiteStore`'s; this is how they reach the file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from minicache.errors import StoreBusy, StoreError
from minicache.store.schema import SQLITE, Dialect, upgrade


class SQLiteConnection:
    """``create=False`` opens only an existing MiniCache store: a missing file (or directory), or a
    file without MiniCache's schema, is a :class:`StoreError` and nothing is created. Commands that
    only read use it, so that a mistyped path is an error instead of a new, empty cache."""

    dialect: Dialect = SQLITE

    def __init__(
        self, path: str | Path = "minicache.db", *, busy_timeout_s: float = 5.0, create: bool = True
    ) -> None:
        self.path = str(path)
        self.busy_timeout_s = busy_timeout_s  # a bounded wait for another process's write lock
        self._uri = False
        self._keepalive: sqlite3.Connection | None = None
        if self.path == ":memory:":
            # Every plain ":memory:" connection is its own empty database; a named shared-cache
            # in-memory database is visible to all of this store's per-thread connections.
            self.path, self._uri = f"file:minicache-{id(self)}?mode=memory&cache=shared", True
            self._keepalive = sqlite3.connect(self.path, uri=True, check_same_thread=False)
        else:
            self.path = str(Path(self.path).expanduser())
            if create:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            else:
                self._require_store()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._migrate()

    def _require_store(self) -> None:
        """For ``create=False``: the file must exist and hold MiniCache's schema. Probed read-only
        (``mode=ro``), because a store connection's first statement (WAL mode) would already write."""
        file = Path(self.path)
        if not file.is_file():
            raise StoreError(f"no MiniCache store at {self.path}: the file does not exist")
        try:
            probe = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
            try:
                found = probe.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'"
                ).fetchone()
            finally:
                probe.close()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path} is not a MiniCache store: {exc}") from exc
        if not found:
            raise StoreError(
                f"{self.path} is not a MiniCache store (it has no schema_version table)"
            )

    # -- connections ----------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path,
                    timeout=self.busy_timeout_s,
                    isolation_level=None,
                    check_same_thread=False,
                    uri=self._uri,
                )
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _fetch(self, sql: str, args: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        """The rows of one read, on this thread's connection."""
        return self._conn().execute(sql, args).fetchall()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction; a ``_tx`` inside another (this thread's connection) joins the outer one."""
        conn = self._conn()
        if conn.in_transaction:
            yield conn
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreBusy(f"{self.path}: {exc} (waited {self.busy_timeout_s:g} s)") from exc
            raise
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self._tx() as c:
            c.execute(SQLITE.versions)
            current = c.execute("SELECT MAX(version) AS v FROM schema_version").fetchone()["v"] or 0
            upgrade(c.execute, current, SQLITE, self.path)

    def schema_version(self) -> int:
        return self._conn().execute("SELECT MAX(version) AS v FROM schema_version").fetchone()["v"]

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
        if self._keepalive is not None:
            self._keepalive.close()
            self._keepalive = None
