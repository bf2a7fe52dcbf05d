"""``create_app(engine, config)``: the OpenAI-compatible MiniCache service.

Endpoints (one router per family, see :mod:`.routers`): ``POST /v1/chat/completions`` (OpenAI format,
streaming or not), ``POST /v1/solve`` (native), ``GET /v1/models``, ``GET /health`` (liveness),
``GET /ready`` (readiness), ``GET /metrics`` (Prometheus), ``GET /docs`` (Swagger UI, served
locally), ``GET /`` (to the dashboard), ``/dashboard`` and ``/admin/*`` (entries, groups,
invalidation, export/import, freeze, stats; admin key; ``?tenant=``, default "default"). The request
and response formats are :mod:`.protocol`'s models and are served as OpenAPI at ``/openapi.json``.

Layers, outermost first: :class:`.request_ids.RequestIdMiddleware` (``X-Request-Id`` on every
response, 5xx logged), :class:`.middleware.GuardMiddleware` (body size and time, in-flight limits,
last-resort 500), FastAPI with :mod:`.errors`' handlers (every error an OpenAI-style body), the routers
(parse, authenticate, format) and :class:`.serving.ServerState` (the engine call).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI

from minicache import __version__
from minicache.engine import MiniCache
from minicache.server import errors
from minicache.server.config import ServerConfig
from minicache.server.dashboard import Dashboard, dashboard_router
from minicache.server.middleware import GuardMiddleware
from minicache.server.openai_format import SafeJSONResponse
from minicache.server.request_ids import RequestIdMiddleware, install_log_filter
from minicache.server.routers import admin_router, ops_router, v1_router
from minicache.server.serving import ServerState
from minicache.server.warmup import Warmup, lifespan

log = logging.getLogger("minicache.server")


def create_app(engine: MiniCache, config: ServerConfig | None = None) -> FastAPI:
    config = config or ServerConfig()
    server = ServerState.create(engine, config)
    if not server.auth.enabled:
        log.warning(
            "minicache server: no API keys configured - authentication is OFF and every request is "
            "tenant 'default'; the admin endpoints %s",
            "need an admin key"
            if server.auth.has_admin_keys
            else "are closed (no admin key is configured)",
        )

    # When the server starts, every tenant's routing index is loaded before /health says ready (.warmup).
    warmup = Warmup(engine, server.auth.tenants)
    app = FastAPI(
        title="MiniCache",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan(warmup),
        openapi_url="/openapi.json",
        default_response_class=SafeJSONResponse,
        strict_content_type=False,  # a body without a Content-Type is read as JSON, as before
        description="An OpenAI-compatible cache of parameterized programs in front of a target model.",
    )
    app.state.server, app.state.warmup = server, warmup
    app.state.engine, app.state.config, app.state.metrics = engine, config, server.metrics
    app.add_middleware(
        GuardMiddleware,
        max_body_bytes=config.max_body_bytes,
        max_inflight=config.max_inflight,
        max_inflight_per_caller=config.max_inflight_per_caller,
        body_timeout_s=config.body_timeout_s,
        caller=server.caller,
        metrics=server.metrics,
    )
    # Added last, so outermost: even the guard's own answers carry the request's id.
    app.add_middleware(RequestIdMiddleware)
    install_log_filter()
    errors.install(app)

    app.include_router(v1_router)
    app.include_router(admin_router)
    app.include_router(ops_router)
    # Further routers (the dashboard) are included here, after the API's own.
    app.state.dashboard = Dashboard.create(server)
    app.include_router(dashboard_router)

    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, plus the export format's model (the import body is validated by the engine
    against it, not by FastAPI, so FastAPI does not know it), minus FastAPI's 422 responses: invalid
    requests get 400 here, as in the OpenAI API."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            components.pop(name, None)
        try:
            from minicache.portability import EntryExport
        except ImportError:  # pragma: no cover - the export model is not there yet
            components["EntryExport"] = {"type": "array", "items": {"type": "object"}}
        else:
            export = EntryExport.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(export.pop("$defs", {}))
            components["EntryExport"] = export
        app.openapi_schema = schema
    return app.openapi_schema
