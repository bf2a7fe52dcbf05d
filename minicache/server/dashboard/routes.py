"""``dashboard_router``: the operators' web pages under ``/dashboard``.

Who may look: the API keys the service already knows (``server.auth``). An admin key sees every
tenant (``?tenant=``) and may act (invalidate, delete, freeze builds); a tenant's key sees its own
tenant only, read-only, and gets 403 for any other tenant's page; with auth off only admin keys log
in, as only they open the admin endpoints. The key is typed into a login form and kept in an
HttpOnly, SameSite=Strict cookie scoped to ``/dashboard``, never in a URL; wrong keys count against
the client's failed-authentication throttle like wrong API keys. Actions are POST forms reached
through a confirmation page.
Pages are server-rendered (Jinja2); the live feed polls a fragment with a few lines of plain JS.

The handlers are module-level: the pages here, the login and static files in :mod:`.login`, the
actions in :mod:`.actions`. What they share is the app's :class:`~.state.Dashboard`
(``app.state.dashboard``), which ``create_app`` makes.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from minicache.errors import Denied
from minicache.server.dashboard import actions, login, views
from minicache.server.dashboard.access import number, page, run
from minicache.server.dashboard.state import COOKIE, PREFIX, Dashboard, Viewer, lifespan

__all__ = ["COOKIE", "PREFIX", "dashboard_router"]

pages = APIRouter(prefix=PREFIX, include_in_schema=False)


@pages.get("")
@page
async def overview(request: Request, dash: Dashboard, viewer: Viewer, tenant: str) -> Response:
    unit = request.query_params.get("unit", "minute")
    if unit not in ("minute", "hour"):
        raise Denied(400, "unit must be minute or hour")
    server = dash.server
    everyone = dash.tenants() if viewer.admin else None
    data = await run(
        views.overview, server.engine, server.metrics, dash.tracker, tenant, everyone, unit
    )
    return dash.render(request, "overview.html", viewer, tenant=tenant, **data)


@pages.get("/groups")
@page
async def groups(request: Request, dash: Dashboard, viewer: Viewer, tenant: str) -> Response:
    data = await run(views.groups_page, dash.server.engine, tenant, number(request, "page", 1))
    return dash.render(request, "groups.html", viewer, tenant=tenant, **data)


@pages.get("/entries/{entry_id}")
@page
async def entry(
    request: Request, dash: Dashboard, viewer: Viewer, tenant: str, entry_id: str
) -> Response:
    data = await run(views.entry_page, dash.server.engine, tenant, entry_id)
    if data is None:
        raise Denied(404, f"Tenant {tenant!r} has no entry {entry_id!r}.")
    return dash.render(request, "entry.html", viewer, tenant=tenant, **data)


@pages.get("/events")
@page
async def events(request: Request, dash: Dashboard, viewer: Viewer, tenant: str) -> Response:
    await run(dash.tracker.sample)
    rows = dash.tracker.feed(viewer.allowed())
    return dash.render(
        request,
        "events.html",
        viewer,
        tenant=tenant,
        events=rows,
        last=rows[0].seq if rows else 0,
    )


@pages.get("/events/feed")
@page
async def events_feed(request: Request, dash: Dashboard, viewer: Viewer, tenant: str) -> Response:
    after = number(request, "after", 0)
    await run(dash.tracker.sample)
    rows = dash.tracker.feed(viewer.allowed(), after)
    html = dash.env.get_template("_event_rows.html").render(events=rows, prefix=PREFIX)
    return JSONResponse(
        {"last": rows[0].seq if rows else after, "html": html},
        headers={"Cache-Control": "no-store"},
    )


# FastAPI tries routes in the order they are included: the login and static files, the pages, the
# actions.
dashboard_router = APIRouter(include_in_schema=False, lifespan=lifespan)
for _router in (login.router, pages, actions.router):
    dashboard_router.include_router(_router)
