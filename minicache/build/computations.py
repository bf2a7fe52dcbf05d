"""Each tenant's active entries read as computations, for merges and joins to look among, and
the pairing of two computations' parameters (:func:`parameter_map`).

A join looks after every recorded miss (:mod:`minicache.build.join`) and a merge after every build
(:mod:`minicache.build.merge`), both on the one build worker, in front of the builds queued behind
them. Reading the tenant's active entries (their programs and validation JSON) and parsing each
program at every look would cost O(entries) store reads and parses per miss on a large tenant. So
the list is read at most once per ``refresh_s`` (``EngineConfig.route_refresh_s``: other replicas'
new entries are seen as soon as their new examples are), and at once after a build or a merge of
this process (:meth:`ComputationIndex.stale`); each entry's program is parsed once per entry id.

The index only picks the groups to try: a merge or join reads both groups' entries again under
their build leases, so an entry evicted or revised since the last read is never merged into.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from minicache.programs.computation import Computation, ParameterNaming, computation_of
from minicache.store.base import Entry, Store


def role_map(merged: Entry, survivor: Entry) -> dict[str, str] | None:
    """The merged entry's parameter names mapped to the survivor's, where the two programs are one
    computation and each parameter keeps its type; else None."""
    return parameter_map(
        computation_of(merged.program, ParameterNaming.BY_USE),
        types_of(merged),
        computation_of(survivor.program, ParameterNaming.BY_USE),
        types_of(survivor),
    )


def types_of(entry: Entry) -> dict[str, str]:
    """``entry``'s parameters and their types."""
    return {v.name: v.type for v in entry.template}


def parameter_map(
    theirs: Computation | None,
    their_types: dict[str, str],
    ours: Computation | None,
    our_types: dict[str, str],
) -> dict[str, str] | None:
    """Their parameter names mapped to ours (each program's parameters with their types), where
    the two are one computation and each parameter keeps its type; else None."""
    if ours is None or theirs is None or ours.shape != theirs.shape:
        return None
    names = dict(zip(theirs.roles, ours.roles, strict=True))
    if set(their_types) != set(names) or set(our_types) != set(names.values()):
        return None
    if any(our_types[names[name]] != kind for name, kind in their_types.items()):
        return None
    return names


class ComputationIndex:
    """Each tenant's active entries by their computation's shape, read once per entry version."""

    def __init__(
        self, store: Store, refresh_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store, self.refresh_s, self.clock = store, refresh_s, clock
        self._known: dict[str, dict[str, tuple[Entry, Computation | None]]] = {}
        self._read_at: dict[str, float] = {}  # tenant -> when its list was read (index clock)
        self._changes: dict[str, int] = {}  # tenant -> how often it was made stale
        self._lock = threading.Lock()

    def stale(self, tenant: str) -> None:
        """This process changed ``tenant``'s active entries (a build, a merge): the next look reads
        the list again."""
        with self._lock:
            self._read_at.pop(tenant, None)
            self._changes[tenant] = self._changes.get(tenant, 0) + 1

    def entries(self, tenant: str) -> list[tuple[Entry, Computation | None]]:
        """The tenant's active entries as of the last read (at most ``refresh_s`` ago), each with
        its computation (None: its program is none)."""
        now = self.clock()
        with self._lock:
            at = self._read_at.get(tenant)
            if at is not None and now - at < self.refresh_s:
                return list(self._known.get(tenant, {}).values())
            changes = self._changes.get(tenant, 0)
        active = self.store.list_entries(tenant, "active")  # the store read outside the lock
        with self._lock:
            known = self._known.get(tenant, {})
            fresh = {e.id: known.get(e.id) or (e, self._parse(e)) for e in active}
            self._known[tenant] = fresh
            if self._changes.get(tenant, 0) == changes:  # not made stale while it read
                self._read_at[tenant] = now
        return list(fresh.values())

    def entries_of(self, tenant: str, shape: str) -> list[tuple[Entry, Computation]]:
        """The tenant's active entries whose program is computation ``shape``."""
        return [(e, c) for e, c in self.entries(tenant) if c is not None and c.shape == shape]

    def computation(self, entry: Entry) -> Computation | None:
        """``entry``'s computation: as kept, where the index holds this version, else parsed."""
        with self._lock:
            kept = self._known.get(entry.tenant, {}).get(entry.id)
        return kept[1] if kept is not None else self._parse(entry)

    @staticmethod
    def _parse(entry: Entry) -> Computation | None:
        return computation_of(entry.program, ParameterNaming.BY_USE)
