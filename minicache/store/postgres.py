"""PostgreSQL store: several replicas share one database; the same semantics as the SQLite store.

* Writers that must not interleave are serialized on the group's row (``SELECT ... FOR UPDATE``):
  two replicas storing an entry for one group at once get versions n and n+1, and exactly one of
  them ends up active, as with SQLite's ``BEGIN IMMEDIATE``.
* Build leases use the database server's clock, so replicas on hosts whose clocks disagree still
  agree on when a lease lapses.

Connections, transactions and migrations are
:class:`~minicache.store.postgres_connection.PostgresConnection`'s; the tables and their types are
:mod:`.schema`'s, the rows :mod:`.rows`' (the same as SQLite's).
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from minicache.errors import StoreError
from minicache.store.base import (
    Entry,
    EntryStatus,
    Example,
    Group,
    RoutingRow,
    StepRecord,
    dumps,
    stack_embeddings,
)
from minicache.store.dsn import redact_dsn
from minicache.store.history import HistoryQueries
from minicache.store.postgres_connection import Conn, IntegrityError, PostgresConnection, one
from minicache.store.rows import (
    entry_row,
    example_row,
    step_record_row,
    to_entry,
    to_example,
    to_group,
    to_step_record,
)
from minicache.store.schema import POSTGRES

# The key of the advisory lock example inserts take: seq is drawn and committed under it, so a
# reader that has seen seq n has also seen every committed example below n (identity values are
# otherwise drawn at insert and may commit out of order).
_EXAMPLES_LOCK = 0x6D636578616D706C  # "mcexampl"

_NOW = "EXTRACT(EPOCH FROM statement_timestamp())::float8"  # the server's clock, in epoch seconds

__all__ = ["PostgresStore", "redact_dsn"]


class PostgresStore(PostgresConnection, HistoryQueries):
    """The :class:`~minicache.store.base.Store` protocol on PostgreSQL (psycopg 3 + a connection pool)."""

    # -- groups -----------------------------------------------------------------------------
    _GROUP_SELECT = (
        "SELECT g.*, (SELECT COUNT(*) FROM examples e WHERE e.tenant=g.tenant AND e.group_id=g.id) "
        "AS n FROM groups g"
    )

    def _get_group(self, c: Conn, tenant: str, group_id: str) -> Group | None:
        row = c.execute(
            self._GROUP_SELECT + " WHERE g.tenant=%s AND g.id=%s", (tenant, group_id)
        ).fetchone()
        return to_group(row, row["n"]) if row else None

    def get_group(self, tenant: str, group_id: str) -> Group | None:
        with self._conn() as c:
            return self._get_group(c, tenant, group_id)

    def ensure_group(self, tenant: str, group_id: str, label: str | None = None) -> Group:
        with self._conn() as c:
            c.execute(
                "INSERT INTO groups (tenant, id, label, created_at) VALUES (%s,%s,%s,%s) "
                "ON CONFLICT (tenant, id) DO NOTHING",
                (tenant, group_id, label, time.time()),
            )
            group = self._get_group(c, tenant, group_id)
        if group is None:  # deleted by another replica in between: as good as never created
            raise StoreError(
                f"group {group_id} of tenant {tenant} was deleted while it was being created"
            )
        return group

    def list_groups(self, tenant: str) -> list[Group]:
        with self._conn() as c:
            rows = c.execute(
                self._GROUP_SELECT + " WHERE g.tenant=%s ORDER BY g.created_at, g.seq", (tenant,)
            ).fetchall()
        return [to_group(r, r["n"]) for r in rows]

    def update_group(self, group: Group) -> None:
        with self._conn() as c:
            c.execute(
                "UPDATE groups SET label=%s, status=%s, build_failures=%s, uncacheable_until=%s "
                "WHERE tenant=%s AND id=%s",
                (
                    group.label,
                    group.status,
                    group.build_failures,
                    float(group.uncacheable_until),
                    group.tenant,
                    group.id,
                ),
            )

    @staticmethod
    def _lock_group(c: Conn, tenant: str, group_id: str, create_at: float | None = None) -> None:
        """Serialize the writers of one group's entries (put_entry, status changes) until commit;
        with ``create_at``, create the group first if it does not exist."""
        if create_at is not None:
            c.execute(
                "INSERT INTO groups (tenant, id, created_at) VALUES (%s,%s,%s) ON CONFLICT (tenant, id) "
                "DO NOTHING",
                (tenant, group_id, create_at),
            )
        c.execute("SELECT 1 FROM groups WHERE tenant=%s AND id=%s FOR UPDATE", (tenant, group_id))

    def delete_group(self, tenant: str, group_id: str) -> int:
        with self._tx() as c:
            self._lock_group(c, tenant, group_id)
            n = c.execute(
                "DELETE FROM entries WHERE tenant=%s AND group_id=%s", (tenant, group_id)
            ).rowcount
            c.execute("DELETE FROM examples WHERE tenant=%s AND group_id=%s", (tenant, group_id))
            c.execute("DELETE FROM groups WHERE tenant=%s AND id=%s", (tenant, group_id))
        return n

    # -- examples -------------------------------------------------------------------------
    def add_example(self, example: Example) -> None:
        with self._tx() as c:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (_EXAMPLES_LOCK,))
            c.execute(*POSTGRES.insert("examples", example_row(example)))

    def examples(self, tenant: str, group_id: str) -> list[Example]:
        with self._conn() as c:
            rows = c.execute(
                "SELECT * FROM examples WHERE tenant=%s AND group_id=%s ORDER BY created_at, seq",
                (tenant, group_id),
            ).fetchall()
        return [to_example(r) for r in rows]

    def clear_examples(self, tenant: str, group_id: str) -> int:
        with self._tx() as c:
            n = c.execute(
                "DELETE FROM examples WHERE tenant=%s AND group_id=%s", (tenant, group_id)
            ).rowcount
            c.execute(
                "UPDATE groups SET build_failures=0, status='open' WHERE tenant=%s AND id=%s",
                (tenant, group_id),
            )
        return n

    def routing_index(self, tenant: str) -> tuple[list[str], np.ndarray]:
        with self._conn() as c:
            rows = c.execute(
                "SELECT group_id, embedding FROM examples WHERE tenant=%s AND embedding IS NOT NULL "
                "ORDER BY created_at, seq",
                (tenant,),
            ).fetchall()
        return stack_embeddings([(r["group_id"], bytes(r["embedding"])) for r in rows])

    def examples_since(self, tenant: str, cursor: int, limit: int = 10_000) -> list[RoutingRow]:
        """Examples with an embedding and ``seq > cursor``, oldest first (an index range scan)."""
        with self._conn() as c:
            rows = c.execute(
                "SELECT seq, id, group_id, embedding FROM examples WHERE tenant=%s AND seq>%s "
                "AND embedding IS NOT NULL ORDER BY seq LIMIT %s",
                (tenant, cursor, limit),
            ).fetchall()
        return [RoutingRow(r["seq"], r["id"], r["group_id"], bytes(r["embedding"])) for r in rows]

    def set_group_failure(self, tenant: str, group_id: str, failure: dict[str, Any] | None) -> None:
        with self._conn() as c:
            c.execute(
                "UPDATE groups SET failure=%s WHERE tenant=%s AND id=%s",
                (None if failure is None else dumps(failure), tenant, group_id),
            )

    def group_failure(self, tenant: str, group_id: str) -> dict[str, Any] | None:
        with self._conn() as c:
            row = c.execute(
                "SELECT failure FROM groups WHERE tenant=%s AND id=%s", (tenant, group_id)
            ).fetchone()
        return json.loads(row["failure"]) if row and row["failure"] else None

    # -- entries --------------------------------------------------------------------------
    def put_entry(self, entry: Entry) -> Entry:
        """Insert ``entry`` as the group's newest version; an active one supersedes the previous.

        One transaction: other replicas see the old active entry or the new one, never both or neither."""
        now = time.time()
        with self._tx() as c:
            self._lock_group(c, entry.tenant, entry.group_id, create_at=now)
            version = one(
                c,
                "SELECT COALESCE(MAX(version), 0) + 1 FROM entries WHERE tenant=%s AND group_id=%s",
                (entry.tenant, entry.group_id),
            )
            if entry.status == "active":
                c.execute(
                    "UPDATE entries SET status='superseded', updated_at=%s WHERE tenant=%s AND group_id=%s "
                    "AND status='active'",
                    (now, entry.tenant, entry.group_id),
                )
                c.execute(
                    "UPDATE groups SET status='cached' WHERE tenant=%s AND id=%s",
                    (entry.tenant, entry.group_id),
                )
            c.execute(
                *POSTGRES.insert(
                    "entries", {**entry_row(entry), "version": version, "updated_at": now}
                )
            )
        entry.version, entry.updated_at = version, now
        return entry

    def import_entries(self, entries: list[Entry], examples: list[Example]) -> None:
        """Write ``entries`` (each as :meth:`put_entry` would) and ``examples`` in ONE transaction:
        all of them land, or (any write failing) none does. The groups are locked first, in sorted
        order, so two imports (or an import and put_entry) never wait on each other in a cycle."""
        now = time.time()
        try:
            with self._tx() as c:
                for tenant, group_id in sorted({(e.tenant, e.group_id) for e in entries}):
                    self._lock_group(c, tenant, group_id, create_at=now)
                for entry in entries:
                    self.put_entry(entry)
                for example in examples:
                    self.add_example(example)
        except IntegrityError as exc:
            raise StoreError(f"import rolled back, nothing was written: {exc}".rstrip()) from exc

    def active_entry(self, tenant: str, group_id: str) -> Entry | None:
        with self._conn() as c:
            row = c.execute(
                "SELECT * FROM entries WHERE tenant=%s AND group_id=%s AND status='active' "
                "ORDER BY version DESC LIMIT 1",
                (tenant, group_id),
            ).fetchone()
        return to_entry(row) if row else None

    def get_entry(self, tenant: str, entry_id: str) -> Entry | None:
        with self._conn() as c:
            row = c.execute(
                "SELECT * FROM entries WHERE tenant=%s AND id=%s", (tenant, entry_id)
            ).fetchone()
        return to_entry(row) if row else None

    def list_entries(self, tenant: str, status: EntryStatus | None = None) -> list[Entry]:
        where, args = (
            ("tenant=%s AND status=%s", [tenant, status]) if status else ("tenant=%s", [tenant])
        )
        with self._conn() as c:
            rows = c.execute(
                f"SELECT * FROM entries WHERE {where} ORDER BY created_at, seq", args
            ).fetchall()
        return [to_entry(r) for r in rows]

    def record_hit(self, tenant: str, entry_id: str) -> None:
        with self._conn() as c:
            c.execute(*POSTGRES.add_to("entries", tenant, entry_id, {"hits": 1}))

    def record_failure(self, tenant: str, entry_id: str) -> int:
        with self._conn() as c:
            row = c.execute(
                "UPDATE entries SET failures=failures+1, updated_at=%s WHERE tenant=%s AND id=%s "
                "RETURNING failures",
                (time.time(), tenant, entry_id),
            ).fetchone()
        return row["failures"] if row else 0

    def record_audit(self, tenant: str, entry_id: str, agreed: bool) -> tuple[int, int]:
        """Count one audit of ``entry_id``; returns its (agreed, disagreed) totals ((0, 0) if gone)."""
        column = "audits_agreed" if agreed else "audits_disagreed"
        with self._conn() as c:
            row = c.execute(
                f"UPDATE entries SET {column}={column}+1 WHERE tenant=%s AND id=%s "
                "RETURNING audits_agreed, audits_disagreed",
                (tenant, entry_id),
            ).fetchone()
        return (row["audits_agreed"], row["audits_disagreed"]) if row else (0, 0)

    def record_model_choice(self, tenant: str, entry_id: str, served: bool, ms: int) -> None:
        with self._conn() as c:
            c.execute(*POSTGRES.add_to("entries", tenant, entry_id, Entry.model_choice(served, ms)))

    def _reopen_if_no_active(self, c: Conn, tenant: str, group_id: str) -> None:
        active = one(
            c,
            "SELECT EXISTS (SELECT 1 FROM entries WHERE tenant=%s AND group_id=%s AND status='active')",
            (tenant, group_id),
        )
        if not active:
            c.execute(
                "UPDATE groups SET status='open' WHERE tenant=%s AND id=%s AND status='cached'",
                (tenant, group_id),
            )

    def set_entry_status(self, tenant: str, entry_id: str, status: EntryStatus) -> None:
        with self._tx() as c:
            row = c.execute(
                "SELECT group_id FROM entries WHERE tenant=%s AND id=%s", (tenant, entry_id)
            ).fetchone()
            if row is None:
                return
            self._lock_group(
                c, tenant, row["group_id"]
            )  # group first, then entries: put_entry's order
            c.execute(
                "UPDATE entries SET status=%s, updated_at=%s WHERE tenant=%s AND id=%s",
                (status, time.time(), tenant, entry_id),
            )
            if status != "active":
                self._reopen_if_no_active(c, tenant, row["group_id"])

    def delete_entry(self, tenant: str, entry_id: str) -> bool:
        """Delete one entry (any status); the group re-opens if that leaves it no active entry."""
        with self._tx() as c:
            row = c.execute(
                "SELECT group_id FROM entries WHERE tenant=%s AND id=%s", (tenant, entry_id)
            ).fetchone()
            if row is None:
                return False
            self._lock_group(c, tenant, row["group_id"])
            if not c.execute(
                "DELETE FROM entries WHERE tenant=%s AND id=%s", (tenant, entry_id)
            ).rowcount:
                return False  # deleted by another replica meanwhile
            self._reopen_if_no_active(c, tenant, row["group_id"])
        return True

    # -- build leases ---------------------------------------------------------------------
    def acquire_build_lease(self, tenant: str, group_id: str, owner: str, ttl_s: float) -> bool:
        """Take the group's build lease unless another owner holds an unexpired one.

        One statement: the row is inserted, or taken over when expired (or already ours); RETURNING
        yields a row only then. Expiry is judged by the database server's clock."""
        with self._conn() as c:
            row = c.execute(
                f"INSERT INTO build_leases (tenant, group_id, owner, expires_at) VALUES (%s, %s, %s, {_NOW} + %s) "
                "ON CONFLICT (tenant, group_id) DO UPDATE SET owner=EXCLUDED.owner, expires_at=EXCLUDED.expires_at "
                f"WHERE build_leases.expires_at < {_NOW} OR build_leases.owner = EXCLUDED.owner RETURNING owner",
                (tenant, group_id, owner, float(ttl_s)),
            ).fetchone()
        return row is not None and row["owner"] == owner

    def release_build_lease(self, tenant: str, group_id: str, owner: str) -> None:
        with self._conn() as c:
            c.execute(
                "DELETE FROM build_leases WHERE tenant=%s AND group_id=%s AND owner=%s",
                (tenant, group_id, owner),
            )

    # -- step records -----------------------------------------------------------------------
    def add_step_record(self, record: StepRecord) -> None:
        with self._conn() as c:
            c.execute(*POSTGRES.insert("step_records", step_record_row(record)))

    def step_records(self, tenant: str, task: str) -> list[StepRecord]:
        with self._conn() as c:
            rows = c.execute(
                "SELECT * FROM step_records WHERE tenant=%s AND task=%s ORDER BY created_at, seq",
                (tenant, task),
            ).fetchall()
        return [to_step_record(r) for r in rows]

    # -- counters -------------------------------------------------------------------------
    def bump(self, tenant: str, counter: str, n: int = 1) -> None:
        with self._conn() as c:
            c.execute(
                "INSERT INTO counters (tenant, name, value) VALUES (%s,%s,%s) ON CONFLICT (tenant, name) "
                "DO UPDATE SET value = counters.value + EXCLUDED.value",
                (tenant, counter, int(n)),
            )

    def counters(self, tenant: str) -> dict[str, int]:
        with self._conn() as c:
            rows = c.execute(
                "SELECT name, value FROM counters WHERE tenant=%s", (tenant,)
            ).fetchall()
        return {r["name"]: r["value"] for r in rows}

    def __repr__(self) -> str:
        return f"PostgresStore({self.safe_dsn!r})"
