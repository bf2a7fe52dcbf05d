"""The engine's event log: builds, audits, evictions and merges, bounded for long-running servers.

Readers follow it with a cursor, ``seen = len(log)`` and later ``log[seen:]``, as they would a list.
``len`` counts every event ever appended and slices use those absolute positions, so a cursor stays
valid when old events are dropped; a reader that fell more than ``capacity`` events behind gets
only what is still kept. A listener (:meth:`EventLog.listen`) is told of each event as it is
appended, in the appending thread: what must follow an event at once (a merge after a build) does
not poll the log for it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, overload

log = logging.getLogger(__name__)

Event = dict[str, Any]


class EventLog:
    """Append-only, keeps the newest ``capacity`` events, indexed by absolute position."""

    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._events: deque[Event] = deque(maxlen=capacity)
        self._total = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[Event], None]] = []

    def listen(self, listener: Callable[[Event], None]) -> None:
        """Call ``listener`` with every event appended from now on, after it is kept. It runs in the
        appending thread (a build's), so it should hand slow work elsewhere; what it raises is logged,
        never passed to the code that appended the event."""
        with self._lock:
            self._listeners.append(listener)

    def append(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)
            self._total += 1
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # a listener's failure must not fail a build or a hit
                log.exception("event listener failed on %s", event.get("event"))

    def __len__(self) -> int:
        return self._total

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        with self._lock:
            first = self._total - len(self._events)  # absolute position of the oldest kept event
            kept = list(self._events)
        if isinstance(index, slice):
            start, stop, step = index.indices(self._total)
            return [kept[i - first] for i in range(start, stop, step) if i >= first]
        position = index + self._total if index < 0 else index
        if not first <= position < self._total:
            raise IndexError(
                "event no longer kept" if 0 <= position < first else "event index out of range"
            )
        return kept[position - first]

    def __iter__(self):
        return iter(self[0:])

    def __eq__(self, other: object) -> bool:
        """Equal to a list (or log) holding the same kept events, as the list it replaced was."""
        if isinstance(other, (list, EventLog)):
            return self[0:] == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list
