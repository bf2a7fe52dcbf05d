"""Serving logic, between the routers (HTTP) and the engine: who may call, and one solve.

:class:`ServerState` is everything the endpoints share (engine, config, auth, limits, metrics); it
lives on ``app.state.server`` and the routers reach it through the dependencies below. The engine
blocks (models, sandbox, store), so every engine call runs in a worker thread; the event loop only
parses, authenticates and formats.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from fastapi import Depends, Query, Request

from minicache.answers import Route, passed_through
from minicache.counters import count_failed, count_served
from minicache.engine import InvalidRequest, MiniCache, SolveError, SolveResult
from minicache.errors import BackendError, BackendResponseError
from minicache.server.auth import (
    DEFAULT_TENANT,
    Authenticator,
    FailedAuthThrottle,
    Principal,
    RateLimiter,
)
from minicache.server.config import ServerConfig
from minicache.server.errors import NO_RETRY, ApiError, store_busy
from minicache.server.metrics import ServerMetrics
from minicache.server.protocol import CacheControls, Label
from minicache.store.sqlite import StoreBusy

log = logging.getLogger("minicache.server")
T = TypeVar("T")


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


@dataclass
class ServerState:
    engine: MiniCache
    config: ServerConfig
    auth: Authenticator
    limiter: RateLimiter
    failed_auth: FailedAuthThrottle
    metrics: ServerMetrics = field(init=False)
    seen_tenants: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.metrics = ServerMetrics(self.engine, self.tenants)

    @classmethod
    def create(cls, engine: MiniCache, config: ServerConfig) -> ServerState:
        return cls(
            engine,
            config,
            Authenticator(config),
            RateLimiter(config.rate_per_s, config.burst),
            FailedAuthThrottle(config.auth_fail_per_s, config.auth_fail_burst),
        )

    def tenants(self) -> set[str]:
        return self.auth.tenants() | self.seen_tenants

    def caller(self, scope: dict[str, Any]) -> str:
        """The in-flight limits' name for a request (see :meth:`Authenticator.caller`)."""
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization")
        client = (scope.get("client") or ("unknown", 0))[0]
        return self.auth.caller(authorization.decode("latin-1") if authorization else None, client)

    async def solve(
        self,
        endpoint: str,
        tenant: str,
        question: Any,
        context: Any,
        controls: CacheControls,
        *,
        passthrough: bool = False,
        on_text: Callable[[str], None] | None = None,
        on_route: Callable[[str, Route], None] | None = None,
    ) -> SolveResult:
        """One engine call; its failures as OpenAI-style errors (400, 502, 503), counted in the
        metrics. With ``passthrough`` a request the engine leaves to the target is a result with
        the route ``passthrough``, for the caller to forward (and count: :meth:`forward`)."""
        self.seen_tenants.add(tenant)

        def run() -> SolveResult:
            result = self.engine.solve(
                question,
                context,
                tenant=tenant,
                passthrough=passthrough,
                on_text=on_text,
                on_route=on_route,
                **controls.engine_kwargs(),
            )
            if result.route != Route.PASSTHROUGH:
                self.metrics.solved(endpoint, tenant, result)
            return result

        try:
            return await blocking(run)
        except InvalidRequest as exc:
            self.metrics.failed(endpoint, tenant, "invalid")
            raise ApiError(400, str(exc), code="invalid_request") from None
        except StoreBusy as exc:
            self.metrics.failed(endpoint, tenant, "error")
            log.warning("store busy while solving (tenant %s): %s", tenant, exc)
            raise store_busy() from None
        except (SolveError, BackendError) as exc:
            self.metrics.failed(endpoint, tenant, "error")
            # a program that failed fails again; a target that failed may answer the next time
            retry = isinstance(exc, BackendError) or isinstance(exc.__cause__, BackendError)
            raise ApiError(
                502, f"No answer: {exc}", code="solve_failed", headers=None if retry else NO_RETRY
            ) from None
        except Exception:
            self.metrics.failed(endpoint, tenant, "error")
            log.exception("solve failed unexpectedly (tenant %s)", tenant)
            raise ApiError(
                500, "Internal server error while solving the request.", code="internal_error"
            ) from None

    def forward(
        self,
        endpoint: str,
        tenant: str,
        call: Callable[[], T],
        *,
        reason: str,
        no_store: bool,
        spent: SolveResult | None = None,
    ) -> T:
        """One forwarded target call (blocking: run it in a worker thread), counted as a
        pass-through (a failure as an error): :func:`forward_error` says what the client gets."""
        try:
            out = call()
        except Exception:
            if not no_store:
                count_failed(self.engine.store, tenant)
            self.metrics.failed(endpoint, tenant, "error")
            raise
        result = spent or passed_through(reason, "")
        if not no_store:
            count_served(self.engine.store, tenant, result)
        self.metrics.solved(endpoint, tenant, result)
        return out


def forward_error(exc: BaseException) -> ApiError:
    """What the client gets when the target failed a forwarded request: the target's own refusal
    (its 4xx, which a retry cannot change), else a 502 that a retry may fix."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BackendResponseError) and exc.status and 400 <= exc.status < 500:
        return ApiError(exc.status, str(exc), code="target_refused")  # it says whether to retry
    if isinstance(exc, BackendError):
        return ApiError(502, f"The target failed: {exc}", code="target_failed")
    log.error("forwarding to the target failed unexpectedly", exc_info=exc)
    return ApiError(500, "Internal server error while forwarding the request.")


# -- dependencies ----------------------------------------------------------------------------------


def state(request: Request) -> ServerState:
    return request.app.state.server


State = Annotated[ServerState, Depends(state)]


def principal(request: Request, server: State) -> Principal:
    """The caller, or 401; 429 while the client's address has used up its failed authentications."""
    client = request.client.host if request.client else "unknown"
    authorization = request.headers.get("authorization")
    if authorization:
        server.failed_auth.check(client)
    try:
        return server.auth.authenticate(authorization, client)
    except ApiError as exc:
        if exc.status == 401 and authorization:
            server.failed_auth.failed(client)
        raise


def user_tenant(request: Request, server: State) -> str:
    """The tenant a /v1 request is served for (its key's), after the per-key rate limit."""
    who = principal(request, server)
    if who.tenant is None:
        raise ApiError(
            403,
            "This key is an admin key without a tenant; use a tenant's API key.",
            code="no_tenant",
        )
    server.limiter.check(who.bucket)
    return who.tenant


def require_admin(request: Request, server: State) -> Principal:
    """An admin key, always: without one configured the admin endpoints answer 401 to everyone."""
    who = principal(request, server)
    if not who.admin:
        if not request.headers.get("authorization"):
            raise ApiError(
                401,
                "Missing admin key: send 'Authorization: Bearer <admin key>'.",
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if (
            not server.auth.enabled
        ):  # with auth off, a key that is not an admin key is a wrong guess
            server.failed_auth.failed(request.client.host if request.client else "unknown")
        raise ApiError(403, "This endpoint needs an admin key.", code="admin_required")
    server.limiter.check(who.bucket)
    return who


def admin_tenant(
    _: Annotated[Principal, Depends(require_admin)],
    tenant: Annotated[Label, Query(description="The tenant to act on.")] = DEFAULT_TENANT,
) -> str:
    """The ``?tenant=`` an admin endpoint acts on, checked like every stored name."""
    return tenant


UserTenant = Annotated[str, Depends(user_tenant)]
AdminTenant = Annotated[str, Depends(admin_tenant)]
Admin = Annotated[Principal, Depends(require_admin)]
