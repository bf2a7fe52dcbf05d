"""The routing index: each tenant's example embeddings in memory, so routing never reads history.

Routing compares a request with the examples a tenant has served (see :mod:`minicache.routing`).
Reading every example's embedding from the store on every request costs time and I/O that grow
with history without bound (about 150 MB per request at 100,000 examples). Instead:

* A tenant's index is loaded from the store once, on its first request in this process.
* Examples this process records are added to it at once (:meth:`RouteIndex.add`).
* Examples other replicas record are read at most every ``refresh_s`` seconds, and only the new
  ones: the store's ``examples_since(tenant, cursor)`` returns the rows after the last ``seq``
  this index has seen (an index range scan; seq order is commit order in both stores).
* Each group keeps at most ``per_group`` embeddings, chosen to cover the group's wording: a new
  vector almost identical to a kept one adds nothing to nearest-neighbour routing and is skipped;
  at the cap it replaces the kept vector that is most redundant (closest to another kept one),
  if it is itself less redundant. Search is then exact NumPy over at most
  ``groups x per_group`` rows, whatever the number of requests served.

What the index does not see: examples another replica *deletes* (an invalidated group). A request
routed to such a group records a new example under the group's old id and starts it afresh, which
is what a new group would do too. Invalidations in this process drop the group here at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .store.base import RoutingRow, Store

REDUNDANT = 0.995  # cosine above which a group's new vector is treated as a copy of a kept one


@dataclass
class _Group:
    rows: list[int] = field(default_factory=list)  # rows of the tenant matrix this group holds


class TenantIndex:
    """One tenant's capped example vectors: a growable float32 matrix and the group of each row."""

    def __init__(self, per_group: int) -> None:
        self.per_group = per_group
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.owner: list[str | None] = []  # group id of each row (None: a free row)
        self.size = 0  # rows in use or freed (free rows are zero vectors: similarity 0)
        self.free: list[int] = []
        self.groups: dict[str, _Group] = {}
        self.cursor = 0  # highest store seq read
        self.refreshed_at = 0.0
        self.offered = 0  # vectors offered (kept or not; this process's own ones twice), for stats

    @property
    def width(self) -> int:
        return self.matrix.shape[1]

    def _row(self) -> int:
        if self.free:
            return self.free.pop()
        if self.size == self.matrix.shape[0]:
            grown = np.zeros((max(64, 2 * self.matrix.shape[0]), self.width), dtype=np.float32)
            grown[: self.size] = self.matrix[: self.size]
            self.matrix = grown
            self.owner.extend([None] * (grown.shape[0] - len(self.owner)))
        self.size += 1
        return self.size - 1

    def add(self, group_id: str, vector: np.ndarray) -> bool:
        """Offer one example's vector; returns whether it is kept."""
        self.offered += 1
        if vector.ndim != 1 or not vector.size:
            return False
        if vector.shape[0] != self.width:
            # The first vector, or an embedder change: the newest width wins, as the store's full read did.
            self.matrix = np.zeros((64, vector.shape[0]), dtype=np.float32)
            self.owner, self.size, self.free, self.groups = [None] * 64, 0, [], {}
        group = self.groups.setdefault(group_id, _Group())
        if group.rows:
            kept = self.matrix[group.rows]
            sims = kept @ vector
            if float(sims.max()) >= REDUNDANT:
                return False
            if len(group.rows) >= self.per_group:
                gram = kept @ kept.T
                np.fill_diagonal(gram, -np.inf)
                redundancy = gram.max(axis=1)
                worst = int(np.argmax(redundancy))
                if float(sims.max()) >= float(redundancy[worst]):
                    return False  # it would cover the group less well than what it replaces
                self.matrix[group.rows[worst]] = vector
                return True
        row = self._row()
        self.matrix[row] = vector
        self.owner[row] = group_id
        group.rows.append(row)
        return True

    def drop(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        for row in group.rows if group else []:
            self.matrix[row] = 0.0
            self.owner[row] = None
            self.free.append(row)

    def nearest(self, vector: np.ndarray) -> tuple[str | None, float]:
        """The group of the most similar kept vector, and that similarity (cosine: unit vectors)."""
        if not self.size or vector.shape[0] != self.width:
            return None, 0.0
        sims = self.matrix[: self.size] @ vector
        best = int(np.argmax(sims))
        return self.owner[best], float(sims[best])

    @property
    def rows(self) -> int:
        return sum(len(g.rows) for g in self.groups.values())


class RouteIndex:
    """Per-tenant :class:`TenantIndex` objects kept in step with a (possibly shared) store.

    ``clock`` is injectable so tests can step through refresh intervals without sleeping."""

    def __init__(self, store: Store, *, refresh_s: float = 1.0, per_group: int = 32, batch: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if per_group < 1:
            raise ValueError("per_group must be at least 1")
        self.store = store
        self.refresh_s = refresh_s
        self.per_group = per_group
        self.batch = batch
        self.clock = clock
        self._tenants: dict[str, TenantIndex] = {}
        self._lock = threading.Lock()

    def _read(self, index: TenantIndex, tenant: str) -> None:
        """Everything the store has after the index's cursor (all of it, the first time)."""
        while True:
            rows: list[RoutingRow] = self.store.examples_since(tenant, index.cursor, self.batch)
            for row in rows:
                index.cursor = max(index.cursor, row.seq)
                index.add(row.group_id, np.frombuffer(row.embedding, dtype=np.float32))
            if len(rows) < self.batch:
                break
        index.refreshed_at = self.clock()

    def tenant(self, tenant: str) -> TenantIndex:
        """The tenant's index, loaded on first use and refreshed once ``refresh_s`` has passed."""
        with self._lock:
            index = self._tenants.get(tenant)
            if index is None:
                index = self._tenants[tenant] = TenantIndex(self.per_group)
                self._read(index, tenant)
            elif self.clock() - index.refreshed_at >= self.refresh_s:
                self._read(index, tenant)
            return index

    def nearest(self, tenant: str, vector: np.ndarray) -> tuple[str | None, float]:
        index = self.tenant(tenant)
        with self._lock:
            return index.nearest(vector)

    def add(self, tenant: str, group_id: str, vector: np.ndarray) -> None:
        """An example this process just stored: routable at once. Read back from the store at the
        next refresh, it is an exact copy of a kept vector and is skipped."""
        with self._lock:
            index = self._tenants.get(tenant)
            if index is None:
                return  # loaded from the store (this example included) on the tenant's first route
            index.add(group_id, np.asarray(vector, dtype=np.float32))

    def drop_group(self, tenant: str, group_id: str) -> None:
        with self._lock:
            index = self._tenants.get(tenant)
            if index is not None:
                index.drop(group_id)

    def stats(self, tenant: str) -> dict[str, int]:
        with self._lock:
            index = self._tenants.get(tenant)
            if index is None:
                return {"groups": 0, "rows": 0, "offered": 0, "cursor": 0}
            return {"groups": len(index.groups), "rows": index.rows, "offered": index.offered,
                    "cursor": index.cursor}
