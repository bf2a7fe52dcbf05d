"""Request ids, and log lines a request cannot forge.

Every response carries ``X-Request-Id``: the client's own (when it is a short token of letters,
digits, ``.``, ``_`` and ``-``) or a new one. The id is kept in a context variable for the request's
duration, so every ``minicache.server`` log line written while serving it ends with
``[request <id>]``: an operator who gets a 5xx's id from a user finds its cause in the log.

Log values that come from a request (paths, tenants, ids) are written escaped: a control character
(``%0a`` in a path) is shown as ``\\x0a`` instead of starting a new, forged log line. The filter does
this for every string argument of the server's log calls, so no call can forget it.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import Any

log = logging.getLogger("minicache.server")

HEADER = b"x-request-id"
REQUEST_ID: ContextVar[str | None] = ContextVar("minicache_request_id", default=None)
_CLIENT_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def escaped(value: str) -> str:
    """``value`` with its control characters written as ``\\xNN`` (one log line stays one line)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


class EscapingFilter(logging.Filter):
    """Escapes the string arguments of a record and tags it with the current request's id."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(escaped(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.msg, str) and not record.args:
            record.msg = escaped(record.msg)
        rid = REQUEST_ID.get()
        if rid is not None and not getattr(record, "request_id", None):
            record.request_id = rid
            if isinstance(record.msg, str):
                record.msg += f" [request {rid}]"
        return True


def install_log_filter(logger: logging.Logger = log) -> None:
    """Add the filter once (apps made in one process share the logger)."""
    if not any(isinstance(f, EscapingFilter) for f in logger.filters):
        logger.addFilter(EscapingFilter())


def request_id(scope: dict[str, Any]) -> str:
    """The client's id when it is a plain token, else a new one."""
    sent = dict(scope.get("headers") or []).get(HEADER, b"").decode("latin-1")
    return sent if _CLIENT_ID.fullmatch(sent) else uuid.uuid4().hex


class RequestIdMiddleware:
    """Outermost layer: gives the request its id, puts it on the response, and logs every 5xx
    answer with the request's method and path (the handler that raised it logs its cause)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope)
        scope.setdefault("state", {})["request_id"] = rid
        token = REQUEST_ID.set(rid)

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != HEADER]
                message = {**message, "headers": [*headers, (HEADER, rid.encode("latin-1"))]}
                if message["status"] >= 500:
                    log.warning(
                        "%s %s answered %d",
                        scope.get("method", ""),
                        scope.get("path", ""),
                        message["status"],
                    )
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
