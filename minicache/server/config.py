"""Server settings: API keys (key -> tenant), admin keys and limits, from a TOML file and env vars.

Precedence: environment variables > the file > defaults. Example file (``minicache serve --config``)::

    admin_keys = ["sk-admin-..."]
    public_metrics = false           # true: /metrics needs no key even when auth is on

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

Environment: ``MINICACHE_SERVER_API_KEYS`` ("key=tenant,key=tenant"), ``MINICACHE_SERVER_ADMIN_KEYS``
("key,key"), ``MINICACHE_SERVER_MAX_BODY_BYTES``, ``MINICACHE_SERVER_RATE_PER_S``,
``MINICACHE_SERVER_BURST``, ``MINICACHE_SERVER_MAX_INFLIGHT``, ``MINICACHE_SERVER_MAX_INFLIGHT_PER_CALLER``,
``MINICACHE_SERVER_BODY_TIMEOUT_S``, ``MINICACHE_SERVER_AUTH_FAIL_PER_S``, ``MINICACHE_SERVER_AUTH_FAIL_BURST``,
``MINICACHE_SERVER_PUBLIC_METRICS``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic_core import PydanticCustomError

from ..errors import ConfigError
from .protocol import check_label

_LIMITS = {"max_body_bytes": int, "rate_per_s": float, "burst": int, "max_inflight": int,
           "max_inflight_per_caller": int, "body_timeout_s": float, "auth_fail_per_s": float, "auth_fail_burst": int}
_TOP = {"api_keys", "admin_keys", "public_metrics", "model_name", "limits"}


@dataclass(frozen=True)
class ServerConfig:
    api_keys: dict[str, str] = field(default_factory=dict)  # API key -> tenant
    admin_keys: frozenset[str] = frozenset()
    max_body_bytes: int = 1 << 20
    rate_per_s: float = 50.0  # per key; 0 switches rate limiting off
    burst: int = 100
    max_inflight: int = 64
    max_inflight_per_caller: int = 16  # per tenant, or per client address for requests without a valid key
    body_timeout_s: float = 10.0  # the whole body must arrive within this
    auth_fail_per_s: float = 0.5  # failed authentications per client address: refill rate (0 = unthrottled) ...
    auth_fail_burst: int = 10  # ... and bucket size
    public_metrics: bool = False
    model_name: str = "minicache"  # the model name answers carry when a request names none

    def __post_init__(self) -> None:
        object.__setattr__(self, "api_keys", dict(self.api_keys))
        object.__setattr__(self, "admin_keys", frozenset(self.admin_keys))
        validate(self)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_keys)


def validate(config: ServerConfig) -> None:
    for key, tenant in config.api_keys.items():
        if not isinstance(key, str) or len(key) < 8 or any(c.isspace() for c in key):
            raise ConfigError("api_keys: every key must be a string of at least 8 characters without spaces")
        try:
            if not isinstance(tenant, str):
                raise TypeError("must be a string")
            check_label(tenant)
        except (TypeError, PydanticCustomError) as exc:
            raise ConfigError(f"api_keys: the tenant of key {key[:4]}... {exc}") from None
    for key in config.admin_keys:
        if not isinstance(key, str) or len(key) < 8 or any(c.isspace() for c in key):
            raise ConfigError("admin_keys: every key must be a string of at least 8 characters without spaces")
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


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read server config {path}: {exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    unknown = set(data) - _TOP
    if unknown:
        raise ConfigError(f"{path}: unknown key(s): {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    keys = data.get("api_keys", {})
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise ConfigError(f"{path}: [api_keys] must map keys to tenant names")
    out["api_keys"] = keys
    admin = data.get("admin_keys", [])
    if not isinstance(admin, list) or not all(isinstance(k, str) for k in admin):
        raise ConfigError(f"{path}: admin_keys must be a list of strings")
    out["admin_keys"] = frozenset(admin)
    if "public_metrics" in data:
        if not isinstance(data["public_metrics"], bool):
            raise ConfigError(f"{path}: public_metrics must be true or false")
        out["public_metrics"] = data["public_metrics"]
    if "model_name" in data:
        if not isinstance(data["model_name"], str) or not data["model_name"]:
            raise ConfigError(f"{path}: model_name must be a non-empty string")
        out["model_name"] = data["model_name"]
    limits = data.get("limits", {})
    if not isinstance(limits, dict):
        raise ConfigError(f"{path}: [limits] must be a table")
    for name, value in limits.items():
        kind = _LIMITS.get(name)
        if kind is None:
            raise ConfigError(f"{path}: unknown key in [limits]: {name}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
            raise ConfigError(f"{path}: [limits] {name} must be a number")
        out[name] = kind(value)
    return out


def _from_env(env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    raw = env.get("MINICACHE_SERVER_API_KEYS")
    if raw:
        keys = {}
        for item in raw.split(","):
            key, sep, tenant = item.strip().partition("=")
            if not sep:
                raise ConfigError("MINICACHE_SERVER_API_KEYS must be 'key=tenant,key=tenant'")
            keys[key.strip()] = tenant.strip()
        out["api_keys"] = keys
    raw = env.get("MINICACHE_SERVER_ADMIN_KEYS")
    if raw:
        out["admin_keys"] = frozenset(k.strip() for k in raw.split(",") if k.strip())
    for name, kind in _LIMITS.items():
        raw = env.get(f"MINICACHE_SERVER_{name.upper()}")
        if raw:
            try:
                out[name] = kind(raw)
            except ValueError:
                raise ConfigError(f"MINICACHE_SERVER_{name.upper()} must be a number, not {raw!r}") from None
    raw = env.get("MINICACHE_SERVER_PUBLIC_METRICS")
    if raw:
        out["public_metrics"] = raw.strip().lower() in ("1", "true", "yes", "on")
    return out


def load_server_config(path: str | Path | None = None, env: dict[str, str] | None = None) -> ServerConfig:
    """The file at ``path`` (if given; it must exist), then ``MINICACHE_SERVER_*`` overrides."""
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = {}
    if path is not None:
        values.update(_from_toml(Path(path).expanduser()))
    values.update(_from_env(env))
    return replace(ServerConfig(), **values)
