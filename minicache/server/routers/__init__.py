"""The HTTP endpoints, one router per family: ``/v1`` (OpenAI-compatible and native solving),
``/admin`` (entries, groups, export/import, freeze, stats) and operations (``/health``, ``/metrics``).
Each router only parses (with :mod:`..protocol`'s models), authenticates (:mod:`..serving`'s
dependencies) and formats; the serving logic and the engine do the rest."""

from minicache.server.routers.admin import router as admin_router
from minicache.server.routers.ops import router as ops_router
from minicache.server.routers.v1 import router as v1_router

__all__ = ["admin_router", "ops_router", "v1_router"]
