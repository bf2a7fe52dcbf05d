"""Settings: which backend plays each model role, read from a TOML file and environment variables.

Precedence: explicit arguments > environment variables > config file > defaults. The config file is
``$MINICACHE_CONFIG`` or ``~/.config/minicache/config.toml`` if it exists::

    [target]                       # the model that writes programs
    backend = "openai"             # "embedded" (default) or "openai"
    base_url = "http://gpu-box:8000/v1"
    model = "Qwen/Qwen2.5-Coder-32B-Instruct"
    profile = "vllm"               # openai | vllm | sglang | llama-server | llama-cpp-python | ollama
    api_key_env = "VLLM_API_KEY"   # name of the env var holding the key (keys never go in the file)

    [small]                        # the model that extracts variables and drafts
    backend = "embedded"

Environment variables, per role (``TARGET`` or ``SMALL``): ``MINICACHE_<ROLE>_BACKEND``,
``MINICACHE_<ROLE>_URL``, ``MINICACHE_<ROLE>_MODEL``, ``MINICACHE_<ROLE>_PROFILE``,
``MINICACHE_<ROLE>_API_KEY``; and ``MINICACHE_SPECULATIVE`` (none | small | lookup),
``MINICACHE_THREADS``, ``MINICACHE_MODELS_DIR``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .models.base import ModelBackend

ROLES = ("target", "small")
SPECULATIVE = ("none", "small", "lookup")


@dataclass(frozen=True)
class RoleSettings:
    backend: str = "embedded"
    base_url: str | None = None
    model: str | None = None
    profile: str = "openai"
    api_key: str | None = None
    timeout_s: float = 120.0


@dataclass(frozen=True)
class Settings:
    target: RoleSettings = field(default_factory=RoleSettings)
    small: RoleSettings = field(default_factory=RoleSettings)
    speculative: str = "none"
    n_ctx: int = 4096
    source: str = "defaults"


def config_path() -> Path:
    explicit = os.environ.get("MINICACHE_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "minicache" / "config.toml"


def _role_from(data: dict[str, Any], role: str, where: str, env: dict[str, str]) -> RoleSettings:
    known = {"backend", "base_url", "model", "profile", "api_key_env", "timeout_s"}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) in [{role}]: {', '.join(sorted(unknown))}")
    key = env.get(data["api_key_env"]) if data.get("api_key_env") else None
    return RoleSettings(backend=data.get("backend", "embedded"), base_url=data.get("base_url"),
                        model=data.get("model"), profile=data.get("profile", "openai"), api_key=key,
                        timeout_s=float(data.get("timeout_s", 120.0)))


def load_settings(path: Path | None = None, env: dict[str, str] | None = None) -> Settings:
    """Read the config file (if any), then apply environment overrides, then validate."""
    env = dict(os.environ) if env is None else env
    path = path or config_path()
    settings = Settings()
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        unknown = set(data) - {"target", "small", "speculative", "n_ctx"}
        if unknown:
            raise ConfigError(f"{path}: unknown section(s) or key(s): {', '.join(sorted(unknown))}")
        settings = Settings(
            target=_role_from(data.get("target", {}), "target", str(path), env),
            small=_role_from(data.get("small", {}), "small", str(path), env),
            speculative=data.get("speculative", "none"), n_ctx=int(data.get("n_ctx", 4096)),
            source=str(path))
    for role in ROLES:
        current: RoleSettings = getattr(settings, role)
        prefix = f"MINICACHE_{role.upper()}_"
        changes = {attr: env[prefix + var] for var, attr in
                   (("BACKEND", "backend"), ("URL", "base_url"), ("MODEL", "model"),
                    ("PROFILE", "profile"), ("API_KEY", "api_key")) if env.get(prefix + var)}
        if changes.get("base_url") and "backend" not in changes:
            changes["backend"] = "openai"
        settings = replace(settings, **{role: replace(current, **changes)})
    if env.get("MINICACHE_SPECULATIVE"):
        settings = replace(settings, speculative=env["MINICACHE_SPECULATIVE"])
    validate(settings)
    return settings


def validate(settings: Settings) -> None:
    from .models.openai import PROFILES

    if settings.speculative not in SPECULATIVE:
        raise ConfigError(f"speculative must be one of {', '.join(SPECULATIVE)}, not {settings.speculative!r}")
    for role in ROLES:
        rs: RoleSettings = getattr(settings, role)
        if rs.backend not in BACKENDS:
            raise ConfigError(f"[{role}] backend must be one of {', '.join(BACKENDS)}, not {rs.backend!r}")
        if rs.backend == "openai":
            if not rs.base_url or not rs.model:
                raise ConfigError(f"[{role}] backend 'openai' needs base_url and model "
                                  f"(MINICACHE_{role.upper()}_URL / MINICACHE_{role.upper()}_MODEL)")
            if rs.profile not in PROFILES:
                raise ConfigError(f"[{role}] profile must be one of {', '.join(sorted(PROFILES))}, not {rs.profile!r}")


# -------------------------------------------------------------------------------------------
# Backend registry: one contract (role settings -> ModelBackend) per backend kind.

BackendFactory = Callable[[str, RoleSettings, Settings], ModelBackend]


def _embedded(role: str, rs: RoleSettings, settings: Settings) -> ModelBackend:
    from .models.llamacpp import LlamaCppBackend

    return LlamaCppBackend.embedded(role, n_ctx=settings.n_ctx)


def _openai(role: str, rs: RoleSettings, settings: Settings) -> ModelBackend:
    from .models.openai import OpenAIBackend

    assert rs.base_url and rs.model
    return OpenAIBackend(rs.base_url, rs.model, api_key=rs.api_key, profile=rs.profile,
                         timeout_s=rs.timeout_s, name=f"{role}:{rs.model}")


BACKENDS: dict[str, BackendFactory] = {"embedded": _embedded, "openai": _openai}


def build_backends(settings: Settings | None = None) -> tuple[ModelBackend, ModelBackend]:
    """Instantiate (target, small) as the settings say.

    When both are embedded, the small model is also wired in as the target's drafter, and the
    configured speculative mode becomes the target's default.
    """
    settings = settings or load_settings()
    small = BACKENDS[settings.small.backend]("small", settings.small, settings)
    if settings.target.backend == "embedded":
        from .models.llamacpp import LlamaCppBackend

        drafter = small if isinstance(small, LlamaCppBackend) else None
        if settings.speculative == "small" and drafter is None:
            raise ConfigError("speculative = 'small' needs the small model to be embedded too")
        target = LlamaCppBackend.embedded("target", n_ctx=settings.n_ctx, drafter_model=drafter,
                                          default_draft=settings.speculative)  # type: ignore[arg-type]
    else:
        target = BACKENDS[settings.target.backend]("target", settings.target, settings)
    return target, small
