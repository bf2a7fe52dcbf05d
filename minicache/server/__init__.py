"""MiniCache as an OpenAI-compatible HTTP service (FastAPI + uvicorn).

``create_app(engine, config)`` builds the app around a :class:`~minicache.engine.MiniCache`;
``serve(host, port, store, config)`` runs it with the configured models; ``ServerConfig`` (or
``load_server_config(path)``) holds API keys, admin keys and limits.
"""

from minicache.server.app import create_app
from minicache.server.config import ServerConfig, load_server_config
from minicache.server.runner import serve

__all__ = ["create_app", "ServerConfig", "load_server_config", "serve"]
