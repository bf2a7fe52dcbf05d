"""The operators' dashboard at ``/dashboard``: overview, groups, entries and live events (see docs/dashboard.md).

``create_app`` puts a :class:`Dashboard` (what the pages share) on ``app.state.dashboard`` and
includes ``dashboard_router``; templates and static files ship inside this package (nothing is
fetched from a CDN).
"""

from minicache.server.dashboard.routes import dashboard_router
from minicache.server.dashboard.state import Dashboard

__all__ = ["Dashboard", "dashboard_router"]
