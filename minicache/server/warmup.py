"""Start-up warm-up: the server loads the routing index of every tenant it serves before it is ready.

Loading a tenant's routing index (:mod:`minicache.route.index`) reads every example the tenant has
stored: a cost that grows with history (seconds at 100,000 examples). Paid on a request, that
request would wait for it. So the app, when it starts (its lifespan), loads them in a background
thread, and ``GET /ready`` answers 503 (``"routing": {"status": "warming"}``) until every load is done: a
load balancer or readiness probe sends no traffic meanwhile. A request that arrives anyway is
still routed correctly: it waits for its own tenant's load (never a partly loaded index) and is
not held up by other tenants' loads.

Which tenants: every tenant an API key maps to, and "default" (every caller's when auth is off),
which are the only tenants a request can be served for. A tenant whose load fails here (the store
unreachable) is logged and loaded on its first request instead, as before this existed.

An app whose lifespan never runs (FastAPI's TestClient outside a ``with`` block) never warms and
reports ready: its tenants load on their first requests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal

import anyio.to_thread

from minicache.engine import MiniCache

log = logging.getLogger("minicache.server")


class Warmup:
    """Loads the routing indexes of ``tenants()`` in one background thread; :attr:`ready` says when done."""

    def __init__(self, engine: MiniCache, tenants: Callable[[], Iterable[str]]) -> None:
        self._engine = engine
        self._tenants = tenants
        self.state: Literal["idle", "warming", "ready"] = "idle"
        self.total = 0
        self.done = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ready(self) -> bool:
        """False only while a warm-up is under way (never started counts as ready: loads are lazy)."""
        return self.state != "warming"

    def status(self) -> dict[str, int]:
        return {
            "tenants": self.total,
            "loaded": self.done - len(self.failed),
            "failed": len(self.failed),
        }

    def start(self) -> None:
        names = sorted(set(self._tenants()))
        self.total, self.state = len(names), "warming"
        self._thread = threading.Thread(
            target=self._run, args=(names,), name="minicache-warmup", daemon=True
        )
        self._thread.start()

    def _run(self, names: list[str]) -> None:
        began = time.perf_counter()
        try:
            for name in names:
                if self._stop.is_set():
                    return
                try:
                    self._engine.warm_routing([name])
                except Exception as exc:  # noqa: BLE001 - the tenant then loads on its first request
                    self.failed.append(name)
                    log.warning(
                        "routing index of tenant %r not loaded at start-up (%s: %s); it loads on its "
                        "first request",
                        name,
                        type(exc).__name__,
                        exc,
                    )
                self.done += 1
            log.info(
                "routing indexes of %d tenant(s) loaded in %.2f s; ready",
                self.done - len(self.failed),
                time.perf_counter() - began,
            )
        finally:
            self.state = "ready"

    def stop(self, timeout: float = 5.0) -> None:
        """Load no further tenant; wait up to ``timeout`` for the one being loaded."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def lifespan(warmup: Warmup) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """The app's lifespan: start the warm-up when the server starts, stop it when it shuts down."""

    @asynccontextmanager
    async def run(_app: Any) -> AsyncIterator[None]:
        warmup.start()
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(warmup.stop)

    return run
