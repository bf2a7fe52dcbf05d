"""Server settings: API keys (key -> tenant), admin keys and limits, from a TOML file and env vars.

Read through the one configuration layer (:mod:`minicache.config.settings`): defaults < the file <
environment variables. The file (``minicache serve --config``) may also hold an ``[engine]`` table,
which :func:`minicache.config.models.load_engine_config` reads for the served engine::

    admin_keys = ["sk-admin-..."]
    public_metrics = false           # true: /metrics needs no key even when auth is on
    trusted_proxies = ["10.0.0.5"]   # X-Forwarded-For believed only from these (default: none)

    [api_keys]                       # key = tenant; no keys at all switches auth off
    "sk-team-a-..." = "team-a"
    "sk-team-b-..." = "team-b"

    [limits]
    max_body_bytes = 1048576         # larger request bodies get 413
    rate_per_s = 50.0                # token bucket per API key (0 = unlimited) ...
    burst = 100                      # ... holding at most this many requests; empty -> 429
    max_inflight = 64                # requests in flight per server; more -> 503
    max_inflight_per_caller = 16     # ... and per tenant (per client address without a valid key)
    body_timeout_s = 10.0            # a body not fully received by then -> 408
    auth_fail_per_s = 0.5            # failed authentications allowed per client address: refill ...
    auth_fail_burst = 10             # ... and burst; beyond them -> 429 for that address
    header_timeout_s = 10.0          # request line and headers not complete by then -> 408, closed
    max_connections = 768            # open connections; more -> the oldest still in headers closed
    max_connections_per_address = 128  # ... and per client address (trusted proxies exempt)
    max_inflight_keyless = 8         # in-flight requests without a valid key, apart from tenants'

    [engine]                         # the served engine's options (minicache.engine.EngineConfig)
    audit_rate = 0.05

Environment: ``MINICACHE_SERVER_API_KEYS`` ("key=tenant,key=tenant"), ``MINICACHE_SERVER_ADMIN_KEYS``
("key,key"), ``MINICACHE_SERVER_MAX_BODY_BYTES``, ``MINICACHE_SERVER_RATE_PER_S``,
``MINICACHE_SERVER_BURST``, ``MINICACHE_SERVER_MAX_INFLIGHT``, ``MINICACHE_SERVER_MAX_INFLIGHT_PER_CALLER``,
``MINICACHE_SERVER_BODY_TIMEOUT_S``, ``MINICACHE_SERVER_AUTH_FAIL_PER_S``, ``MINICACHE_SERVER_AUTH_FAIL_BURST``,
``MINICACHE_SERVER_PUBLIC_METRICS`` (true/false, 1/0, yes/no, on/off), ``MINICACHE_SERVER_MODEL_NAME``,
``MINICACHE_SERVER_HEADER_TIMEOUT_S``, ``MINICACHE_SERVER_MAX_CONNECTIONS``,
``MINICACHE_SERVER_MAX_CONNECTIONS_PER_ADDRESS``, ``MINICACHE_SERVER_MAX_INFLIGHT_KEYLESS``,
``MINICACHE_SERVER_TRUSTED_PROXIES`` ("10.0.0.5,10.1.0.0/16").
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated

from pydantic import StringConstraints
from pydantic_core import PydanticCustomError

from minicache.config.settings import (
    Parsed,
    Schema,
    Setting,
    env_settings,
    file_settings,
    read_toml,
    resolve,
)
from minicache.errors import ConfigError
from minicache.server.protocol import check_label

LIMITS: Schema = {
    "max_body_bytes": int,
    "rate_per_s": float,
    "burst": int,
    "max_inflight": int,
    "max_inflight_per_caller": int,
    "body_timeout_s": float,
    "auth_fail_per_s": float,
    "auth_fail_burst": int,
    "header_timeout_s": float,
    "max_connections": int,
    "max_connections_per_address": int,
    "max_inflight_keyless": int,
}


def _api_keys(raw: str) -> dict[str, str]:
    keys = {}
    for item in raw.split(","):
        key, sep, tenant = item.strip().partition("=")
        if not sep:
            raise ValueError("must be 'key=tenant,key=tenant'")
        keys[key.strip()] = tenant.strip()
    return keys


def _key_list(raw: str) -> list[str]:
    return [k.strip() for k in raw.split(",") if k.strip()]


ENV: dict[str, tuple[str, ...] | Parsed] = {
    "MINICACHE_SERVER_API_KEYS": Parsed(("api_keys",), _api_keys),
    "MINICACHE_SERVER_ADMIN_KEYS": Parsed(("admin_keys",), _key_list),
    **{f"MINICACHE_SERVER_{name.upper()}": ("limits", name) for name in LIMITS},
    "MINICACHE_SERVER_PUBLIC_METRICS": ("public_metrics",),
    "MINICACHE_SERVER_MODEL_NAME": ("model_name",),
    "MINICACHE_SERVER_TRUSTED_PROXIES": Parsed(("trusted_proxies",), _key_list),
}


def file_schema() -> Schema:
    """The keys of the server file (the engine is imported lazily: it is only a table's type here)."""
    from minicache.engine import EngineConfig

    return {
        "api_keys": dict[str, str],
        "admin_keys": list[str],
        "public_metrics": bool,
        "model_name": Annotated[str, StringConstraints(min_length=1)],
        "limits": LIMITS,
        "engine": EngineConfig,
        "trusted_proxies": list[str],
    }


@dataclass(frozen=True)
class ServerConfig:
    api_keys: dict[str, str] = field(default_factory=dict)  # API key -> tenant
    admin_keys: frozenset[str] = frozenset()
    max_body_bytes: int = 1 << 20
    rate_per_s: float = 50.0  # per key; 0 switches rate limiting off
    burst: int = 100
    max_inflight: int = 64
    max_inflight_per_caller: int = (
        16  # per tenant, or per client address for requests without a valid key
    )
    body_timeout_s: float = 10.0  # the whole body must arrive within this
    auth_fail_per_s: float = (
        0.5  # failed authentications per client address: refill rate (0 = unthrottled) ...
    )
    auth_fail_burst: int = 10  # ... and bucket size
    public_metrics: bool = False
    model_name: str = "minicache"  # the model name answers carry when a request names none
    header_timeout_s: float = 10.0  # request line and headers must arrive within this -> else 408
    # open connections in all; past it a new one closes the one waiting longest for its headers
    max_connections: int = 768
    # ... and per client address (a trusted proxy's own address is exempt: it carries many clients)
    max_connections_per_address: int = 128
    # requests without a valid key (dashboard pages, unknown paths) share this pool, apart from
    # the keyed tenants' slots, so they can never take the slots a tenant needs
    max_inflight_keyless: int = 8
    # addresses or CIDRs whose X-Forwarded-For is believed; empty: the header is ignored
    trusted_proxies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "api_keys", dict(self.api_keys))
        object.__setattr__(self, "admin_keys", frozenset(self.admin_keys))
        object.__setattr__(self, "trusted_proxies", tuple(self.trusted_proxies))
        validate(self)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_keys)


