"""The outermost guard (plain ASGI), applied before any endpoint runs:

- body size: a ``Content-Length`` over the limit, or more bytes than that while reading -> 413;
- body time: a body that has not fully arrived ``body_timeout_s`` after the request began -> 408, so a
  client that never finishes its body cannot hold a slot for long;
- requests in flight, per caller and in total -> 503 with ``Retry-After``. The caller is the tenant of
  the request's API key (the client address when the key is unknown or auth is off), so one tenant's
  stalled or slow requests cannot take every slot;
- HTTP metrics, and a last catch-all that answers 500 with a generic JSON error (never a traceback).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

from minicache.server.errors import ApiError, send_error
from minicache.server.metrics import ServerMetrics

log = logging.getLogger("minicache.server")

UNLIMITED_PATHS = frozenset(
    {"/health", "/metrics"}
)  # never refused for load: probes must get through


class GuardMiddleware:
    def __init__(
        self,
        app: Any,
        *,
        max_body_bytes: int,
        max_inflight: int,
        max_inflight_per_caller: int,
        body_timeout_s: float,
        caller: Callable[[dict[str, Any]], str],
        metrics: ServerMetrics,
    ) -> None:
        self.app = app
        self.max_body = max_body_bytes
        self.max_inflight = max_inflight
        self.max_per_caller = max_inflight_per_caller
        self.body_timeout_s = body_timeout_s
        self.caller = caller
        self.metrics = metrics
        self.inflight = 0  # only touched on the event loop, as is ``by_caller``
        self.by_caller: dict[str, int] = {}

    def _too_large(self) -> ApiError:
        return ApiError(
            413,
            f"The request body exceeds the limit of {self.max_body:,} bytes.",
            code="request_too_large",
        )

    def _admit(self, scope: dict[str, Any]) -> str:
        """Take a slot for this request's caller, or 503."""
        who = self.caller(scope)
        if self.by_caller.get(who, 0) >= self.max_per_caller:
            raise ApiError(
                503,
                f"This caller already has {self.max_per_caller} requests in flight; retry shortly.",
                code="overloaded",
                headers={"Retry-After": "1"},
            )
        if self.inflight >= self.max_inflight:
            raise ApiError(
                503,
                f"The server is at its limit of {self.max_inflight} requests in flight; "
                "retry shortly.",
                code="overloaded",
                headers={"Retry-After": "1"},
            )
        self.inflight += 1
        self.by_caller[who] = self.by_caller.get(who, 0) + 1
        self.metrics.inflight.inc()
        return who

    def _release(self, who: str) -> None:
        self.inflight -= 1
        left = self.by_caller.pop(who) - 1
        if left:
            self.by_caller[who] = left
        self.metrics.inflight.dec()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        state = {"status": 500, "started": False}
        path = scope.get("path", "")

        async def send_tracked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)

        who: str | None = None
        received = 0
        body_done = False

        async def receive_guarded() -> dict[str, Any]:
            """The body, within its size and time limits; later receives (disconnects) pass unguarded."""
            nonlocal received, body_done
            if body_done:
                return await receive()
            left = self.body_timeout_s - (time.perf_counter() - began)
            try:
                with anyio.fail_after(max(left, 0.001)):
                    message = await receive()
            except TimeoutError:
                raise ApiError(
                    408,
                    f"The request body did not arrive within {self.body_timeout_s:g} s.",
                    code="request_timeout",
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise self._too_large()
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        try:
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                raise (
                    self._too_large()
                    if length.isdigit()
                    else ApiError(400, "Invalid Content-Length header.")
                )
            if path not in UNLIMITED_PATHS:
                who = self._admit(scope)
            await self.app(scope, receive_guarded, send_tracked)
        except ApiError as exc:
            if state["started"]:
                raise
            await send_error(send_tracked, exc)
        except Exception:
            log.exception("unhandled error in %s %s", scope.get("method"), path)
            if state["started"]:
                raise
            await send_error(
                send_tracked, ApiError(500, "Internal server error.", code="internal_error")
            )
        finally:
            if who is not None:
                self._release(who)
            route = scope.get("route")
            label = getattr(route, "path", None) or "<unmatched>"
            elapsed = time.perf_counter() - began
            self.metrics.http_done(scope.get("method", ""), label, int(state["status"]), elapsed)
