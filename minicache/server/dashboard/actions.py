"""The dashboard's actions, for admin keys only: invalidate or delete an entry, freeze or unfreeze
builds. Each is a POST form reached through a confirmation page that says what it will do; a POST
without ``confirm=yes`` changes nothing."""

from __future__ import annotations

import functools
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from minicache.errors import Denied
from minicache.server.dashboard.access import form, page, run
from minicache.server.dashboard.state import PREFIX, Dashboard, Viewer

router = APIRouter(prefix=PREFIX, include_in_schema=False)

ACTIONS = {
    "invalidate": "Evict this entry: its group's requests go to the target again until a new build.",
    "delete": "Delete this entry from the store for good (its group and examples stay).",
    "freeze": "Stop all new builds, for every tenant (entries keep serving).",
    "unfreeze": "Allow builds again, for every tenant.",
}


def may(viewer: Viewer, action: str) -> None:
    if action not in ACTIONS:
        raise Denied(404, f"No action {action!r}.")
    if not viewer.admin:
        raise Denied(403, f"Only an admin key may {action}.")


def confirmation(
    request: Request,
    dash: Dashboard,
    viewer: Viewer,
    tenant: str,
    action: str,
    target: str,
    post: str,
    back: str,
    **extra: str,
) -> Response:
    return dash.render(
        request,
        "confirm.html",
        viewer,
        tenant=tenant,
        action=action,
        explain=ACTIONS[action],
        target=target,
        post=url(post, tenant),
        back=url(back, tenant),
        extra=extra,
    )


@router.get("/entries/{entry_id}/{action}")
@page
async def confirm(
    request: Request, dash: Dashboard, viewer: Viewer, tenant: str, entry_id: str, action: str
) -> Response:
    may(viewer, action if action in ("invalidate", "delete") else "?")
    return confirmation(
        request,
        dash,
        viewer,
        tenant,
        action,
        f"entry {entry_id}",
        f"/entries/{entry_id}/{action}",
        f"/entries/{entry_id}",
    )


@router.post("/entries/{entry_id}/{action}")
@page
async def act(
    request: Request, dash: Dashboard, viewer: Viewer, tenant: str, entry_id: str, action: str
) -> Response:
    may(viewer, action if action in ("invalidate", "delete") else "?")
    if (await form(request)).get("confirm") != "yes":
        raise Denied(400, "Not confirmed: nothing changed.")
    engine = dash.server.engine
    if action == "invalidate":
        done = await run(functools.partial(engine.invalidate, entry=entry_id, tenant=tenant))
    else:
        done = await run(engine.store.delete_entry, tenant, entry_id)
    if not done:
        which = "active " if action == "invalidate" else ""
        raise Denied(404, f"Tenant {tenant!r} has no {which}entry {entry_id!r}.")
    after = "/groups" if action == "delete" else f"/entries/{entry_id}"
    return RedirectResponse(url(after, tenant), status_code=303)


@router.get("/freeze")
@page
async def freeze_confirm(
    request: Request, dash: Dashboard, viewer: Viewer, tenant: str
) -> Response:
    action = "unfreeze" if dash.server.engine.config.frozen else "freeze"
    may(viewer, action)
    return confirmation(
        request,
        dash,
        viewer,
        tenant,
        action,
        "builds",
        "/freeze",
        "",
        frozen=str(int(action == "freeze")),
    )


@router.post("/freeze")
@page
async def freeze(request: Request, dash: Dashboard, viewer: Viewer, tenant: str) -> Response:
    may(viewer, "freeze")
    data = await form(request)
    if data.get("confirm") != "yes" or data.get("frozen") not in ("0", "1"):
        raise Denied(400, "Not confirmed: nothing changed.")
    dash.server.engine.config.frozen = data["frozen"] == "1"
    return RedirectResponse(url("", tenant), status_code=303)


def url(path: str, tenant: str) -> str:
    return f"{PREFIX}{path}?{urlencode({'tenant': tenant})}"
