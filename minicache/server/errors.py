"""OpenAI-style error responses: ``{"error": {"message", "type", "param", "code"}}``, never a traceback.

:class:`ApiError` is an ``HTTPException``, so it passes unchanged through FastAPI's body reading and
dependencies to one handler. :func:`install` registers that handler and the ones that turn pydantic's
validation errors (400, not FastAPI's 422: the OpenAI API answers 400 for every invalid parameter)
and a busy store (503 with ``Retry-After``) into the same body.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse

from minicache.store.sqlite import StoreBusy

log = logging.getLogger("minicache.server")

# status -> (OpenAI error type, default code)
_KINDS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("not_found_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("invalid_request_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("upstream_error", "solve_failed"),
    503: ("server_error", "overloaded"),
}
STORE_BUSY_RETRY_S = 2
# The 4xx answers a retry of the same request can change: a timeout, a rate limit. Every other 4xx
# says ``x-should-retry: false``, which the openai client reads before its own rules (it would
# retry a 409, for one).
RETRYABLE_4XX = frozenset({408, 429})
NO_RETRY = {"x-should-retry": "false"}


class ApiError(HTTPException):
    """Raised anywhere in a request; rendered as an OpenAI-style error JSON response."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if 400 <= status < 500 and status not in RETRYABLE_4XX:
            headers = {**NO_RETRY, **(headers or {})}
        super().__init__(status, message, headers=headers)
        self.status = status
        self.message = message
        kind, default_code = _KINDS.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", "error")
        )
        self.type = kind
        self.code = code or default_code
        self.param = param

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)

    def raw(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body, for middleware that answers without the framework."""
        body = json.dumps(self.body()).encode("utf-8")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        headers += [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in (self.headers or {}).items()
        ]
        return self.status, headers, body


async def send_error(send: Any, error: ApiError) -> None:
    status, headers, body = error.raw()
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def store_busy() -> ApiError:
    return ApiError(
        503,
        "The cache's store is busy (locked by another writer); retry shortly.",
        code="store_busy",
        headers={"Retry-After": str(STORE_BUSY_RETRY_S)},
    )


# pydantic error types -> OpenAI error codes; custom types (PydanticCustomError) are codes already.
_TYPE_CODES = {
    "missing": "missing_required_parameter",
    "extra_forbidden": "unknown_parameter",
    "json_invalid": "invalid_json",
}
_VALUE_ERRORS = (
    "greater_than",
    "less_than",
    "too_short",
    "too_long",
    "string_too",
    "literal_error",
    "enum",
    "value_error",
    "multiple_of",
    "finite_number",
)


def _param(loc: tuple[Any, ...]) -> str | None:
    parts = [p for p in loc if p not in ("body", "query", "path", "header")]
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif (
            isinstance(p, str)
            and not p.startswith(("function-", "union[", "nullable[", "json-or-python"))
            and p not in ("str", "int", "float", "bool", "list[...]", "TextPart")
        ):
            out += ("." if out else "") + p
    return out or None


def validation_error(errors: list[Any]) -> ApiError:
    """The first of pydantic's errors as one OpenAI-style 400."""
    first = errors[0] if errors else {}
    kind = str(first.get("type", "invalid_request"))
    if kind in _TYPE_CODES:
        code = _TYPE_CODES[kind]
    elif kind.endswith(("_type", "_parsing")) or kind in (
        "is_instance_of",
        "model_attributes_type",
    ):
        code = "invalid_type"
    elif kind.startswith(_VALUE_ERRORS):
        code = "invalid_value"
    else:
        code = kind  # a PydanticCustomError's own type
    param = _param(tuple(first.get("loc", ())))
    message = str(first.get("msg", "invalid value"))
    if kind == "missing" and param is None:
        code, message = "invalid_json", "The request body is empty; expected JSON."
    elif kind == "missing":
        message = f"Missing required parameter: {param!r}."
    elif param:
        message = f"Invalid {param!r}: {message}"
    return ApiError(400, message[:500], code=code, param=param)


def log_server_error(request: Request, exc: HTTPException) -> None:
    """A 5xx's cause in the log: the error answered and, when it was raised from another exception
    (a backend's, the store's), that one with its traceback. The request's values are arguments,
    so the log filter escapes them, and the line carries the request's id (``.request_ids``)."""
    cause = exc.__cause__ or exc.__context__
    log.error(
        "%s %s -> %d %s: %s",
        request.method,
        request.url.path,
        exc.status_code,
        getattr(exc, "code", ""),
        exc.detail,
        exc_info=(type(cause), cause, cause.__traceback__) if cause is not None else None,
    )


def show_on_dashboard(request: Request, exc: HTTPException) -> None:
    """A 5xx in the dashboard's live feed with its message and request id, under the caller's
    tenant (unknown: only admins see it)."""
    dashboard = getattr(request.app.state, "dashboard", None)
    server = getattr(request.app.state, "server", None)
    if dashboard is None or server is None:
        return
    who = server.caller(request.scope)
    tenant = who.removeprefix("tenant:") if who.startswith("tenant:") else None
    if tenant is None and not server.auth.enabled:
        tenant = "default"  # every caller's tenant with auth off (auth.DEFAULT_TENANT)
    message = f"{exc.status_code} {getattr(exc, 'code', '')}: {exc.detail}"
    dashboard.tracker.record_error(
        tenant, message, request.scope.get("state", {}).get("request_id")
    )


def install(app: FastAPI) -> None:
    """The handlers that make every error an OpenAI-style body."""

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code >= 500:
            log_server_error(request, exc)
            show_on_dashboard(request, exc)
        if isinstance(exc, ApiError):
            return exc.response()
        message = exc.detail if isinstance(exc.detail, str) else "HTTP error"
        return ApiError(exc.status_code, message, headers=dict(exc.headers or {})).response()

    @app.exception_handler(RequestValidationError)
    async def _request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(list(exc.errors())).response()

    @app.exception_handler(ValidationError)
    async def _model_invalid(request: Request, exc: ValidationError) -> JSONResponse:
        return validation_error(list(exc.errors())).response()

    @app.exception_handler(StoreBusy)
    async def _busy(request: Request, exc: StoreBusy) -> JSONResponse:
        log.warning("store busy on %s %s: %s", request.method, request.url.path, exc)
        return store_busy().response()