def validate(config: ServerConfig) -> None:
    for key, tenant in config.api_keys.items():
        if not isinstance(key, str) or len(key) < 8 or any(c.isspace() for c in key):
            raise ConfigError(
                "api_keys: every key must be a string of at least 8 characters without spaces"
            )
        try:
            if not isinstance(tenant, str):
                raise TypeError("must be a string")
            check_label(tenant)
        except (TypeError, PydanticCustomError) as exc:
            raise ConfigError(f"api_keys: the tenant of key {key[:4]}... {exc}") from None
    for key in config.admin_keys:
        if not isinstance(key, str) or len(key) < 8 or any(c.isspace() for c in key):
            raise ConfigError(
                "admin_keys: every key must be a string of at least 8 characters without spaces"
            )
    if config.max_body_bytes < 1024:
        raise ConfigError("max_body_bytes must be at least 1024")
    if config.rate_per_s < 0 or (config.rate_per_s > 0 and config.burst < 1):
        raise ConfigError("rate_per_s must be >= 0 (0 = unlimited) and burst >= 1")
    if config.max_inflight < 1 or config.max_inflight_per_caller < 1:
        raise ConfigError("max_inflight and max_inflight_per_caller must be at least 1")
    if not 0 < config.body_timeout_s <= 3600:
        raise ConfigError("body_timeout_s must be more than 0 and at most 3600")
    if config.auth_fail_per_s < 0 or config.auth_fail_burst < 1:
        raise ConfigError("auth_fail_per_s must be >= 0 (0 = unthrottled) and auth_fail_burst >= 1")
    if not 0 < config.header_timeout_s <= 3600:
        raise ConfigError("header_timeout_s must be more than 0 and at most 3600")
    if min(config.max_connections, config.max_connections_per_address) < 1:
        raise ConfigError("max_connections and max_connections_per_address must be at least 1")
    if config.max_inflight_keyless < 1:
        raise ConfigError("max_inflight_keyless must be at least 1")
    for proxy in config.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigError(
                f"trusted_proxies: {proxy!r} is not an IP address or CIDR network"
            ) from None


def server_file_settings(path: str | Path) -> list[Setting]:
    """Every setting in the server file, ``[engine]`` included; unknown keys are errors."""
    path = Path(path).expanduser()
    return file_settings(read_toml(path), file_schema(), str(path))


def load_server_config(
    path: str | Path | None = None, env: Mapping[str, str] | None = None
) -> ServerConfig:
    """The file at ``path`` (if given; it must exist), then ``MINICACHE_SERVER_*`` overrides."""
    env = os.environ if env is None else env
    layer = server_file_settings(path) if path is not None else []
    values = resolve(
        file_schema(), [[s for s in layer if s.path[0] != "engine"], env_settings(env, ENV)]
    )
    return replace(ServerConfig(), **values.pop("limits", {}), **values)
