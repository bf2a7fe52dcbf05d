"""The outermost guard (plain ASGI), applied before any endpoint runs:

- the client's address: the peer's, or the one a trusted proxy forwarded (:mod:`.forwarded`);
- body size: a ``Content-Length`` over the limit, or more bytes than that while reading -> 413;
- body time: a body that has not fully arrived ``body_timeout_s`` after the request began -> 408, so a
  client that never finishes its body cannot hold a slot for long;
- the API key, from the headers, before the body is read: an API request without a valid key is
  answered 401 at once (:func:`.auth.refuse_before_body`);
- requests in flight, per caller and in total -> 503 with ``Retry-After``. The caller is the tenant of
  the request's API key (the client address when the key is unknown or auth is off), so one tenant's
  stalled or slow requests cannot take every slot. With auth on, requests without a valid key (the
  dashboard, unknown paths) share a small pool of their own and never take a tenant's slot;
- HTTP metrics, and a last catch-all that answers 500 with a generic JSON error (never a traceback).

A refusal sent before the body was read closes the connection, so the rest of the body need not be
waited for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from minicache.server.auth import refuse_before_body
from minicache.server.errors import ApiError, send_error
from minicache.server.forwarded import TrustedProxies
from minicache.server.metrics import OTHER, ServerMetrics

if TYPE_CHECKING:
    from minicache.server.config import ServerConfig
    from minicache.server.serving import ServerState

log = logging.getLogger("minicache.server")

# Never refused for load: a liveness or readiness probe that fails under load would take a busy
# server out of rotation (or restart it) exactly when it is serving.
UNLIMITED_PATHS = frozenset({"/health", "/ready", "/metrics"})


class GuardMiddleware:
    """The keys, the failed-key throttle and the trusted proxies are the serving state's, read from
    the app a request is for (``scope["app"].state.server``); without one (a bare app in a test)
    only the limits apply."""

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
        self.inflight = 0  # only touched on the event loop, as are the others below
        self.by_caller: dict[str, int] = {}
        self.keyless_inflight = 0
        self._proxies: tuple[ServerConfig, TrustedProxies] | None = None  # a config's proxies

    def _too_large(self) -> ApiError:
        return ApiError(
            413,
            f"The request body exceeds the limit of {self.max_body:,} bytes.",
            code="request_too_large",
        )

    def _admit(self, scope: dict[str, Any], server: ServerState | None) -> tuple[str, bool]:
        """Take a slot for this request's caller, or 503; the caller, and whether it is keyless."""
        who = self.caller(scope)
        keyless = False
        if server is not None and server.auth.enabled and who.startswith("ip:"):
            keyless = True
            pool, inflight = server.config.max_inflight_keyless, self.keyless_inflight
        else:
            pool, inflight = self.max_inflight, self.inflight
        per_caller = min(self.max_per_caller, pool)
        if self.by_caller.get(who, 0) >= per_caller:
            raise ApiError(
                503,
                f"This caller already has {per_caller} requests in flight; retry shortly.",
                code="overloaded",
                headers={"Retry-After": "1"},
            )
        if inflight >= pool:
            raise ApiError(
                503,
                f"The server is at its limit of {pool} requests in flight"
                f"{' without a valid API key' if keyless else ''}; retry shortly.",
                code="overloaded",
                headers={"Retry-After": "1"},
            )
        if keyless:
            self.keyless_inflight += 1
        else:
            self.inflight += 1
        self.by_caller[who] = self.by_caller.get(who, 0) + 1
        self.metrics.inflight.inc()
        return who, keyless

    def _release(self, who: str, keyless: bool) -> None:
        if keyless:
            self.keyless_inflight -= 1
        else:
            self.inflight -= 1
        left = self.by_caller.pop(who) - 1
        if left:
            self.by_caller[who] = left
        self.metrics.inflight.dec()

    def _trusted(self, server: ServerState) -> TrustedProxies:
        if self._proxies is None or self._proxies[0] is not server.config:
            self._proxies = (server.config, TrustedProxies(server.config.trusted_proxies))
        return self._proxies[1]

    def _check_key(self, scope: dict[str, Any], server: ServerState, path: str) -> None:
        """401 (or 429) from the headers alone, before the body (see the module docstring)."""
        authorization = dict(scope.get("headers") or []).get(b"authorization")
        client = (scope.get("client") or ("unknown", 0))[0]
        refusal = refuse_before_body(
            server.auth,
            server.failed_auth,
            path,
            authorization.decode("latin-1") if authorization else None,
            client,
        )
        if refusal is not None:
            raise refusal

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        state = {"status": 500, "started": False}
        path = scope.get("path", "")
        server: ServerState | None = getattr(
            getattr(scope.get("app"), "state", None), "server", None
        )
        if server is not None:
            scope = self._trusted(server).resolve(scope)

        async def send_tracked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)

        who: str | None = None
        keyless = False
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
                if server is not None:
                    self._check_key(scope, server, path)
                who, keyless = self._admit(scope, server)
            await self.app(scope, receive_guarded, send_tracked)
        except ApiError as exc:
            if state["started"]:
                raise
            if not body_done and _has_body(scope):
                exc.headers = {**(exc.headers or {}), "Connection": "close"}
            await send_error(send_tracked, exc)
        except Exception:
            # the path quoted, escapes and all: a client must not write lines of its own into the log
            log.exception("unhandled error in %s %r", scope.get("method"), path)
            if state["started"]:
                raise
            await send_error(
                send_tracked, ApiError(500, "Internal server error.", code="internal_error")
            )
        finally:
            if who is not None:
                self._release(who, keyless)
            route = scope.get("route")
            label = getattr(route, "path", None) or OTHER  # a template: one of a fixed set
            elapsed = time.perf_counter() - began
            self.metrics.http_done(scope.get("method", ""), label, int(state["status"]), elapsed)


def _has_body(scope: dict[str, Any]) -> bool:
    """Whether the request announced a body (that the server would otherwise have to read out)."""
    headers = dict(scope.get("headers") or [])
    length = headers.get(b"content-length", b"0")
    return b"transfer-encoding" in headers or (length.isdigit() and int(length) > 0)
