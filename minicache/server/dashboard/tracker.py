"""Requests over time and the live event feed, sampled from the store's counters and ``engine.events``.

The store keeps cumulative counters per tenant, not a history, and the engine's events carry neither a
time nor a tenant. A sampler that reads them every few seconds turns both into what the dashboard
shows: the counters' increments, added to the minute and the hour they were seen in, and each new
engine event stamped with the time it was first seen and the tenant whose store holds its entry or
group. Increments of the fallback and error counters become events too, so failures appear in the
feed as they happen. Everything here lives in the server process: history starts when it starts.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

COUNTED = ("requests", "hits", "misses", "fallbacks", "errors", "target_tokens", "tokens_saved")
UNITS = {"minute": 60, "hour": 3600}


@dataclass
class Event:
    seq: int
    at: float
    kind: str  # build | build-failed | evict | fallback | error
    tenant: str | None
    group: str | None = None
    entry: str | None = None
    detail: str = ""


@dataclass
class _Series:
    """Counter increments per time bucket (bucket start -> field -> amount), newest buckets kept."""

    width_s: int
    keep: int
    buckets: dict[int, dict[str, float]] = field(default_factory=dict)

    def add(self, now: float, deltas: dict[str, float]) -> None:
        start = int(now // self.width_s) * self.width_s
        bucket = self.buckets.setdefault(start, dict.fromkeys(COUNTED, 0.0))
        for name, amount in deltas.items():
            bucket[name] += amount
        if len(self.buckets) > self.keep:
            for old in sorted(self.buckets)[: len(self.buckets) - self.keep]:
                del self.buckets[old]


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
        self._series: dict[tuple[str, str], _Series] = {}
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
        values = {name: float(counters.get(name, 0)) for name in COUNTED if name != "tokens_saved"}
        values["tokens_saved"] = float(self.saved(tenant))
        return values

    def sample(self, now: float | None = None) -> None:
        """Add what changed since the last sample; the first sample of a tenant is its baseline."""
        now = time.time() if now is None else now
        tenants = sorted(set(self.tenants()))
        readings = {t: self._read(t) for t in tenants}  # store reads outside the lock
        with self._lock:
            for tenant, values in readings.items():
                # An error answer counts in the store before it is recorded here, so the sample
                # after record_error holds it; older records cancel nothing (they never counted).
                told = self._reported_errors.pop(tenant, 0)
                last = self._last.get(tenant)
                self._last[tenant] = values
                if last is None:
                    continue
                deltas = {
                    k: v - last.get(k, 0.0) for k, v in values.items() if v > last.get(k, 0.0)
                }
                if not deltas:
                    continue
                for unit in UNITS:
                    series = self._series.setdefault(
                        (tenant, unit), _Series(UNITS[unit], self._keep[unit])
                    )
                    series.add(now, deltas)
                for kind in ("fallbacks", "errors"):
                    n = int(deltas.get(kind, 0))
                    if kind == "errors":  # those shown with their message already: not twice
                        n -= min(n, told)
                    if n:
                        noun = kind if n > 1 else kind.removesuffix("s")
                        self._push(now, kind.removesuffix("s"), tenant, detail=f"{n} new {noun}")
            fresh = self.engine.events[self._seen_events :]
            self._seen_events += len(fresh)
        for raw in fresh:  # tenant look-ups read the store: outside the lock
            owner = self._owner(raw, tenants)
            with self._lock:
                self._push(now, *_describe(raw, owner))

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
        """The tenant whose store holds the event's entry (unique ids) or else its group."""
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
        """The last ``n`` buckets of ``unit`` (oldest first, empty ones as zeros), summed over ``tenants``."""
        width = UNITS[unit]
        now = time.time() if now is None else now
        last = int(now // width) * width
        starts = [last - width * i for i in range(n - 1, -1, -1)]
        out = {s: dict.fromkeys(COUNTED, 0.0) for s in starts}
        with self._lock:
            for tenant in tenants:
                series = self._series.get((tenant, unit))
                if series is None:
                    continue
                for start in starts:
                    for name, amount in series.buckets.get(start, {}).items():
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
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


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
    return str(raw.get("event", "event")), tenant, group, entry, ""
