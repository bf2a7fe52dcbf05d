"""The dashboard's door: the login form, logging in and out, and the static files every page loads.

A wrong key counts against the client's failed-authentication throttle like a wrong API key. The
key a login accepts is kept in an HttpOnly, SameSite=Strict cookie scoped to ``/dashboard``; only a
dashboard path may follow a login (no open redirect).
"""

from __future__ import annotations

import posixpath

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from minicache.server.dashboard.access import form
from minicache.server.dashboard.state import COOKIE, PREFIX, STATIC_TYPES, dashboard_of
from minicache.server.errors import ApiError

router = APIRouter(prefix=PREFIX, include_in_schema=False)


@router.get("/login")
async def login_form(request: Request) -> Response:
    return dashboard_of(request).render(
        request,
        "login.html",
        None,
        message=request.query_params.get("message", ""),
        next=safe_next(request.query_params.get("next")),
    )


@router.post("/login")
async def login(request: Request) -> Response:
    dash = dashboard_of(request)
    server = dash.server
    data = await form(request)
    key, next_ = data.get("key", "").strip(), safe_next(data.get("next"))
    client = request.client.host if request.client else "unknown"
    try:
        server.failed_auth.check(client)
    except ApiError as exc:
        return dash.render(request, "login.html", None, 429, message=exc.message, next=next_)
    if dash.viewer_for(key) is None:
        server.failed_auth.failed(client)
        hint = (
            ""
            if server.auth.enabled or server.auth.has_admin_keys
            else " No admin key is configured: add admin_keys to the server's config to use the dashboard."
        )
        return dash.render(
            request, "login.html", None, 401, message="Unknown key." + hint, next=next_
        )
    response = RedirectResponse(next_, status_code=303)
    response.set_cookie(
        COOKIE,
        key,
        httponly=True,
        samesite="strict",
        path=PREFIX,
        secure=request.url.scheme == "https",
        max_age=12 * 3600,
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    response = RedirectResponse(PREFIX + "/login", status_code=303)
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


@router.get("/static/{name}")
async def static_file(request: Request, name: str) -> Response:
    static = dashboard_of(request).static
    if name not in static:
        return Response("not found", status_code=404, media_type="text/plain")
    return Response(
        static[name], media_type=STATIC_TYPES[name], headers={"Cache-Control": "max-age=300"}
    )


def safe_next(value: str | None) -> str:
    """Only a dashboard path may follow a login (no open redirect): the path is normalised first, so
    ``/dashboard/../../evil`` (which a browser resolves to ``/evil``) is refused, as are encoded dots
    and slashes, backslashes and control characters."""
    if not value or "\\" in value or any(ord(c) < 32 for c in value):
        return PREFIX
    path, sep, query = value.partition("?")
    if "%" in path:
        return PREFIX
    normal = posixpath.normpath(path)
    if (
        not path.startswith("/")
        or path.startswith("//")
        or normal != path.rstrip("/")
        or not (normal == PREFIX or normal.startswith(PREFIX + "/"))
    ):
        return PREFIX
    return normal + sep + query
