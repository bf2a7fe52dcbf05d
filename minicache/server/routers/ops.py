"""Operations: ``GET /health`` (the process is up), ``GET /ready`` (it can serve), ``GET /metrics``
(Prometheus), ``GET /`` (to the dashboard) and ``GET /docs`` (Swagger UI for ``/openapi.json``).

``/health`` and ``/ready`` are never limited and never authenticated: a liveness probe restarts a
process whose ``/health`` fails, a readiness probe or load balancer sends traffic only while
``/ready`` answers 200. The Swagger UI's script and style ship in a pinned package
(``fastapi-offline``) and are served from here: the docs page loads nothing from another host.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import JSONResponse, RedirectResponse, Response

from minicache import __version__
from minicache.server.auth import DEFAULT_TENANT
from minicache.server.metrics import CONTENT_TYPE
from minicache.server.readiness import check_backends
from minicache.server.serving import State, blocking, require_admin

log = logging.getLogger("minicache.server")
router = APIRouter(tags=["operations"])

STORE_TIMEOUT_S = 5.0
DOCS_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}


@router.get("/health", summary="Liveness: 200 while the process is up")
async def health(server: State) -> Response:
    """200 ``ok`` whenever the process answers; says nothing about the store or the models
    (``/ready`` does), so a liveness probe does not restart a server whose backend is down."""
    return JSONResponse(
        {"status": "ok", "frozen": server.engine.config.frozen, "version": __version__}
    )


@router.get(
    "/ready",
    summary="Readiness: 503 naming the failing part (store, routing, target, small)",
    responses={503: {"description": "Not ready: the body names the part that failed"}},
)
async def ready(request: Request, server: State) -> Response:
    """200 when the store answers, every tenant's routing index is loaded (``.warmup``) and each
    model backend can serve (``.readiness``); otherwise 503 with ``failing`` listing the parts."""
    parts: dict[str, Any] = {}
    try:
        with anyio.fail_after(STORE_TIMEOUT_S):
            await anyio.to_thread.run_sync(
                server.engine.store.counters, DEFAULT_TENANT, abandon_on_cancel=True
            )
        parts["store"] = "ok"
    except Exception as exc:  # noqa: BLE001 - the probe reports any failure as not ready
        log.warning("readiness: store unreachable: %s", exc)
        parts["store"] = "unreachable"
    warmup = request.app.state.warmup
    parts["routing"] = "ok" if warmup.ready else {"status": "warming", **warmup.status()}
    backends = await anyio.to_thread.run_sync(check_backends, server.engine)
    for role, (ok, detail) in backends.items():
        parts[role] = "ok" if ok else detail
    failing = [name for name, value in parts.items() if value != "ok"]
    body = {"status": "not ready" if failing else "ok", "failing": failing, **parts}
    body["version"] = __version__
    return JSONResponse(body, status_code=503 if failing else 200)


@router.get(
    "/metrics", summary="Prometheus metrics (admin key, unless public_metrics or no keys at all)"
)
async def prometheus(request: Request, server: State) -> Response:
    if not server.config.public_metrics and (server.auth.enabled or server.auth.has_admin_keys):
        require_admin(request, server)
    return Response(await blocking(server.metrics.render), media_type=CONTENT_TYPE)


@router.get("/", include_in_schema=False)
async def root() -> Response:
    """A browser opening the server's address lands on the dashboard (which asks for a key)."""
    return RedirectResponse("/dashboard", status_code=307)


@router.get("/docs", include_in_schema=False)
async def docs(request: Request) -> Response:
    root = request.scope.get("root_path", "")
    return get_swagger_ui_html(
        openapi_url=f"{root}/openapi.json",
        title="MiniCache - Swagger UI",
        swagger_js_url=f"{root}/docs/static/swagger-ui-bundle.js",
        swagger_css_url=f"{root}/docs/static/swagger-ui.css",
        swagger_favicon_url=f"{root}/docs/static/favicon.png",
    )


@router.get("/docs/static/{name}", include_in_schema=False)
async def docs_asset(name: str) -> Response:
    if name not in DOCS_ASSETS:
        return Response("not found", status_code=404, media_type="text/plain")
    data = (resources.files("fastapi_offline") / "static" / name).read_bytes()
    return Response(data, media_type=DOCS_ASSETS[name], headers={"Cache-Control": "max-age=86400"})
