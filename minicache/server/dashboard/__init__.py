"""The operators' dashboard at ``/dashboard``: overview, groups, entries and live events (see docs/dashboard.md).

``dashboard_router(engine, config, metrics, tenants)`` returns the FastAPI router ``create_app``
includes; templates and static files ship inside this package (nothing is fetched from a CDN).
"""

from minicache.server.dashboard.routes import dashboard_router

__all__ = ["dashboard_router"]
