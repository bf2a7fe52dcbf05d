"""Request bodies parsed as strict, bounded JSON before any model sees them.

Python's ``json`` accepts what the JSON standard does not (``NaN``, ``Infinity``, lone surrogate
escapes such as ``"\\ud800"``) and recurses once per nesting level, so a body nested 5,000 levels
deep raises ``RecursionError``, and one nested 900 levels passes here only to fail later. Each of
those is answered here with a 400 ``invalid_json`` instead, in one pass over the parsed value.
:class:`GuardedRoute` makes FastAPI read every JSON body of a router through :func:`loads`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from minicache.server.errors import ApiError

MAX_DEPTH = 64
_SURROGATE = re.compile(
    "[\ud800-\udfff]"
)  # a valid pair is decoded into one character, so any left is lone


def _invalid(message: str) -> ApiError:
    return ApiError(400, f"The request body is not valid JSON: {message}", code="invalid_json")


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(raw: bytes) -> Any:
    """The JSON value in ``raw``, or a 400 ``invalid_json`` that says what is wrong with it."""
    if not raw.strip():
        raise ApiError(400, "The request body is empty; expected JSON.", code="invalid_json")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(f"not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise _invalid(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, integers with thousands of digits
        raise _invalid(str(exc)[:200]) from None
    check(value)
    return value


def check(value: Any) -> None:
    """Depth at most :data:`MAX_DEPTH`, and no lone surrogate in any string or key (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise _invalid(
                    "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text"
                )
        elif isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise _invalid(f"nested more than {MAX_DEPTH} levels deep")
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)


class GuardedRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class GuardedRoute(APIRoute):
    """An ``APIRoute`` whose JSON bodies are read by :func:`loads`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            return await handler(GuardedRequest(request.scope, request.receive))

        return guarded
