"""``create_app(engine, config)``: the OpenAI-compatible MiniCache service.

Endpoints: ``POST /v1/chat/completions`` (OpenAI format, streaming or not), ``POST /v1/solve`` (native),
``GET /v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus), and ``/admin/*`` (entries, groups,
invalidation, export/import, freeze, stats; admin key; ``?tenant=``, default "default").

The engine blocks (models, sandbox, store), so every engine call runs in a worker thread; the event
loop only parses, authenticates and formats.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict
from typing import Any, Callable, TypeVar

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response, StreamingResponse

from .. import __version__
from ..engine import InvalidRequest, MiniCache, SolveError, SolveResult
from ..errors import BackendError
from .admin import import_problems
from .auth import DEFAULT_TENANT, Authenticator, Principal, RateLimiter
from .config import ServerConfig
from .errors import ApiError
from .metrics import CONTENT_TYPE, ServerMetrics
from .middleware import GuardMiddleware
from .openai_format import CacheControls, chat_chunks, chat_completion, parse_chat, parse_json, parse_solve

log = logging.getLogger("minicache.server")
T = TypeVar("T")

ENTRY_STATUSES = {"candidate", "active", "superseded", "evicted"}


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def create_app(engine: MiniCache, config: ServerConfig | None = None) -> FastAPI:
    config = config or ServerConfig()
    auth = Authenticator(config)
    limiter = RateLimiter(config.rate_per_s, config.burst)
    seen_tenants: set[str] = set()

    def tenants() -> set[str]:
        return auth.tenants() | seen_tenants

    metrics = ServerMetrics(engine, tenants)
    if not auth.enabled:
        log.warning("minicache server: no API keys configured - authentication is OFF and every request is "
                    "tenant 'default'%s", "; the admin endpoints are open too" if auth.admin_open else "")

    app = FastAPI(title="MiniCache", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.engine, app.state.config, app.state.metrics = engine, config, metrics
    app.add_middleware(GuardMiddleware, max_body_bytes=config.max_body_bytes, max_inflight=config.max_inflight,
                       metrics=metrics)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "HTTP error"
        return ApiError(exc.status_code, message, headers=dict(exc.headers or {})).response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return ApiError(400, f"{where}: {first.get('msg', 'invalid value')}", code="invalid_type",
                        param=where or None).response()

    # -- who is calling ----------------------------------------------------------------------
    def principal(request: Request) -> Principal:
        client = request.client.host if request.client else "unknown"
        who = auth.authenticate(request.headers.get("authorization"), client)
        return who

    def user(request: Request) -> tuple[Principal, str]:
        who = principal(request)
        if who.tenant is None:
            raise ApiError(403, "This key is an admin key without a tenant; use a tenant's API key.",
                           code="no_tenant")
        limiter.check(who.bucket)
        return who, who.tenant

    def admin(request: Request) -> str:
        who = principal(request)
        if not who.admin:
            if not request.headers.get("authorization"):
                raise ApiError(401, "Missing admin key: send 'Authorization: Bearer <admin key>'.",
                               code="missing_api_key", headers={"WWW-Authenticate": "Bearer"})
            raise ApiError(403, "This endpoint needs an admin key.", code="admin_required")
        limiter.check(who.bucket)
        tenant = request.query_params.get("tenant", DEFAULT_TENANT)
        if not tenant or len(tenant) > 200:
            raise ApiError(400, "tenant must be a non-empty string of at most 200 characters", param="tenant")
        return tenant

    # -- solving -------------------------------------------------------------------------------
    async def solve(endpoint: str, tenant: str, question: Any, context: Any, controls: CacheControls) -> SolveResult:
        seen_tenants.add(tenant)

        def run() -> SolveResult:
            result = engine.solve(question, context, tenant=tenant, **controls.kwargs())
            metrics.solved(endpoint, tenant, result)
            return result

        try:
            return await blocking(run)
        except InvalidRequest as exc:
            metrics.failed(endpoint, tenant, "invalid")
            raise ApiError(400, str(exc), code="invalid_request") from None
        except (SolveError, BackendError) as exc:
            metrics.failed(endpoint, tenant, "error")
            raise ApiError(502, f"No answer: {exc}", code="solve_failed") from None
        except Exception:
            metrics.failed(endpoint, tenant, "error")
            log.exception("solve failed unexpectedly (tenant %s)", tenant)
            raise ApiError(500, "Internal server error while solving the request.", code="internal_error") from None

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        _, tenant = user(request)
        chat = parse_chat(parse_json(await request.body()), request.headers, config.model_name)
        result = await solve("chat", tenant, chat.question, chat.context, chat.controls)
        if chat.stream:  # the answer is complete: render every event now, so nothing can fail mid-stream
            events = list(chat_chunks(result, chat.model, chat.include_usage))
            return StreamingResponse(iter(events), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return JSONResponse(chat_completion(result, chat.model))

    @app.post("/v1/solve")
    async def native_solve(request: Request) -> Response:
        _, tenant = user(request)
        req = parse_solve(parse_json(await request.body()), request.headers)
        result = await solve("solve", tenant, req.question, req.context, req.controls)
        return JSONResponse(result.to_dict())

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        user(request)
        return JSONResponse({"object": "list", "data": [
            {"id": config.model_name, "object": "model", "created": 0, "owned_by": "minicache"}]})

    # -- operations ----------------------------------------------------------------------------
    @app.get("/health")
    async def health() -> Response:
        try:
            with anyio.fail_after(5):
                await anyio.to_thread.run_sync(engine.store.counters, DEFAULT_TENANT, abandon_on_cancel=True)
        except Exception as exc:  # noqa: BLE001 - the probe reports any failure as unhealthy
            log.warning("health check: store unreachable: %s", exc)
            return JSONResponse({"status": "unavailable", "store": "unreachable"}, status_code=503)
        return JSONResponse({"status": "ok", "store": "ok", "frozen": engine.config.frozen, "version": __version__})

    @app.get("/metrics")
    async def prometheus(request: Request) -> Response:
        if not config.public_metrics and not auth.admin_open:
            admin(request)
        return Response(await blocking(metrics.render), media_type=CONTENT_TYPE)

    # -- admin ---------------------------------------------------------------------------------
    @app.get("/admin/entries")
    async def list_entries(request: Request) -> Response:
        tenant = admin(request)
        status = request.query_params.get("status")
        if status is not None and status not in ENTRY_STATUSES:
            raise ApiError(400, f"status must be one of {', '.join(sorted(ENTRY_STATUSES))}", param="status")
        entries = await blocking(engine.store.list_entries, tenant, status)
        return JSONResponse({"object": "list", "tenant": tenant, "data": [e.to_json() for e in entries]})

    @app.get("/admin/entries/{entry_id}")
    async def get_entry(entry_id: str, request: Request) -> Response:
        tenant = admin(request)
        entry = await blocking(engine.store.get_entry, tenant, entry_id)
        if entry is None:
            raise ApiError(404, f"No entry {entry_id} for tenant {tenant}.", code="entry_not_found")
        return JSONResponse(entry.to_json())

    @app.delete("/admin/entries/{entry_id}")
    async def delete_entry(entry_id: str, request: Request) -> Response:
        tenant = admin(request)
        if not await blocking(engine.store.delete_entry, tenant, entry_id):
            raise ApiError(404, f"No entry {entry_id} for tenant {tenant}.", code="entry_not_found")
        return JSONResponse({"id": entry_id, "deleted": True})

    @app.post("/admin/invalidate")
    async def invalidate(request: Request) -> Response:
        tenant = admin(request)
        body = parse_json(await request.body())
        if not isinstance(body, dict) or set(body) - {"group", "entry"}:
            raise ApiError(400, "expected {\"group\": ...} or {\"entry\": ...}")
        group, entry = body.get("group"), body.get("entry")
        if (group is None) == (entry is None) or not isinstance(group or entry, str) or not (group or entry):
            raise ApiError(400, "give exactly one of group or entry, as a non-empty string")
        n = await blocking(engine.invalidate, group=group, entry=entry, tenant=tenant)
        return JSONResponse({"tenant": tenant, "invalidated": n})

    @app.get("/admin/groups")
    async def list_groups(request: Request) -> Response:
        tenant = admin(request)
        groups = await blocking(engine.store.list_groups, tenant)
        return JSONResponse({"object": "list", "tenant": tenant, "data": [asdict(g) for g in groups]})

    @app.get("/admin/export")
    async def export(request: Request) -> Response:
        tenant = admin(request)
        raw = request.query_params.get("examples", "3")
        if not raw.isdigit() or int(raw) > 100:
            raise ApiError(400, "examples must be an integer from 0 to 100", param="examples")
        return JSONResponse(await blocking(engine.export_entries, tenant, int(raw)))

    @app.post("/admin/import")
    async def import_(request: Request) -> Response:
        tenant = admin(request)
        data = parse_json(await request.body())
        problems = import_problems(data)
        if problems:
            raise ApiError(400, f"Nothing imported: {problems}", code="invalid_entries")
        try:
            n = await blocking(engine.import_entries, data, tenant)
        except InvalidRequest as exc:
            raise ApiError(400, f"Nothing imported: {exc}", code="invalid_entries") from None
        seen_tenants.add(tenant)
        return JSONResponse({"tenant": tenant, "imported": n})

    @app.post("/admin/freeze")
    async def freeze(request: Request) -> Response:
        admin(request)
        body = parse_json(await request.body())
        if not isinstance(body, dict) or not isinstance(body.get("frozen"), bool):
            raise ApiError(400, "expected {\"frozen\": true|false}", param="frozen")
        engine.config.frozen = body["frozen"]
        log.warning("builds %s by an admin request", "frozen" if body["frozen"] else "unfrozen")
        return JSONResponse({"frozen": engine.config.frozen})

    @app.get("/admin/stats")
    async def stats(request: Request) -> Response:
        tenant = admin(request)

        def read() -> dict[str, Any]:
            out = engine.stats(tenant)
            out.setdefault("errors", engine.store.counters(tenant).get("errors", 0))
            return {"tenant": tenant, "frozen": engine.config.frozen, **out}

        return JSONResponse(await blocking(read))

    return app
