"""The outermost guard (plain ASGI): body size (413), requests in flight (503), HTTP metrics, and a last
catch-all that answers 500 with a generic JSON error, so a traceback never reaches a client."""

from __future__ import annotations

import logging
import time
from typing import Any

from .errors import ApiError, send_error
from .metrics import ServerMetrics

log = logging.getLogger("minicache.server")

UNLIMITED_PATHS = frozenset({"/health", "/metrics"})  # never refused for load: probes must get through


class _BodyTooLarge(Exception):
    pass


class GuardMiddleware:
    def __init__(self, app: Any, *, max_body_bytes: int, max_inflight: int, metrics: ServerMetrics) -> None:
        self.app = app
        self.max_body = max_body_bytes
        self.max_inflight = max_inflight
        self.metrics = metrics
        self.inflight = 0  # only touched on the event loop

    def _too_large(self) -> ApiError:
        return ApiError(413, f"The request body exceeds the limit of {self.max_body:,} bytes.",
                        code="request_too_large")

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

        limited = path not in UNLIMITED_PATHS
        counted = False
        try:
            length = dict(scope.get("headers") or []).get(b"content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                raise self._too_large() if length.isdigit() else ApiError(400, "Invalid Content-Length header.")
            if limited and self.inflight >= self.max_inflight:
                raise ApiError(503, f"The server is at its limit of {self.max_inflight} requests in flight; "
                               "retry shortly.", code="overloaded", headers={"Retry-After": "1"})
            if limited:
                self.inflight += 1
                counted = True
                self.metrics.inflight.inc()
            received = 0

            async def receive_limited() -> dict[str, Any]:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > self.max_body:
                        raise _BodyTooLarge()
                return message

            await self.app(scope, receive_limited, send_tracked)
        except ApiError as exc:
            if state["started"]:
                raise
            await send_error(send_tracked, exc)
        except _BodyTooLarge:
            if state["started"]:
                raise
            await send_error(send_tracked, self._too_large())
        except Exception:
            log.exception("unhandled error in %s %s", scope.get("method"), path)
            if state["started"]:
                raise
            await send_error(send_tracked, ApiError(500, "Internal server error.", code="internal_error"))
        finally:
            if counted:
                self.inflight -= 1
                self.metrics.inflight.dec()
            route = scope.get("route")
            label = getattr(route, "path", None) or "<unmatched>"
            self.metrics.http_done(scope.get("method", ""), label, int(state["status"]), time.perf_counter() - began)
