"""SQLite store: the :class:`~minicache.store.base.Store` protocol's queries on one SQLite file.

How the file is opened, migrated and written (WAL, ``BEGIN IMMEDIATE``, a connection per thread) is
:class:`~minicache.store.sqlite_connection.SQLiteConnection`'s; the rows are :mod:`.rows`' (the
same as PostgreSQL's).
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import numpy as np

from minicache.errors import StoreBusy, StoreError
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
from minicache.store.history import HistoryQueries
from minicache.store.rows import (
    entry_row,
    example_row,
    step_record_row,
    to_entry,
    to_example,
    to_group,
    to_step_record,
)
from minicache.store.schema import SQLITE
from minicache.store.sqlite_connection import SQLiteConnection

__all__ = ["SQLiteStore", "StoreBusy", "StoreError"]  # the errors live in minicache.errors


class SQLiteStore(SQLiteConnection, HistoryQueries):
    """The store on one SQLite file (``:memory:``: a database shared by this store's threads).
    ``create=False`` opens only an existing store (see :class:`SQLiteConnection`)."""

    # -- groups -----------------------------------------------------------------------------
    def _count_examples(self, c: sqlite3.Connection, tenant: str, group_id: str) -> int:
        return c.execute(
            "SELECT COUNT(*) FROM examples WHERE tenant=? AND group_id=?", (tenant, group_id)
        ).fetchone()[0]

    def get_group(self, tenant: str, group_id: str) -> Group | None:
        c = self._conn()
        row = c.execute(
            "SELECT * FROM groups WHERE tenant=? AND id=?", (tenant, group_id)
        ).fetchone()
        return to_group(row, self._count_examples(c, tenant, group_id)) if row else None

    def ensure_group(self, tenant: str, group_id: str, label: str | None = None) -> Group:
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO groups (tenant, id, label, created_at) VALUES (?,?,?,?)",
                (tenant, group_id, label, time.time()),
            )
        group = self.get_group(tenant, group_id)
        assert group is not None
        return group

    def list_groups(self, tenant: str) -> list[Group]:
        c = self._conn()
        rows = c.execute(
            "SELECT g.*, (SELECT COUNT(*) FROM examples e WHERE e.tenant=g.tenant AND "
            "e.group_id=g.id) AS n FROM groups g WHERE tenant=? ORDER BY created_at",
            (tenant,),
        ).fetchall()
        return [to_group(r, r["n"]) for r in rows]

    def update_group(self, group: Group) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE groups SET label=?, status=?, build_failures=?, uncacheable_until=? "
                "WHERE tenant=? AND id=?",
                (
                    group.label,
                    group.status,
                    group.build_failures,
                    group.uncacheable_until,
                    group.tenant,
                    group.id,
                ),
            )

    def delete_group(self, tenant: str, group_id: str) -> int:
        with self._tx() as c:
            n = c.execute(
                "DELETE FROM entries WHERE tenant=? AND group_id=?", (tenant, group_id)
            ).rowcount
            c.execute("DELETE FROM examples WHERE tenant=? AND group_id=?", (tenant, group_id))
            c.execute("DELETE FROM groups WHERE tenant=? AND id=?", (tenant, group_id))
        return n

    # -- examples -------------------------------------------------------------------------
    def add_example(self, example: Example) -> None:
        with self._tx() as c:
            # Writers are serialized (BEGIN IMMEDIATE), so seq order is commit order.
            seq = c.execute(
                "UPDATE sequences SET value=value+1 WHERE name='examples' RETURNING value"
            ).fetchone()[0]
            c.execute(*SQLITE.insert("examples", {**example_row(example), "seq": seq}))

    def examples(self, tenant: str, group_id: str) -> list[Example]:
        rows = (
            self._conn()
            .execute(
                "SELECT * FROM examples WHERE tenant=? AND group_id=? ORDER BY created_at, rowid",
                (tenant, group_id),
            )
            .fetchall()
        )
        return [to_example(r) for r in rows]

    def clear_examples(self, tenant: str, group_id: str) -> int:
        with self._tx() as c:
            n = c.execute(
                "DELETE FROM examples WHERE tenant=? AND group_id=?", (tenant, group_id)
            ).rowcount
            c.execute(
                "UPDATE groups SET build_failures=0, status='open' WHERE tenant=? AND id=?",
                (tenant, group_id),
            )
        return n

    def routing_index(self, tenant: str) -> tuple[list[str], np.ndarray]:
        rows = (
            self._conn()
            .execute(
                "SELECT group_id, embedding FROM examples WHERE tenant=? AND embedding IS NOT NULL "
                "ORDER BY created_at, rowid",
                (tenant,),
            )
            .fetchall()
        )
        return stack_embeddings([(r["group_id"], r["embedding"]) for r in rows])

    def examples_since(self, tenant: str, cursor: int, limit: int = 10_000) -> list[RoutingRow]:
        """Examples with an embedding and ``seq > cursor``, oldest first (an indexed range scan)."""
        rows = (
            self._conn()
            .execute(
                "SELECT seq, id, group_id, embedding FROM examples WHERE tenant=? AND seq>? "
                "AND embedding IS NOT NULL ORDER BY seq LIMIT ?",
                (tenant, cursor, limit),
            )
            .fetchall()
        )
        return [RoutingRow(r["seq"], r["id"], r["group_id"], r["embedding"]) for r in rows]

    def set_group_failure(self, tenant: str, group_id: str, failure: dict[str, Any] | None) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE groups SET failure=? WHERE tenant=? AND id=?",
                (None if failure is None else dumps(failure), tenant, group_id),
            )

    def group_failure(self, tenant: str, group_id: str) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute("SELECT failure FROM groups WHERE tenant=? AND id=?", (tenant, group_id))
            .fetchone()
        )
        return json.loads(row["failure"]) if row and row["failure"] else None

    # -- entries --------------------------------------------------------------------------
    def put_entry(self, entry: Entry) -> Entry:
        """Insert ``entry`` as the group's newest version; an active one supersedes the previous."""
        now = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO groups (tenant, id, created_at) VALUES (?,?,?)",
                (entry.tenant, entry.group_id, now),
            )
            version = (
                c.execute(
                    "SELECT COALESCE(MAX(version), 0) FROM entries WHERE tenant=? AND group_id=?",
                    (entry.tenant, entry.group_id),
                ).fetchone()[0]
                + 1
            )
            if entry.status == "active":
                c.execute(
                    "UPDATE entries SET status='superseded', updated_at=? WHERE tenant=? AND group_id=? "
                    "AND status='active'",
                    (now, entry.tenant, entry.group_id),
                )
                c.execute(
                    "UPDATE groups SET status='cached' WHERE tenant=? AND id=?",
                    (entry.tenant, entry.group_id),
                )
            c.execute(
                *SQLITE.insert(
                    "entries", {**entry_row(entry), "version": version, "updated_at": now}
                )
            )
        entry.version, entry.updated_at = version, now
        return entry

    def import_entries(self, entries: list[Entry], examples: list[Example]) -> None:
        """Write ``entries`` (each as :meth:`put_entry` would) and ``examples`` in ONE transaction:
        all of them land, or (any write failing) none does."""
        try:
            with self._tx():
                for entry in entries:
                    self.put_entry(entry)
                for example in examples:
                    self.add_example(example)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"import rolled back, nothing was written: {exc}") from exc

    def active_entry(self, tenant: str, group_id: str) -> Entry | None:
        row = (
            self._conn()
            .execute(
                "SELECT * FROM entries WHERE tenant=? AND group_id=? AND status='active' "
                "ORDER BY version DESC LIMIT 1",
                (tenant, group_id),
            )
            .fetchone()
        )
        return to_entry(row) if row else None

    def get_entry(self, tenant: str, entry_id: str) -> Entry | None:
        row = (
            self._conn()
            .execute("SELECT * FROM entries WHERE tenant=? AND id=?", (tenant, entry_id))
            .fetchone()
        )
        return to_entry(row) if row else None

    def list_entries(self, tenant: str, status: EntryStatus | None = None) -> list[Entry]:
        sql, args = "SELECT * FROM entries WHERE tenant=?", [tenant]
        if status:
            sql, args = sql + " AND status=?", args + [status]
        return [
            to_entry(r) for r in self._conn().execute(sql + " ORDER BY created_at", args).fetchall()
        ]

    def record_hit(self, tenant: str, entry_id: str) -> None:
        with self._tx() as c:
            c.execute("UPDATE entries SET hits=hits+1 WHERE tenant=? AND id=?", (tenant, entry_id))

    def record_failure(self, tenant: str, entry_id: str) -> int:
        with self._tx() as c:
            c.execute(
                "UPDATE entries SET failures=failures+1, updated_at=? WHERE tenant=? AND id=?",
                (time.time(), tenant, entry_id),
            )
            row = c.execute(
                "SELECT failures FROM entries WHERE tenant=? AND id=?", (tenant, entry_id)
            ).fetchone()
        return row[0] if row else 0

    def record_audit(self, tenant: str, entry_id: str, agreed: bool) -> tuple[int, int]:
        """Count one audit of ``entry_id``; returns its (agreed, disagreed) totals ((0, 0) if gone)."""
        column = "audits_agreed" if agreed else "audits_disagreed"
        with self._tx() as c:
            c.execute(
                f"UPDATE entries SET {column}={column}+1 WHERE tenant=? AND id=?",
                (tenant, entry_id),
            )
            row = c.execute(
                "SELECT audits_agreed, audits_disagreed FROM entries WHERE tenant=? AND id=?",
                (tenant, entry_id),
            ).fetchone()
        return (row[0], row[1]) if row else (0, 0)

    def record_model_choice(self, tenant: str, entry_id: str, served: bool, ms: int) -> None:
        with self._tx() as c:
            c.execute(*SQLITE.add_to("entries", tenant, entry_id, Entry.model_choice(served, ms)))

    def set_entry_status(self, tenant: str, entry_id: str, status: EntryStatus) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE entries SET status=?, updated_at=? WHERE tenant=? AND id=?",
                (status, time.time(), tenant, entry_id),
            )
            row = c.execute(
                "SELECT group_id FROM entries WHERE tenant=? AND id=?", (tenant, entry_id)
            ).fetchone()
            if row and status != "active":
                active = c.execute(
                    "SELECT COUNT(*) FROM entries WHERE tenant=? AND group_id=? AND status='active'",
                    (tenant, row[0]),
                ).fetchone()[0]
                if not active:
                    c.execute(
                        "UPDATE groups SET status='open' WHERE tenant=? AND id=? AND status='cached'",
                        (tenant, row[0]),
                    )

    def delete_entry(self, tenant: str, entry_id: str) -> bool:
        """Delete an entry and re-open its group if it has no active entry left, in one transaction."""
        with self._tx() as c:
            row = c.execute(
                "SELECT group_id FROM entries WHERE tenant=? AND id=?", (tenant, entry_id)
            ).fetchone()
            if row is None:
                return False
            c.execute("DELETE FROM entries WHERE tenant=? AND id=?", (tenant, entry_id))
            active = c.execute(
                "SELECT COUNT(*) FROM entries WHERE tenant=? AND group_id=? AND status='active'",
                (tenant, row[0]),
            ).fetchone()[0]
            if not active:
                c.execute(
                    "UPDATE groups SET status='open' WHERE tenant=? AND id=? AND status='cached'",
                    (tenant, row[0]),
                )
        return True

    # -- build leases ---------------------------------------------------------------------
    def acquire_build_lease(self, tenant: str, group_id: str, owner: str, ttl_s: float) -> bool:
        """Take the group's build lease unless another owner holds an unexpired one."""
        now = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT INTO build_leases (tenant, group_id, owner, expires_at) VALUES (?,?,?,?) "
                "ON CONFLICT (tenant, group_id) DO UPDATE SET owner=excluded.owner, "
                "expires_at=excluded.expires_at "
                "WHERE build_leases.expires_at < ? OR build_leases.owner = excluded.owner",
                (tenant, group_id, owner, now + ttl_s, now),
            )
            row = c.execute(
                "SELECT owner FROM build_leases WHERE tenant=? AND group_id=?", (tenant, group_id)
            ).fetchone()
        return row is not None and row["owner"] == owner

    def release_build_lease(self, tenant: str, group_id: str, owner: str) -> None:
        with self._tx() as c:
            c.execute(
                "DELETE FROM build_leases WHERE tenant=? AND group_id=? AND owner=?",
                (tenant, group_id, owner),
            )

    # -- step records -----------------------------------------------------------------------
    def add_step_record(self, record: StepRecord) -> None:
        with self._tx() as c:
            c.execute(*SQLITE.insert("step_records", step_record_row(record)))

    def step_records(self, tenant: str, task: str) -> list[StepRecord]:
        rows = (
            self._conn()
            .execute(
                "SELECT * FROM step_records WHERE tenant=? AND task=? ORDER BY created_at, rowid",
                (tenant, task),
            )
            .fetchall()
        )
        return [to_step_record(r) for r in rows]

    # -- counters -------------------------------------------------------------------------
    def bump(self, tenant: str, counter: str, n: int = 1) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO counters (tenant, name, value) VALUES (?,?,?) ON CONFLICT (tenant, name) "
                "DO UPDATE SET value = value + excluded.value",
                (tenant, counter, n),
            )

    def counters(self, tenant: str) -> dict[str, int]:
        rows = (
            self._conn()
            .execute("SELECT name, value FROM counters WHERE tenant=?", (tenant,))
            .fetchall()
        )
        return {r["name"]: r["value"] for r in rows}
