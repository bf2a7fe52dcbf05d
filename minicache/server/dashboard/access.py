"""Who is looking, and at which tenant: the viewer a page's cookie makes, the tenant it may open, and
:func:`page`, which resolves both before a page's handler runs.

A key is kept in an HttpOnly cookie, never in a URL. A refusal is :class:`~minicache.errors.Denied`:
401 sends the browser to the login form (with the page to come back to), any other status renders
the error page.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode

import anyio.to_thread
from fastapi import Request
from starlette.responses import RedirectResponse, Response

from minicache.errors import Denied
from minicache.server.auth import DEFAULT_TENANT
from minicache.server.dashboard.state import COOKIE, PREFIX, Dashboard, Viewer, dashboard_of

# What a page handler receives besides its request and path parameters (not read by FastAPI).
_RESOLVED = ("dash", "viewer", "tenant")


def viewer_of(dash: Dashboard, request: Request) -> Viewer:
    key = request.cookies.get(COOKIE)
    viewer = dash.viewer_for(key) if key else None
    if viewer is None:
        raise Denied(401, "That key is no longer valid; log in again." if key else "")
    return viewer


def tenant_for(request: Request, viewer: Viewer, busiest: str | None = None) -> str:
    """The tenant a page shows: the one asked for (``?tenant=``), else the key's own, else (an
    admin-only key) ``busiest``."""
    asked = request.query_params.get("tenant")
    own = viewer.tenant or busiest or DEFAULT_TENANT
    if asked is None:
        return own
    if not asked or len(asked) > 200:
        raise Denied(400, "tenant must be a non-empty string of at most 200 characters")
    if not viewer.admin and asked != own:
        raise Denied(
            403,
            f"This key belongs to tenant {own!r}; it cannot open the pages of tenant {asked!r}.",
        )
    return asked


def page(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Resolve the dashboard, viewer and tenant, render ``Denied`` as a page (or the login form)."""

    async def wrapped(request: Request, **kwargs: Any) -> Response:
        dash = dashboard_of(request)
        viewer = None
        try:
            check_values(request, kwargs)
            viewer = viewer_of(dash, request)
            dash.tracker.start()
            busiest = None
            if viewer.tenant is None and "tenant" not in request.query_params:
                busiest = await run(dash.busiest_tenant)
            tenant = tenant_for(request, viewer, busiest)
            return await handler(request, dash, viewer, tenant, **kwargs)
        except Denied as exc:
            if exc.status == 401:
                target = (
                    PREFIX
                    + "/login?"
                    + urlencode({"next": request.url.path, "message": exc.message})
                )
                return RedirectResponse(target, status_code=303)
            return dash.render(request, "error.html", viewer, exc.status, message=exc.message)

    # FastAPI reads parameters from the signature: the request and the path's, not what page resolves.
    signature = inspect.signature(handler)
    wrapped.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for name, p in signature.parameters.items() if name not in _RESOLVED]
    )
    wrapped.__name__ = handler.__name__
    return wrapped


def check_values(request: Request, path_params: dict[str, Any]) -> None:
    """Refuse what no page can mean before any handler reads it: a query parameter given twice
    (which one would win is a guess), and a NUL or other control character in a query value or a
    path's id (no tenant or id holds one, and PostgreSQL refuses NUL in text with an error)."""
    names = [name for name, _ in request.query_params.multi_items()]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise Denied(400, f"query parameter {repeated[0]!r} is given more than once")
    values = [v for _, v in request.query_params.multi_items()]
    values += [v for v in path_params.values() if isinstance(v, str)]
    if any(ord(c) < 32 or ord(c) == 127 for v in values for c in v):
        raise Denied(400, "query values and ids may not hold control characters")


def number(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name, str(default))
    # ASCII digits only: "²".isdigit() is true, but int("²") raises.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12:
        raise Denied(400, f"{name} must be a non-negative integer")
    return int(raw)


async def form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}


async def run(fn: Callable[..., Any], *args: Any) -> Any:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))
