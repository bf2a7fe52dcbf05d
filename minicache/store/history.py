"""The store's queries that both backends run alike: which tenants have data, and the dashboard's
requests over time (table ``counter_history``), written through the backend's own transactions.

A history row is one counter of one tenant in one time bucket (``unit`` "minute" or "hour",
``bucket_start`` in epoch seconds), with a ``low`` and a ``high`` value. Two kinds of counter share
the table, and the writer says which:

* a **level**: a cumulative store counter as read during that bucket; ``low`` keeps the lowest
  reading and ``high`` the highest. Several replicas read the same counters, so their readings
  merge without counting anything twice; a bucket's increment is its ``high`` less the ``high`` of
  the bucket before it, or its own ``low`` where there is none before it (see
  ``minicache.server.dashboard.tracker``).
* an **addition**: an amount only this process knows (the server's tokens-saved estimate), summed
  into ``high`` over the processes that add to the bucket (``low`` stays 0).
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
        """Merge the readings ``levels`` (into their bucket's lowest and highest) and ``added``
        (summed) into one bucket, in one transaction."""
        d = self.dialect
        insert = (
            "INSERT INTO counter_history (tenant, unit, bucket_start, name, low, high) "
            f"VALUES ({d.params(6)}) ON CONFLICT (tenant, unit, bucket_start, name) DO UPDATE SET "
        )
        reading = insert + (
            f"low = {d.least}(counter_history.low, excluded.low), "
            f"high = {d.greatest}(counter_history.high, excluded.high)"
        )
        addition = insert + "high = counter_history.high + excluded.high"
        key = (tenant, unit, int(bucket_start))
        with self._tx() as c:
            for name, value in levels.items():
                c.execute(reading, (*key, name, float(value), float(value)))
            for name, amount in added.items():
                c.execute(addition, (*key, name, 0.0, float(amount)))

    def history(
        self: _Backend, tenant: str, unit: str, since: int
    ) -> dict[int, dict[str, tuple[float, float]]]:
        """The buckets of ``unit`` starting at ``since`` or later, oldest first: bucket start ->
        counter -> (low, high) as written (a level's readings, or 0 and an addition's sum)."""
        p = self.dialect.param
        rows = self._fetch(
            "SELECT bucket_start, name, low, high FROM counter_history "
            f"WHERE tenant={p} AND unit={p} AND bucket_start>={p} ORDER BY bucket_start",
            (tenant, unit, int(since)),
        )
        out: dict[int, dict[str, tuple[float, float]]] = {}
        for r in rows:
            out.setdefault(int(r["bucket_start"]), {})[r["name"]] = (
                float(r["low"]),
                float(r["high"]),
            )
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
