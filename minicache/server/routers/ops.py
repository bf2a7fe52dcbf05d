"""Operations: ``GET /health`` (never limited, never authenticated) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

import logging

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from minicache import __version__
from minicache.server.auth import DEFAULT_TENANT
from minicache.server.metrics import CONTENT_TYPE
from minicache.server.serving import State, blocking, require_admin

log = logging.getLogger("minicache.server")
router = APIRouter(tags=["operations"])


@router.get(
    "/health", summary="Readiness: 503 if the store is unreachable or while routing indexes load"
)
async def health(request: Request, server: State) -> Response:
    """200 ``ok`` when the server can serve. 503 ``unavailable`` if the store is unreachable, and
    503 ``warming`` after start-up until every tenant's routing index is loaded (see ``.warmup``):
    a readiness probe; a liveness probe must allow for the warm-up (seconds per 100,000 examples)."""
    try:
        with anyio.fail_after(5):
            await anyio.to_thread.run_sync(
                server.engine.store.counters, DEFAULT_TENANT, abandon_on_cancel=True
            )
    except Exception as exc:  # noqa: BLE001 - the probe reports any failure as unhealthy
        log.warning("health check: store unreachable: %s", exc)
        return JSONResponse({"status": "unavailable", "store": "unreachable"}, status_code=503)
    warmup = request.app.state.warmup
    if not warmup.ready:
        return JSONResponse(
            {"status": "warming", "store": "ok", "routing": warmup.status()}, status_code=503
        )
    return JSONResponse(
        {
            "status": "ok",
            "store": "ok",
            "frozen": server.engine.config.frozen,
            "version": __version__,
        }
    )


@router.get(
    "/metrics", summary="Prometheus metrics (admin key, unless public_metrics or no keys at all)"
)
async def prometheus(request: Request, server: State) -> Response:
    if not server.config.public_metrics and (server.auth.enabled or server.auth.has_admin_keys):
        require_admin(request, server)
    return Response(await blocking(server.metrics.render), media_type=CONTENT_TYPE)
