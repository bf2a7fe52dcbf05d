"""The store's queries that both backends run alike: which tenants have data, and the dashboard's
requests over time (table ``counter_history``), written through the backend's own transactions.

A history row is one counter of one tenant in one time bucket (``unit`` "minute" or "hour",
``bucket_start`` in epoch seconds). Two kinds of value share the table, and the writer says which:

* a **level**: the cumulative store counter as read during that bucket. Several replicas read the
  same counters, so levels merge by taking the larger; a bucket's increment is its level less the
  level of the bucket before it (see ``minicache.server.dashboard.tracker``). Every replica writing
  them counts each request once.
* an **addition**: an amount only this process knows (the server's tokens-saved estimate), summed
  over the processes that add to the bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from minicache.store.schema import Dialect


class _Backend(Protocol):
    dialect: Dialect

    def _tx(self) -> AbstractContextManager[Any]: ...
    def _fetch(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]: ...


class HistoryQueries:
    """Mixed into :class:`~minicache.store.SQLiteStore` and :class:`~minicache.store.PostgresStore`,
    which supply ``dialect``, ``_tx`` (a transaction's connection) and ``_fetch`` (a read's rows)."""

    def tenants(self: _Backend) -> list[str]:
        """Every tenant that has counters, groups or entries, sorted."""
        return [
            r["tenant"]
            for r in self._fetch(
                "SELECT tenant FROM counters UNION SELECT tenant FROM groups "
                "UNION SELECT tenant FROM entries ORDER BY tenant"
            )
        ]

    def record_history(
        self: _Backend,
        tenant: str,
        unit: str,
        bucket_start: int,
        levels: Mapping[str, float],
        added: Mapping[str, float],
    ) -> None:
        """Merge ``levels`` (the larger value stays) and ``added`` (summed) into one bucket, in one
        transaction."""
        d = self.dialect
        insert = (
            "INSERT INTO counter_history (tenant, unit, bucket_start, name, amount) "
            f"VALUES ({d.params(5)}) ON CONFLICT (tenant, unit, bucket_start, name) DO UPDATE SET "
        )
        keep_larger = insert + f"amount = {d.greatest}(counter_history.amount, excluded.amount)"
        add = insert + "amount = counter_history.amount + excluded.amount"
        with self._tx() as c:
            for name, amount in levels.items():
                c.execute(keep_larger, (tenant, unit, int(bucket_start), name, float(amount)))
            for name, amount in added.items():
                c.execute(add, (tenant, unit, int(bucket_start), name, float(amount)))

    def history(self: _Backend, tenant: str, unit: str, since: int) -> dict[int, dict[str, float]]:
        """The buckets of ``unit`` starting at ``since`` or later, oldest first: bucket start ->
        counter -> the value recorded (a level or a sum of additions, as it was written)."""
        p = self.dialect.param
        rows = self._fetch(
            "SELECT bucket_start, name, amount FROM counter_history "
            f"WHERE tenant={p} AND unit={p} AND bucket_start>={p} ORDER BY bucket_start",
            (tenant, unit, int(since)),
        )
        out: dict[int, dict[str, float]] = {}
        for r in rows:
            out.setdefault(int(r["bucket_start"]), {})[r["name"]] = float(r["amount"])
        return out

    def prune_history(self: _Backend, unit: str, before: int) -> int:
        """Delete every tenant's buckets of ``unit`` that start before ``before``; how many rows."""
        p = self.dialect.param
        with self._tx() as c:
            cursor = c.execute(
                f"DELETE FROM counter_history WHERE unit={p} AND bucket_start<{p}",
                (unit, int(before)),
            )
            return int(cursor.rowcount)
