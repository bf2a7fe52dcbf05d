"""``dashboard_router(server)``: the operators' web pages under ``/dashboard``.

Who may look: the API keys the service already knows (``server.auth``). An admin key sees every
tenant (``?tenant=``) and may act (invalidate, delete, freeze builds); a tenant's key sees its own
tenant only, read-only, and gets 403 for any other tenant's page; with auth off only admin keys log
in, as only they open the admin endpoints. The key is typed into a login form and kept in an
HttpOnly, SameSite=Strict cookie scoped to ``/dashboard``, never in a URL; wrong keys count against
the client's failed-authentication throttle like wrong API keys. Actions are POST forms reached
through a confirmation page.
Pages are server-rendered (Jinja2); the live feed polls a fragment with a few lines of plain JS.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

import anyio.to_thread
from fastapi import APIRouter, Request
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from minicache.errors import Denied  # re-exported
from minicache.server.auth import DEFAULT_TENANT
from minicache.server.dashboard import views
from minicache.server.dashboard.tracker import Tracker
from minicache.server.errors import ApiError

if TYPE_CHECKING:
    from minicache.server.serving import ServerState

COOKIE = "minicache_dashboard"
PREFIX = "/dashboard"
_STATIC = {
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
}


@dataclass(frozen=True)
class Viewer:
    tenant: str | None  # the key's own tenant (None for an admin-only key)
    admin: bool

    def allowed(self) -> set[str] | None:
        """Tenants this viewer may see; None: all of them."""
        return None if self.admin else {self.tenant or DEFAULT_TENANT}


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("minicache.server.dashboard", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda x: f"{100 * x:.1f}%"
    env.filters["num"] = lambda x: f"{int(x):,}" if float(x).is_integer() else f"{x:,.2f}"
    env.filters["ms"] = lambda s: (
        "∞" if s == float("inf") else f"{1000 * s:,.0f} ms" if s < 10 else f"{s:,.1f} s"
    )
    env.filters["when"] = lambda t: (
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t)) if t else "-"
    )
    env.filters["tojson_pretty"] = lambda v: json.dumps(
        v, indent=2, sort_keys=True, default=str, ensure_ascii=False
    )
    return env


def dashboard_router(server: ServerState) -> APIRouter:
    """The dashboard's routes over the app's shared state: its engine, auth, metrics and the tenants
    it knows (an admin picks among those, or names another with ``?tenant=``)."""
    engine, auth, metrics, known = server.engine, server.auth, server.metrics, server.tenants
    tracker = Tracker(engine, known, functools.partial(views.saved_tokens, metrics))
    try:
        tracker.sample()  # the baseline: the chart counts what happens from now on
    except Exception:  # noqa: BLE001 - a store that is down now must not stop the app from starting
        pass
    env = _environment()
    static = {
        name: (resources.files(__package__) / "static" / name).read_bytes() for name in _STATIC
    }
    static["dashboard.css"] += b"\n/* Pygments */\n" + views.HIGHLIGHT_CSS.encode()

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        """Sample while the server runs (the first page view starts it too, for apps run without a lifespan)."""
        tracker.start()
        try:
            yield
        finally:
            tracker.stop()

    router = APIRouter(prefix=PREFIX, include_in_schema=False, lifespan=lifespan)

    def render(
        request: Request, template: str, viewer: Viewer | None, code: int = 200, **context: Any
    ) -> HTMLResponse:
        tenants = sorted(set(known())) if viewer is not None and viewer.admin else None
        html = env.get_template(template).render(
            viewer=viewer, prefix=PREFIX, path=request.url.path, tenants=tenants, **context
        )
        return HTMLResponse(html, status_code=code, headers={"Cache-Control": "no-store"})

    def viewer_for(key: str) -> Viewer | None:
        """The viewer a key makes, or None. With auth off only admin keys log in (anyone is "default")."""
        try:
            who = auth.authenticate(f"Bearer {key}", "dashboard") if key else None
        except ApiError:
            return None
        if who is None or (not auth.enabled and not who.admin):
            return None
        return Viewer(who.tenant, who.admin)

    def viewer_of(request: Request) -> Viewer:
        key = request.cookies.get(COOKIE)
        viewer = viewer_for(key) if key else None
        if viewer is None:
            raise Denied(401, "That key is no longer valid; log in again." if key else "")
        return viewer

    def tenant_for(request: Request, viewer: Viewer) -> str:
        asked = request.query_params.get("tenant")
        own = viewer.tenant or DEFAULT_TENANT
        if asked is None:
            return own
        if not asked or len(asked) > 200:
            raise Denied(400, "tenant must be a non-empty string of at most 200 characters")
        if not viewer.admin and asked != own:
            raise Denied(
                403, f"This key belongs to tenant {own!r}; it cannot open tenant {asked!r}'s pages."
            )
        return asked

    def page(handler: Callable[..., Any]) -> Callable[..., Any]:
        """Resolve the viewer and tenant, render ``Denied`` as a page (or the login form)."""

        async def wrapped(request: Request, **kwargs: Any) -> Response:
            viewer = None
            try:
                viewer = viewer_of(request)
                tracker.start()
                return await handler(request, viewer, tenant_for(request, viewer), **kwargs)
            except Denied as exc:
                if exc.status == 401:
                    target = (
                        PREFIX
                        + "/login?"
                        + urlencode({"next": request.url.path, "message": exc.message})
                    )
                    return RedirectResponse(target, status_code=303)
                return render(request, "error.html", viewer, exc.status, message=exc.message)

        # FastAPI reads parameters from the signature: the request and the path's, not viewer/tenant.
        signature = inspect.signature(handler)
        wrapped.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[
                p for name, p in signature.parameters.items() if name not in ("viewer", "tenant")
            ]
        )
        wrapped.__name__ = handler.__name__
        return wrapped

    def number(request: Request, name: str, default: int) -> int:
        raw = request.query_params.get(name, str(default))
        if not raw.isdigit() or len(raw) > 12:
            raise Denied(400, f"{name} must be a non-negative integer")
        return int(raw)

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args))

    async def form(request: Request) -> dict[str, str]:
        body = (await request.body()).decode("utf-8", "replace")
        return {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}

    # -- login ----------------------------------------------------------------------------------
    @router.get("/login")
    async def login_form(request: Request) -> Response:
        return render(
            request,
            "login.html",
            None,
            message=request.query_params.get("message", ""),
            next=_safe_next(request.query_params.get("next")),
        )

    @router.post("/login")
    async def login(request: Request) -> Response:
        data = await form(request)
        key, next_ = data.get("key", "").strip(), _safe_next(data.get("next"))
        client = request.client.host if request.client else "unknown"
        try:
            server.failed_auth.check(client)
        except ApiError as exc:
            return render(request, "login.html", None, 429, message=exc.message, next=next_)
        if viewer_for(key) is None:
            server.failed_auth.failed(client)
            hint = (
                ""
                if auth.enabled or auth.has_admin_keys
                else " No admin key is configured: add admin_keys to the server's config to use the dashboard."
            )
            return render(
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
    async def static_file(name: str) -> Response:
        if name not in static:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(
            static[name], media_type=_STATIC[name], headers={"Cache-Control": "max-age=300"}
        )

    # -- pages ----------------------------------------------------------------------------------
    @router.get("")
    @page
    async def overview(request: Request, viewer: Viewer, tenant: str) -> Response:
        unit = request.query_params.get("unit", "minute")
        if unit not in ("minute", "hour"):
            raise Denied(400, "unit must be minute or hour")
        everyone = sorted(set(known())) if viewer.admin else None
        data = await run(views.overview, engine, metrics, tracker, tenant, everyone, unit)
        return render(request, "overview.html", viewer, tenant=tenant, **data)

    @router.get("/groups")
    @page
    async def groups(request: Request, viewer: Viewer, tenant: str) -> Response:
        data = await run(views.groups_page, engine, tenant, number(request, "page", 1))
        return render(request, "groups.html", viewer, tenant=tenant, **data)

    @router.get("/entries/{entry_id}")
    @page
    async def entry(request: Request, viewer: Viewer, tenant: str, entry_id: str) -> Response:
        data = await run(views.entry_page, engine, tenant, entry_id)
        if data is None:
            raise Denied(404, f"Tenant {tenant!r} has no entry {entry_id!r}.")
        return render(request, "entry.html", viewer, tenant=tenant, **data)

    @router.get("/events")
    @page
    async def events(request: Request, viewer: Viewer, tenant: str) -> Response:
        await run(tracker.sample)
        rows = tracker.feed(viewer.allowed())
        return render(
            request,
            "events.html",
            viewer,
            tenant=tenant,
            events=rows,
            last=rows[0].seq if rows else 0,
        )

    @router.get("/events/feed")
    @page
    async def events_feed(request: Request, viewer: Viewer, tenant: str) -> Response:
        after = number(request, "after", 0)
        await run(tracker.sample)
        rows = tracker.feed(viewer.allowed(), after)
        html = env.get_template("_event_rows.html").render(events=rows, prefix=PREFIX)
        return JSONResponse(
            {"last": rows[0].seq if rows else after, "html": html},
            headers={"Cache-Control": "no-store"},
        )

    # -- actions (admin; a confirmation page first) ----------------------------------------------
    actions = {
        "invalidate": "Evict this entry: its group's requests go to the target again until a new build.",
        "delete": "Delete this entry from the store for good (its group and examples stay).",
        "freeze": "Stop all new builds, for every tenant (entries keep serving).",
        "unfreeze": "Allow builds again, for every tenant.",
    }

    def may(viewer: Viewer, action: str) -> None:
        if action not in actions:
            raise Denied(404, f"No action {action!r}.")
        if not viewer.admin:
            raise Denied(403, f"Only an admin key may {action}.")

    def confirmation(
        request: Request,
        viewer: Viewer,
        tenant: str,
        action: str,
        target: str,
        post: str,
        back: str,
        **extra: str,
    ) -> Response:
        return render(
            request,
            "confirm.html",
            viewer,
            tenant=tenant,
            action=action,
            explain=actions[action],
            target=target,
            post=_url(post, tenant),
            back=_url(back, tenant),
            extra=extra,
        )

    @router.get("/entries/{entry_id}/{action}")
    @page
    async def confirm(
        request: Request, viewer: Viewer, tenant: str, entry_id: str, action: str
    ) -> Response:
        may(viewer, action if action in ("invalidate", "delete") else "?")
        return confirmation(
            request,
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
        request: Request, viewer: Viewer, tenant: str, entry_id: str, action: str
    ) -> Response:
        may(viewer, action if action in ("invalidate", "delete") else "?")
        if (await form(request)).get("confirm") != "yes":
            raise Denied(400, "Not confirmed: nothing changed.")
        if action == "invalidate":
            done = await run(functools.partial(engine.invalidate, entry=entry_id, tenant=tenant))
        else:
            done = await run(engine.store.delete_entry, tenant, entry_id)
        if not done:
            which = "active " if action == "invalidate" else ""
            raise Denied(404, f"Tenant {tenant!r} has no {which}entry {entry_id!r}.")
        after = "/groups" if action == "delete" else f"/entries/{entry_id}"
        return RedirectResponse(_url(after, tenant), status_code=303)

    @router.get("/freeze")
    @page
    async def freeze_confirm(request: Request, viewer: Viewer, tenant: str) -> Response:
        action = "unfreeze" if engine.config.frozen else "freeze"
        may(viewer, action)
        return confirmation(
            request,
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
    async def freeze(request: Request, viewer: Viewer, tenant: str) -> Response:
        may(viewer, "freeze")
        data = await form(request)
        if data.get("confirm") != "yes" or data.get("frozen") not in ("0", "1"):
            raise Denied(400, "Not confirmed: nothing changed.")
        engine.config.frozen = data["frozen"] == "1"
        return RedirectResponse(_url("", tenant), status_code=303)

    router.tracker = tracker  # type: ignore[attr-defined]  # for tests and shutdown
    return router


def _url(path: str, tenant: str) -> str:
    return f"{PREFIX}{path}?{urlencode({'tenant': tenant})}"


def _safe_next(value: str | None) -> str:
    """Only a dashboard path may follow a login (no open redirect)."""
    if value and value.startswith(PREFIX) and not value.startswith("//") and "\\" not in value:
        return value
    return PREFIX
