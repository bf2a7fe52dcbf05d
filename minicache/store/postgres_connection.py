"""PostgreSQL connections: a pool for the store's queries, and migrations applied exactly once.

* Connections come from a :class:`psycopg_pool.ConnectionPool` (thread-safe; autocommit, so a
  read never leaves a transaction open). Every write that touches more than one row runs in one
  transaction (:meth:`PostgresConnection._tx`), so nothing is ever visible half-written.
* Migrations are versioned in ``schema_version`` and applied under ``pg_advisory_xact_lock``, so
  replicas that start together against an empty database migrate it exactly once.

The store's queries are :class:`~minicache.store.postgres.PostgresStore`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    import psycopg
    from psycopg import conninfo as _conninfo
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "the PostgreSQL store needs psycopg 3 and psycopg-pool: "
        "pip install 'psycopg[binary]==3.3.9' psycopg-pool==3.3.3"
    ) from exc

from minicache.errors import StoreError
from minicache.store.dsn import redact_dsn
from minicache.store.schema import POSTGRES, Dialect, upgrade

# Any constant: the key of the advisory lock that serializes migrations (per database).
_MIGRATION_LOCK = 0x6D696E6963616368  # "minicach"

Conn = psycopg.Connection[DictRow]  # every connection reads rows by column name, as SQLite's do
IntegrityError = psycopg.IntegrityError  # a duplicate id: it passes through, as from SQLite


def one(c: Conn, sql: str, args: tuple[Any, ...] = ()) -> Any:
    """The single value of a query that always returns one row (an aggregate, a test)."""
    row = c.execute(sql, args).fetchone()
    assert row is not None, sql
    return next(iter(row.values()))


class PostgresConnection:
    """A PostgreSQL database for a store: migrated when opened, then reached through a pool."""

    dialect: Dialect = POSTGRES

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 30.0,
        connect_timeout: int = 10,
        create: bool = True,
    ) -> None:
        """``create=False``: the database must already hold a MiniCache schema (else StoreError, and
        nothing is created in it); commands that only read use it."""
        self.dsn, self.safe_dsn, self.timeout = dsn, redact_dsn(dsn), timeout
        try:
            params = _conninfo.conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise StoreError(f"invalid PostgreSQL DSN {self.safe_dsn}: {exc}") from None
        self._connect_kwargs: dict[str, Any] = {}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = connect_timeout
        self._closed = False
        self._close_lock = threading.Lock()
        self._local = threading.local()  # this thread's connection while it runs a transaction
        self._migrate(create)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            dsn,
            connection_class=Conn,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=timeout,
            name=f"minicache-store-{id(self):x}",
            kwargs={"autocommit": True, "row_factory": dict_row, **self._connect_kwargs},
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreError(
                f"cannot connect to the PostgreSQL store {self.safe_dsn}: {exc}"
            ) from exc

    # -- connections ----------------------------------------------------------------------
    def _error(self, exc: psycopg.Error) -> StoreError:
        if self._closed:
            return StoreError(f"the PostgreSQL store {self.safe_dsn} is closed")
        if isinstance(exc, psycopg.DataError) and "NUL" in str(exc):
            return StoreError(f"PostgreSQL cannot store text with NUL characters: {exc}")
        return StoreError(f"PostgreSQL store {self.safe_dsn}: {exc}".rstrip())

    @contextmanager
    def _conn(self) -> Iterator[Conn]:
        """A pooled connection in autocommit mode (each statement commits on its own); inside a
        :meth:`_tx` of this thread, that transaction's connection."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        try:
            with self._pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, psycopg.DataError, psycopg.InterfaceError) as exc:
            # Unreachable server, pool timeout or closed, lost connection, text PostgreSQL refuses.
            # Integrity errors (a duplicate id) pass through as they do from SQLite.
            raise self._error(exc) from exc

    def _fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[DictRow]:
        """The rows of one read, on a pooled connection."""
        with self._conn() as c:
            return c.execute(sql, args).fetchall()

    @contextmanager
    def _tx(self) -> Iterator[Conn]:
        """One transaction: committed when the block ends, rolled back if it raises. A ``_tx`` inside
        another of the same thread joins it (as a savepoint), so methods compose into one transaction."""
        with self._conn() as conn:
            outer = getattr(self._local, "conn", None) is None
            self._local.conn = conn
            try:
                with conn.transaction():
                    yield conn
            finally:
                if outer:
                    self._local.conn = None

    def _migrate(self, create: bool = True) -> None:
        try:
            conn = psycopg.connect(
                self.dsn, autocommit=True, row_factory=dict_row, **self._connect_kwargs
            )
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the PostgreSQL store {self.safe_dsn}: {exc}".rstrip()
            ) from exc
        try:
            if not create and not one(conn, "SELECT to_regclass('schema_version') IS NOT NULL"):
                raise StoreError(
                    f"{self.safe_dsn} holds no MiniCache store (it has no schema_version table)"
                )
            with conn.transaction():
                # Replicas starting together queue here; the first migrates, the others find it done.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                conn.execute(POSTGRES.versions)
                current = one(conn, "SELECT COALESCE(MAX(version), 0) FROM schema_version")
                upgrade(conn.execute, current, POSTGRES, self.safe_dsn)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot migrate the PostgreSQL store {self.safe_dsn}: {exc}".rstrip()
            ) from exc
        finally:
            conn.close()

    def schema_version(self) -> int:
        with self._conn() as c:
            return int(one(c, "SELECT MAX(version) FROM schema_version"))

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()
