"""``serve(...)``: the engine (models and store as configured), the app, and uvicorn in the foreground."""

from __future__ import annotations

import logging
from pathlib import Path

from ..engine import EngineConfig, MiniCache
from .app import create_app
from .config import ServerConfig, load_server_config

log = logging.getLogger("minicache.server")


def serve(host: str = "127.0.0.1", port: int = 8000, store: str = "minicache.db",
          config: ServerConfig | str | Path | None = None, *, engine: MiniCache | None = None,
          engine_config: EngineConfig | None = None, log_level: str = "info") -> None:
    """Serve until interrupted. ``store`` is a SQLite path (or a DSN the store layer accepts);
    ``config`` a :class:`ServerConfig` or the path of its TOML file (``MINICACHE_SERVER_*`` env vars
    apply either way when a path or None is given). Without ``engine``, the target and small models
    are the configured ones (``minicache config``: embedded GGUF models by default), and the engine
    is closed on exit."""
    import uvicorn

    server_config = config if isinstance(config, ServerConfig) else load_server_config(config)
    own = engine is None
    if engine is None:
        engine = MiniCache.local(store, config=engine_config)
    try:
        app = create_app(engine, server_config)
        log.info("minicache server on http://%s:%d (store %s, %s)", host, port, store,
                 f"{len(server_config.api_keys)} API key(s)" if server_config.auth_enabled else "auth off")
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level,
                                      timeout_graceful_shutdown=30)).run()
    finally:
        if own:
            engine.close()
