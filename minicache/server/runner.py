"""``serve(...)``: the engine (models and store as configured), the app, and uvicorn in the foreground."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from pathlib import Path

from minicache.config.models import load_engine_config
from minicache.engine import EngineConfig, MiniCache
from minicache.errors import ConfigError
from minicache.server.app import create_app
from minicache.server.config import ServerConfig, load_server_config, server_file_settings
from minicache.server.connections import uvicorn_options

log = logging.getLogger("minicache.server")


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, config: ServerConfig, insecure_no_auth: bool) -> None:
    """Refuse to serve without API keys on an address others can reach, unless told so explicitly:
    without keys every caller is tenant "default" and may spend the target model's time."""
    if config.auth_enabled or is_loopback(host):
        return
    if not insecure_no_auth:
        raise ConfigError(
            f"refusing to serve on {host} without API keys: anyone who can reach it could use it. "
            "Configure api_keys (--config or MINICACHE_SERVER_API_KEYS), serve on 127.0.0.1, "
            "or pass --insecure-no-auth to accept that."
        )
    log.warning(
        "SERVING WITHOUT AUTHENTICATION on %s (--insecure-no-auth): every caller is tenant 'default'",
        host,
    )


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    store: str = "minicache.db",
    config: ServerConfig | str | Path | None = None,
    *,
    engine: MiniCache | None = None,
    engine_config: EngineConfig | None = None,
    engine_options: Sequence[str] = (),
    log_level: str = "info",
    insecure_no_auth: bool = False,
) -> None:
    """Serve until interrupted. ``store`` is a SQLite path (or a DSN the store layer accepts);
    ``config`` a :class:`ServerConfig` or the path of its TOML file (``MINICACHE_SERVER_*`` env vars
    apply either way when a path or None is given). Without ``engine``, the target and small models
    are the configured ones (``minicache config``: embedded GGUF models by default), and the engine
    is closed on exit. Without API keys it serves only on a loopback address, unless
    ``insecure_no_auth`` (the CLI's ``--insecure-no-auth``) says otherwise; the admin endpoints
    always need an admin key.

    Without ``engine_config``, the engine's options come from the configuration layer: the models
    config file's ``[engine]``, then the ``config`` file's, then ``MINICACHE_ENGINE_*``, then
    ``engine_options`` (``KEY=VALUE``, the CLI's ``--engine-option``); all are checked before any
    model loads.

    uvicorn runs with :mod:`.connections`' protocol (header and body read time, connections per
    address and in all) and without its own ``X-Forwarded-For`` handling (:mod:`.forwarded` trusts
    only ``trusted_proxies``).

    When uvicorn starts the app, it loads the routing index of every tenant it serves in the
    background (:mod:`.warmup`); ``/health`` answers 503 "warming" until then."""
    import uvicorn

    server_config = config if isinstance(config, ServerConfig) else load_server_config(config)
    if engine is None and engine_config is None:
        path = None if isinstance(config, ServerConfig) else config
        from_file = server_file_settings(path) if path is not None else []
        engine_config = load_engine_config(extra=from_file, options=engine_options)
    check_exposure(host, server_config, insecure_no_auth)
    own = engine is None
    if engine is None:
        engine = MiniCache.local(store, config=engine_config)
    try:
        app = create_app(engine, server_config)
        log.info(
            "minicache server on http://%s:%d (store %s, %s)",
            host,
            port,
            store,
            f"{len(server_config.api_keys)} API key(s)"
            if server_config.auth_enabled
            else "auth off",
        )
        uvicorn.Server(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level=log_level,
                timeout_graceful_shutdown=30,
                **uvicorn_options(server_config),
            )
        ).run()
    finally:
        if own:
            engine.close()
