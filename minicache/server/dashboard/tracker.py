"""Requests over time and the live event feed, sampled from the store's counters and ``engine.events``.

The store keeps cumulative counters per tenant, and the engine's events carry no time and, but for
builds and merges, no tenant. A sampler that reads them every few seconds turns both into what the
dashboard shows:

* **Requests over time** live in the store (``Store.record_history``), so the charts survive a
  restart: each sample writes its reading of the counters into the current minute and hour (when
  they changed, and once per bucket), where the store keeps each counter's lowest and highest
  reading; a bucket's increment is its highest less the highest of the bucket before it (or its
  own lowest, for the first). Replicas on one store read the same counters, so their readings
  merge and each request counts once. The tokens-saved estimate is the server's own, so its
  increments are added up.
* **Events**: each new engine event is stamped with the time it was first seen and a tenant: the
  one the event names (builds and merges), else the one whose store holds its entry or group;
  increments of the fallback and error counters become events too, so failures appear in the feed
  as they happen. The feed lives in the server process: it starts empty when the server does.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

COUNTED = ("requests", "hits", "misses", "fallbacks", "errors", "target_tokens", "tokens_saved")
LEVELS = COUNTED[:-1]  # the store's counters: every replica reads the same levels
ADDED = ("tokens_saved",)  # this process's own estimate: its increments are added up
UNITS = {"minute": 60, "hour": 3600}


@dataclass
class Event:
    seq: int
    at: float
    kind: str  # build | build-failed | evict | merge | fallback | error
    tenant: str | None
    group: str | None = None
    entry: str | None = None
    detail: str = ""


class StoredTenants:
    """The store's tenants (``Store.tenants``, a union over three tables), read at most once per
    ``max_age_s``: the sampler asks every few seconds on every replica, and a tenant new to the
    store only has to be listed within a minute. A read that fails is not kept: the next call reads
    again."""

    def __init__(
        self,
        read: Callable[[], Iterable[str]],
        max_age_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read, self.max_age_s, self.clock = read, max_age_s, clock
        self._tenants: list[str] = []
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def __call__(self) -> list[str]:
        now = self.clock()
        with self._lock:
            if self._read_at is not None and now - self._read_at < self.max_age_s:
                return list(self._tenants)
        tenants = list(self.read())  # the store read outside the lock
        with self._lock:
            self._tenants, self._read_at = tenants, now
        return list(tenants)


def increments(rows: dict[int, dict[str, tuple[float, float]]]) -> dict[int, dict[str, float]]:
    """Each stored bucket's increments (see :mod:`minicache.store.history`): a level's highest
    reading less the highest of the latest bucket before it that has one, or less its own lowest
    where none does; an addition as it is."""
    previous: dict[str, float] = {}
    out: dict[int, dict[str, float]] = {}
    for start in sorted(rows):
        bucket = out[start] = {}
        for name, (low, high) in rows[start].items():
            if name in ADDED:
                bucket[name] = high
                continue
            bucket[name] = max(0.0, high - previous.get(name, low))
            previous[name] = max(high, previous.get(name, high))
    return out


class Tracker:
    """Samples ``counters(tenant)`` (the store's), ``saved(tenant)`` (the server's token estimate) and
    ``engine.events``; :meth:`start` runs :meth:`sample` every ``interval_s`` on a daemon thread."""

    def __init__(
        self,
        engine: Any,
        tenants: Callable[[], Iterable[str]],
        saved: Callable[[str], float],
        *,
        interval_s: float = 5.0,
        minutes: int = 180,
        hours: int = 72,
        max_events: int = 1000,
    ) -> None:
        self.engine = engine
        self.tenants = tenants
        self.saved = saved
        self.interval_s = interval_s
        self._keep = {"minute": minutes, "hour": hours}
        self._written: dict[tuple[str, str], int] = {}  # (tenant, unit) -> bucket last written
        self.sampled_tenants: list[str] = []  # the tenants the last sample read
        self._pruned: int | None = None  # the minute whose sample pruned the history
        self._last: dict[str, dict[str, float]] = {}
        self._seen_events = 0
        self._reported_errors: dict[str | None, int] = {}  # errors already shown with a message
        self._seq = itertools.count(1)
        self.events: deque[Event] = deque(maxlen=max_events)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- sampling -------------------------------------------------------------------------------
    def _read(self, tenant: str) -> dict[str, float]:
        counters = self.engine.store.counters(tenant)
        values = {name: float(counters.get(name, 0)) for name in LEVELS}
        values["tokens_saved"] = float(self.saved(tenant))
        return values

    def sample(self, now: float | None = None) -> None:
        """Record what changed since the last sample in the store's history, and turn new failures
        and engine events into events; the first sample of a tenant is its baseline."""
        now = time.time() if now is None else now
        tenants = sorted(set(self.tenants()))
        self.sampled_tenants = tenants
        readings = {t: self._read(t) for t in tenants}  # store reads outside the lock
        writes: list[tuple[str, str, int, dict[str, float], dict[str, float]]] = []
        with self._lock:
            for tenant, values in readings.items():
                # An error answer counts in the store before it is recorded here, so the sample
                # after record_error holds it; older records cancel nothing (they never counted).
                told = self._reported_errors.pop(tenant, 0)
                last = self._last.get(tenant)
                self._last[tenant] = values
                deltas = {
                    k: v - last.get(k, 0.0)
                    for k, v in values.items()
                    if last is not None and v > last.get(k, 0.0)
                }
                writes += self._history_writes(tenant, now, values, deltas, first=last is None)
                for kind in ("fallbacks", "errors"):
                    n = int(deltas.get(kind, 0))
                    if kind == "errors":  # those shown with their message already: not twice
                        n -= min(n, told)
                    if n:
                        noun = kind if n > 1 else kind.removesuffix("s")
                        self._push(now, kind.removesuffix("s"), tenant, detail=f"{n} new {noun}")
            fresh = self.engine.events[self._seen_events :]
            self._seen_events += len(fresh)
            prune = self._pruned != _bucket(now, "minute")
            self._pruned = _bucket(now, "minute")
        store = self.engine.store
        for write in writes:  # store writes outside the lock too
            store.record_history(*write)
        if prune:  # once a minute: the buckets past what is kept
            for unit, width in UNITS.items():
                # the shown ones and the one before them, whose highest the oldest shown follows
                store.prune_history(unit, _bucket(now, unit) - width * self._keep[unit])
        for raw in fresh:  # tenant look-ups read the store: outside the lock
            owner = self._owner(raw, tenants)
            with self._lock:
                self._push(now, *_describe(raw, owner))

    def _history_writes(
        self,
        tenant: str,
        now: float,
        values: dict[str, float],
        deltas: dict[str, float],
        first: bool,
    ) -> list[tuple[str, str, int, dict[str, float], dict[str, float]]]:
        """The ``record_history`` calls a sample makes for one tenant: its levels when they changed
        (or on its first sample, or the first of a bucket, so that every bucket has a level to
        follow), and this process's tokens-saved increment. Caller holds the lock."""
        changed = first or any(name in deltas for name in LEVELS)
        added = {name: deltas[name] for name in ADDED if name in deltas}
        out = []
        for unit in UNITS:
            start = _bucket(now, unit)
            new_bucket = self._written.get((tenant, unit)) != start
            if changed or new_bucket or added:
                levels = {name: values[name] for name in LEVELS} if changed or new_bucket else {}
                out.append((tenant, unit, start, levels, added))
                self._written[(tenant, unit)] = start
        return out

    def record_error(self, tenant: str | None, message: str, request_id: str | None) -> None:
        """An error answer as it happened, with its message, shown in the feed at once; the
        counter's increment it also causes is not shown again as "1 new error". ``tenant`` None:
        the caller's tenant is unknown, and only admins see it."""
        detail = message if request_id is None else f"{message} (request {request_id})"
        with self._lock:
            self._push(time.time(), "error", tenant, detail=detail)
            if tenant is not None:
                self._reported_errors[tenant] = self._reported_errors.get(tenant, 0) + 1

    def _push(
        self,
        now: float,
        kind: str,
        tenant: str | None,
        group: str | None = None,
        entry: str | None = None,
        detail: str = "",
    ) -> None:
        self.events.append(Event(next(self._seq), now, kind, tenant, group, entry, detail))

    def _owner(self, raw: dict[str, Any], tenants: list[str]) -> str | None:
        """The tenant the event names (builds and merges do), else the one whose store holds the
        event's entry (unique ids) or else its group."""
        if raw.get("tenant") in tenants:
            return str(raw["tenant"])
        store = self.engine.store
        if raw.get("entry"):
            for tenant in tenants:
                if store.get_entry(tenant, raw["entry"]) is not None:
                    return tenant
        if raw.get("group"):
            for tenant in tenants:
                if store.get_group(tenant, raw["group"]) is not None:
                    return tenant
        return None

    # -- reading --------------------------------------------------------------------------------
    def series(
        self, tenants: Iterable[str], unit: str, n: int, now: float | None = None
    ) -> list[tuple[int, dict[str, float]]]:
        """The last ``n`` buckets of ``unit`` (oldest first, empty ones as zeros), summed over
        ``tenants``, from the store's history (what earlier runs of the server recorded too)."""
        width = UNITS[unit]
        now = time.time() if now is None else now
        last = _bucket(now, unit)
        starts = [last - width * i for i in range(n - 1, -1, -1)]
        out = {s: dict.fromkeys(COUNTED, 0.0) for s in starts}
        since = last - width * max(n, self._keep[unit])  # the bucket before the first one shown
        for tenant in tenants:
            for start, amounts in increments(
                self.engine.store.history(tenant, unit, since)
            ).items():
                if start in out:
                    for name, amount in amounts.items():
                        if name in out[start]:
                            out[start][name] += amount
        return list(out.items())

    def feed(self, allowed: set[str] | None, after: int = 0, limit: int = 200) -> list[Event]:
        """Events newer than ``after``, newest first; ``allowed`` None means every tenant (an admin),
        otherwise events of tenants outside it, or whose tenant is unknown, are left out."""
        with self._lock:
            found = [
                e for e in self.events if e.seq > after and (allowed is None or e.tenant in allowed)
            ]
        return found[::-1][:limit]

    # -- the sampling thread --------------------------------------------------------------------
    def start(self) -> None:
        """Start sampling in the background (idempotent); the first sample is taken at once."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._run, name="minicache-dashboard-sampler", daemon=True
            )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a store hiccup must not end the history; try again later
                pass
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop sampling, after one last sample, so that what came since the previous one is kept."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.sample()
        except Exception:  # noqa: BLE001 - a store that is down at shutdown loses the last seconds only
            pass


def _bucket(now: float, unit: str) -> int:
    """The start of the ``unit`` bucket holding ``now``, in epoch seconds."""
    return int(now // UNITS[unit]) * UNITS[unit]


def _describe(
    raw: dict[str, Any], tenant: str | None
) -> tuple[str, str | None, str | None, str | None, str]:
    """(kind, tenant, group, entry, detail) of an engine event."""
    group, entry = raw.get("group"), raw.get("entry")
    if raw.get("event") == "build":
        if raw.get("ok"):
            rules = raw.get("rules", 0)
            plural = "" if rules == 1 else "s"
            return (
                "build",
                tenant,
                group,
                entry,
                f"built from {raw.get('source')}, {rules} rule{plural}",
            )
        detail = f"build failed after {raw.get('attempts', 0)} attempts"
        if raw.get("error"):
            detail += f": {raw['error']}"
        return "build-failed", tenant, group, entry, detail
    if raw.get("event") == "evict":
        return "evict", tenant, group, entry, f"evicted after {raw.get('failures')} failures"
    if raw.get("event") == "merge":  # one computation: the merged group's examples joined this one
        detail = f"merged group {raw.get('merged')} ({raw.get('examples', 0)} examples)"
        return "merge", tenant, group, entry, detail
    return str(raw.get("event", "event")), tenant, group, entry, ""
