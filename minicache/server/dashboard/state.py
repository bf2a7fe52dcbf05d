"""What every dashboard page shares, one :class:`Dashboard` per app on ``app.state.dashboard``.

The handlers are module-level functions (like :mod:`minicache.server.routers`'), so what they share
lives here rather than in a closure: the server's state (engine, auth, metrics, known tenants), the
sampler behind the charts and the live feed, the templates and the static files. ``create_app``
makes it; :func:`dashboard_of` hands it to a handler.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from fastapi import Request
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse

from minicache.server.auth import DEFAULT_TENANT
from minicache.server.dashboard import views
from minicache.server.dashboard.tracker import StoredTenants, Tracker
from minicache.server.errors import ApiError

if TYPE_CHECKING:
    from minicache.server.serving import ServerState

COOKIE = "minicache_dashboard"
PREFIX = "/dashboard"
STATIC_TYPES = {
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


@dataclass
class Dashboard:
    """The app's shared state as the dashboard sees it: its engine, auth, metrics and the tenants it
    knows (an admin picks among those, or names another with ``?tenant=``)."""

    server: ServerState
    tracker: Tracker
    env: Environment
    static: dict[str, bytes]

    @classmethod
    def create(cls, server: ServerState) -> Dashboard:
        tracker = Tracker(
            server.engine,
            functools.partial(known_tenants, server, StoredTenants(server.engine.store.tenants)),
            functools.partial(views.saved_tokens, server.metrics),
        )
        try:
            tracker.sample()  # the baseline: the chart counts what happens from now on
        except Exception:  # noqa: BLE001 - a store that is down now must not stop the app from starting
            pass
        static = {
            name: (resources.files(__package__) / "static" / name).read_bytes()
            for name in STATIC_TYPES
        }
        static["dashboard.css"] += b"\n/* Pygments */\n" + views.HIGHLIGHT_CSS.encode()
        return cls(server, tracker, _environment(), static)

    def render(
        self,
        request: Request,
        template: str,
        viewer: Viewer | None,
        code: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        tenants = self.tenants() if viewer is not None and viewer.admin else None
        html = self.env.get_template(template).render(
            viewer=viewer, prefix=PREFIX, path=request.url.path, tenants=tenants, **context
        )
        return HTMLResponse(html, status_code=code, headers={"Cache-Control": "no-store"})

    def tenants(self) -> list[str]:
        """The tenants an admin picks among (sorted): :func:`known_tenants` as of the sampler's
        last sample, so that a page's handler does not wait on the store for them."""
        return sorted(set(self.server.tenants()) | set(self.tracker.sampled_tenants))

    def busiest_tenant(self) -> str:
        """Where an admin lands: the tenant with the most requests, not an empty "default" (which
        no request reaches once API keys are configured). Blocks: reads each tenant's counters."""
        best, most = DEFAULT_TENANT, 0
        for tenant in self.tenants():
            n = self.server.engine.store.counters(tenant).get("requests", 0)
            if n > most:
                best, most = tenant, n
        return best

    def viewer_for(self, key: str) -> Viewer | None:
        """The viewer a key makes, or None. With auth off only admin keys log in (anyone is "default")."""
        auth = self.server.auth
        try:
            who = auth.authenticate(f"Bearer {key}", "dashboard") if key else None
        except ApiError:
            return None
        if who is None or (not auth.enabled and not who.admin):
            return None
        return Viewer(who.tenant, who.admin)


def known_tenants(server: ServerState, stored: Callable[[], Iterable[str]]) -> list[str]:
    """Every tenant with data in the store (those of earlier runs too: ``stored``, read at most once
    a minute), every tenant an API key maps to, and those this server has served, sorted."""
    return sorted(set(server.tenants()) | set(stored()))


def dashboard_of(request: Request) -> Dashboard:
    return request.app.state.dashboard


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """Sample while the server runs (the first page view starts it too, for apps run without a lifespan)."""
    tracker = app.state.dashboard.tracker
    tracker.start()
    try:
        yield
    finally:
        tracker.stop()


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
