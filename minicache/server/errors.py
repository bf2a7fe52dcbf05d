"""OpenAI-style error responses: ``{"error": {"message", "type", "param", "code"}}``, never a traceback."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse

# status -> (OpenAI error type, default code)
_KINDS = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("not_found_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("upstream_error", "solve_failed"),
    503: ("server_error", "overloaded"),
}


class ApiError(Exception):
    """Raised anywhere in a request; rendered as an OpenAI-style error JSON response."""

    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        kind, default_code = _KINDS.get(status, ("server_error" if status >= 500 else "invalid_request_error",
                                                 "error"))
        self.type = kind
        self.code = code or default_code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)

    def raw(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and body, for middleware that answers without the framework."""
        body = json.dumps(self.body()).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        return self.status, headers, body


async def send_error(send: Any, error: ApiError) -> None:
    status, headers, body = error.raw()
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
