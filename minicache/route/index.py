"""The routing index: each tenant's example embeddings in memory, so routing never reads history.

Routing compares a request with the examples a tenant has served (see :mod:`minicache.route.router`).
Reading every example's embedding from the store on every request costs time and I/O that grow
with history without bound (about 150 MB per request at 100,000 examples). Instead:

* A tenant's index is loaded from the store once per process: by :meth:`RouteIndex.warm` before
  the process takes requests (the server does this at start-up and reports "warming" until done),
  or else on the tenant's first request. Requests for a tenant whose load is under way wait for it;
  requests for other tenants do not. A load reads the tenant's examples once, in batches, and
  keeps each group's representative set in O(examples x per_group) work.
* Examples this process records are added to it at once (:meth:`RouteIndex.add`).
* Examples other replicas record are read at most every ``refresh_s`` seconds, and only the new
  ones: the store's ``examples_since(tenant, cursor)`` returns the rows after the last ``seq``
  this index has seen (an index range scan; seq order is commit order in both stores).
* Each group keeps at most ``per_group`` embeddings, chosen to cover the group's wording: a new
  vector almost identical to a kept one adds nothing to nearest-neighbour routing and is skipped;
  at the cap it replaces the kept vector that is most redundant (closest to another kept one),
  if it is itself less redundant. Search is then exact NumPy over at most
  ``groups x per_group`` rows, whatever the number of requests served.
* Past ``exact_rows`` kept rows (a tenant whose computations keep growing), search reads only the
  rows of the groups in a few coarse buckets (:mod:`minicache.route.partition`), sub-linear in the
  number of groups; below it, search stays exact.

What the index does not see: examples another replica *deletes* (a merged or deleted group). The
router asks the store whether a group it would join still exists, and drops it here if not
(:class:`minicache.route.router.Router`); deletions in this process drop the group here at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from minicache.route.blas import one_blas_thread
from minicache.route.partition import PROBES, GroupPartition
from minicache.store.base import RoutingRow, Store

log = logging.getLogger(__name__)

EXACT_ROWS = 20_000  # kept rows up to which search is exact (about 2 ms a request on this machine)
REDUNDANT = 0.995  # cosine above which a group's new vector is treated as a copy of a kept one


@dataclass
class _Group:
    rows: list[int] = field(default_factory=list)  # rows of the tenant matrix this group holds
    # similarities between its kept vectors (diagonal -inf), kept up to date so a replacement at
    # the cap costs O(per_group x width), not a fresh Gram matrix
    gram: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))


class TenantIndex:
    """One tenant's capped example vectors: a growable float32 matrix and the group of each row."""

    def __init__(self, per_group: int, exact_rows: int = EXACT_ROWS, probes: int = PROBES) -> None:
        self.per_group = per_group
        self.exact_rows, self.probes = exact_rows, probes
        self.partition: GroupPartition | None = None  # made once the kept rows pass exact_rows
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
            self._reset(vector.shape[0])
        group = self.groups.setdefault(group_id, _Group())
        if not group.rows:
            self._placed(group_id, vector)
        sims = self.matrix[group.rows] @ vector if group.rows else np.zeros(0, dtype=np.float32)
        if sims.size and float(sims.max()) >= REDUNDANT:
            return False
        if len(group.rows) >= self.per_group:
            redundancy = group.gram.max(axis=1)
            worst = int(np.argmax(redundancy))
            if float(sims.max()) >= float(redundancy[worst]):
                return False  # it would cover the group less well than what it replaces
            self.matrix[group.rows[worst]] = vector
            sims[worst] = -np.inf
            group.gram[worst, :] = sims
            group.gram[:, worst] = sims
            return True
        row = self._row()
        self.matrix[row] = vector
        self.owner[row] = group_id
        group.rows.append(row)
        k = len(group.rows)
        gram = np.full((k, k), -np.inf, dtype=np.float32)
        gram[: k - 1, : k - 1] = group.gram
        gram[k - 1, : k - 1] = gram[: k - 1, k - 1] = sims
        group.gram = gram
        return True

    def _reset(self, width: int) -> None:
        """The first vector, or an embedder change: the newest width wins, as the store's full read did."""
        self.matrix = np.zeros((64, width), dtype=np.float32)
        self.owner, self.size, self.free, self.groups = [None] * 64, 0, [], {}
        self.partition = None

    def _placed(self, group_id: str, mean: np.ndarray) -> None:
        """A new group joins the coarse buckets, if there are any (else they are made when needed)."""
        if self.partition is not None:
            self.partition.place(group_id, mean)

    def extend(self, group_id: str, vectors: np.ndarray) -> None:
        """Offer many vectors of one group at once (a load or refresh): the group keeps a farthest-point
        selection of its kept and new vectors (each next pick the one least like those picked), which
        covers its wording as :meth:`add` does one at a time. Each pick costs one product of the pool
        with the picked vector, O(pool x per_group) in all: a pool's full similarity matrix would be
        quadratic in the group's history (10 GB for one group of 50,000 examples in a batch)."""
        self.offered += len(vectors)
        if vectors.shape[1] != self.width:
            self._reset(vectors.shape[1])
        group = self.groups.setdefault(group_id, _Group())
        if not group.rows:
            self._placed(group_id, vectors.mean(axis=0))
        pool = np.concatenate([self.matrix[group.rows], vectors]) if group.rows else vectors
        chosen = [0]
        best = pool @ pool[0]
        while len(chosen) < self.per_group:
            i = int(np.argmin(best))
            if best[i] >= REDUNDANT:
                break
            chosen.append(i)
            np.maximum(best, pool @ pool[i], out=best)
        picked = pool[chosen]
        while len(group.rows) > len(picked):
            row = group.rows.pop()
            self.matrix[row], self.owner[row] = 0.0, None
            self.free.append(row)
        while len(group.rows) < len(picked):
            row = self._row()
            self.owner[row] = group_id
            group.rows.append(row)
        self.matrix[group.rows] = picked
        group.gram = picked @ picked.T
        np.fill_diagonal(group.gram, -np.inf)

    def drop(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if self.partition is not None:
            self.partition.remove(group_id)
        for row in group.rows if group else []:
            self.matrix[row] = 0.0
            self.owner[row] = None
            self.free.append(row)

    def nearest(self, vector: np.ndarray) -> tuple[str | None, float]:
        """The group of the most similar kept vector, and that similarity (cosine: unit vectors)."""
        if not self.size or vector.shape[0] != self.width:
            return None, 0.0
        if self.size - len(self.free) <= self.exact_rows:
            return self.exact_nearest(vector)
        rows = [
            r for g in self._buckets().candidates(vector, self.probes) for r in self.groups[g].rows
        ]
        if not rows:
            return None, 0.0
        index = np.array(rows, dtype=np.intp)
        sims = self.matrix[index] @ vector
        best = int(np.argmax(sims))
        return self.owner[int(index[best])], float(sims[best])

    def exact_nearest(self, vector: np.ndarray) -> tuple[str | None, float]:
        """:meth:`nearest` by every kept row, whatever their number (what the buckets approximate)."""
        sims = self.matrix[: self.size] @ vector
        best = int(np.argmax(sims))
        return self.owner[best], float(sims[best])

    def nearest_groups(self, vector: np.ndarray, k: int) -> list[str]:
        """The ``k`` groups of the most similar kept vectors, nearest first (read as :meth:`nearest`)."""
        if not self.size or vector.shape[0] != self.width:
            return []
        if self.size - len(self.free) <= self.exact_rows:
            rows = np.arange(self.size, dtype=np.intp)
        else:
            groups = self._buckets().candidates(vector, self.probes)
            rows = np.array([r for g in groups for r in self.groups[g].rows], dtype=np.intp)
        order = rows[np.argsort(-(self.matrix[rows] @ vector), kind="stable")]
        owners = (self.owner[int(row)] for row in order)
        return list(dict.fromkeys(g for g in owners if g is not None))[:k]

    def _buckets(self) -> GroupPartition:
        """The coarse buckets, made (again) when there are none or the groups have doubled since."""
        if self.partition is None or len(self.groups) >= 2 * self.partition.built_for:
            ids = [g for g, group in self.groups.items() if group.rows]
            means = np.stack([self.matrix[self.groups[g].rows].mean(axis=0) for g in ids])
            self.partition = GroupPartition.build(ids, means)
        return self.partition

    @property
    def rows(self) -> int:
        return sum(len(g.rows) for g in self.groups.values())


@dataclass
class _Load:
    """A tenant's index being read from the store: requests for the tenant wait for it (never routing
    with part of it, which would split a group), and changes made meanwhile are replayed onto it."""

    done: threading.Event = field(default_factory=threading.Event)
    replay: list[Callable[[TenantIndex], object]] = field(default_factory=list)


class RouteIndex:
    """Per-tenant :class:`TenantIndex` objects kept in step with a (possibly shared) store.

    A tenant's index is loaded by :meth:`warm` (a server does it at start-up, before it reports
    ready) or else on the tenant's first request. A load reads the tenant's history once, without
    holding the lock other tenants route under. ``clock`` is injectable so tests can step through
    refresh intervals without sleeping."""

    def __init__(
        self,
        store: Store,
        *,
        refresh_s: float = 1.0,
        per_group: int = 32,
        batch: int = 50_000,
        exact_rows: int = EXACT_ROWS,
        clock: Callable[[], float] = time.monotonic,
        width: int | None = None,
        reembed: Callable[[str, str], np.ndarray] | None = None,
    ) -> None:
        if per_group < 1:
            raise ValueError("per_group must be at least 1")
        self.store = store
        # The routing embedder's width, and how to embed a group's stored examples again: rows another
        # embedder wrote (a store from before a change of route_embedder) are embedded anew in memory
        # rather than left out, so that the groups they stand for stay routable. Without them, the
        # newest width wins and rows of another width are left out.
        self.width, self.reembed = width, reembed
        self.exact_rows = exact_rows
        self.refresh_s = refresh_s
        self.per_group = per_group
        self.batch = batch
        self.clock = clock
        self._tenants: dict[str, TenantIndex] = {}
        self._loading: dict[str, _Load] = {}
        self._lock = threading.Lock()

    def _read(self, index: TenantIndex, tenant: str) -> None:
        """Everything the store has after the index's cursor (all of it, the first time)."""
        stale: set[str] = set()  # groups with rows of another embedder's width
        while True:
            rows: list[RoutingRow] = self.store.examples_since(tenant, index.cursor, self.batch)
            by_group: dict[str, list[bytes]] = {}
            width = (
                self.width * 4 if self.width else len(rows[-1].embedding) if rows else 0
            )  # float32 bytes
            for row in rows:
                index.cursor = max(index.cursor, row.seq)
                if len(row.embedding) == width:
                    by_group.setdefault(row.group_id, []).append(row.embedding)
                else:
                    stale.add(row.group_id)
            for group_id, blobs in by_group.items():
                index.extend(
                    group_id,
                    np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1),
                )
            if len(rows) < self.batch:
                break
        if stale and self.width and self.reembed is not None:
            log.warning(
                "routing: embedding the examples of %d groups of tenant %r again: another routing "
                "embedder stored them",
                len(stale),
                tenant,
            )
            for group_id in sorted(stale):
                vectors = self.reembed(tenant, group_id)
                if len(vectors):
                    index.extend(group_id, vectors)
        index.refreshed_at = self.clock()

    def tenant(self, tenant: str) -> TenantIndex:
        """The tenant's index, refreshed once ``refresh_s`` has passed; loaded first if no one has
        (or, while another thread loads it, once that load is complete)."""
        while True:
            with self._lock:
                index = self._tenants.get(tenant)
                if index is not None:
                    if self.clock() - index.refreshed_at >= self.refresh_s:
                        self._read(index, tenant)
                    return index
                load = self._loading.get(tenant)
                if load is None:
                    load = self._loading[tenant] = _Load()
                    break
            load.done.wait()  # then the index is there, or that load failed and this thread tries
        return self._load(tenant, load)

    def _load(self, tenant: str, load: _Load) -> TenantIndex:
        index = TenantIndex(self.per_group, self.exact_rows)
        try:
            self._read(index, tenant)  # outside the lock: other tenants are routed meanwhile
        except BaseException:
            with self._lock:
                del self._loading[tenant]
            load.done.set()
            raise
        with self._lock:
            for change in load.replay:
                change(index)
            self._tenants[tenant] = index
            del self._loading[tenant]
        load.done.set()
        return index

    def warm(self, tenants: Iterable[str]) -> dict[str, float]:
        """Load each tenant's index now, unless it is loaded; returns the seconds each load took."""
        took = {}
        for name in tenants:
            began = time.perf_counter()
            self.tenant(name)
            took[name] = time.perf_counter() - began
        return took

    def loaded(self, tenant: str) -> bool:
        with self._lock:
            return tenant in self._tenants

    def nearest(self, tenant: str, vector: np.ndarray) -> tuple[str | None, float]:
        index = self.tenant(tenant)
        with (
            self._lock,
            one_blas_thread(),
        ):  # a product over many rows would leave OpenBLAS spinning
            return index.nearest(vector)

    def nearest_groups(self, tenant: str, vector: np.ndarray, k: int) -> list[str]:
        index = self.tenant(tenant)
        with self._lock, one_blas_thread():
            return index.nearest_groups(vector, k)

    def _change(self, tenant: str, change: Callable[[TenantIndex], object]) -> None:
        """Apply ``change`` to the tenant's index; to the one being loaded once it is (the load may
        have read the store before the change); nothing if neither, as the load will see it."""
        with self._lock:
            index = self._tenants.get(tenant)
            if index is not None:
                change(index)
            elif tenant in self._loading:
                self._loading[tenant].replay.append(change)

    def add(self, tenant: str, group_id: str, vector: np.ndarray) -> None:
        """An example this process just stored: routable at once. Read back from the store at the
        next refresh, it is an exact copy of a kept vector and is skipped."""
        vector = np.asarray(vector, dtype=np.float32)
        self._change(tenant, lambda index: index.add(group_id, vector))

    def drop_group(self, tenant: str, group_id: str) -> None:
        self._change(tenant, lambda index: index.drop(group_id))

    def stats(self, tenant: str) -> dict[str, int]:
        with self._lock:
            index = self._tenants.get(tenant)
            if index is None:
                return {"groups": 0, "rows": 0, "offered": 0, "cursor": 0}
            return {
                "groups": len(index.groups),
                "rows": index.rows,
                "offered": index.offered,
                "cursor": index.cursor,
            }
