"""Models and engine settings: which backend plays each model role, and the engine's options.

Read through the one configuration layer (:mod:`minicache.config.settings`: defaults < config file <
environment < command-line flags). The config file is ``$MINICACHE_CONFIG``, else
``~/.config/minicache/config.toml`` if it exists::

    [target]                       # the model that writes programs
    backend = "openai"             # "embedded" (default) or "openai"
    base_url = "http://gpu-box:8000/v1"
    model = "Qwen/Qwen2.5-Coder-32B-Instruct"
    profile = "vllm"               # openai | vllm | sglang | llama-server | llama-cpp-python | ollama
    api_key_env = "VLLM_API_KEY"   # name of the env var holding the key (keys never go in the file)
    timeout_s = 120

    [small]                        # the model that extracts variables and drafts
    backend = "embedded"

    [engine]                       # any field of minicache.engine.EngineConfig
    build_after = 3
    [engine.verify]                # ... and of its nested tables (verify, step, admission)
    min_margin = 1.0

Environment variables, per role (``TARGET`` or ``SMALL``): ``MINICACHE_<ROLE>_BACKEND``,
``MINICACHE_<ROLE>_URL`` (alone, it also sets the backend to "openai"), ``MINICACHE_<ROLE>_MODEL``,
``MINICACHE_<ROLE>_PROFILE``, ``MINICACHE_<ROLE>_API_KEY``; ``MINICACHE_SPECULATIVE`` (none | small |
lookup); ``MINICACHE_ENGINE_<KEY>`` for every engine option (``MINICACHE_ENGINE_VERIFY__MIN_MARGIN``).
``MINICACHE_THREADS`` and ``MINICACHE_MODELS_DIR`` are read where the models load.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from minicache.config.engine import ROUTE_EMBEDDERS
from minicache.config.settings import (
    Schema,
    Setting,
    build,
    env_names,
    env_settings,
    file_settings,
    option_settings,
    read_toml,
    resolve,
)
from minicache.errors import ConfigError
from minicache.models.base import ModelBackend

if TYPE_CHECKING:
    from minicache.config.engine import EngineConfig

ROLES = ("target", "small")
SPECULATIVE = ("none", "small", "lookup")
ROLE_KEYS: Schema = {
    "backend": str,
    "base_url": str,
    "model": str,
    "profile": str,
    "api_key_env": str,
    "timeout_s": float,
}
MODEL_ENV = {
    **{
        f"MINICACHE_{role.upper()}_{var}": (role, key)
        for role in ROLES
        for var, key in (
            ("BACKEND", "backend"),
            ("URL", "base_url"),
            ("MODEL", "model"),
            ("PROFILE", "profile"),
        )
    },
    "MINICACHE_SPECULATIVE": ("speculative",),
}
ENGINE_FLAG = "--engine-option"


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


def file_schema() -> Schema:
    """The keys of the config file (imported lazily: the engine imports this module's users)."""
    from minicache.config.engine import EngineConfig

    return {
        "target": ROLE_KEYS,
        "small": ROLE_KEYS,
        "speculative": str,
        "n_ctx": int,
        "engine": EngineConfig,
    }


def engine_env() -> dict[str, tuple[str, ...]]:
    """``MINICACHE_ENGINE_<KEY>`` -> ``("engine", ...)`` for every engine option."""
    return env_names(file_schema(), "MINICACHE_ENGINE_", ("engine",))


def config_path() -> Path:
    explicit = os.environ.get("MINICACHE_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "minicache" / "config.toml"


def _file_layer(path: Path | None) -> tuple[list[Setting], str]:
    """The config file's settings and its name, or nothing and "defaults" when there is no file."""
    if path is None and os.environ.get("MINICACHE_CONFIG") and not config_path().exists():
        # Named on purpose, so a missing file is a typo, not a wish for the defaults.
        raise ConfigError(f"$MINICACHE_CONFIG names {config_path()}, which does not exist")
    path = path or config_path()
    if not path.exists():
        return [], "defaults"
    return file_settings(read_toml(path), file_schema(), str(path)), str(path)


def load_settings(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """The model settings: config file, then environment, then the checks across keys."""
    env = os.environ if env is None else env
    layer, source = _file_layer(path)
    from_env = env_settings(env, MODEL_ENV)
    for role in ROLES:  # a server URL alone means an OpenAI-compatible backend
        paths = {s.path for s in from_env}
        if (role, "base_url") in paths and (role, "backend") not in paths:
            from_env.append(
                Setting((role, "backend"), "openai", f"MINICACHE_{role.upper()}_URL", text=True)
            )
    values = resolve(file_schema(), [[s for s in layer if s.path[0] != "engine"], from_env])
    roles = {}
    for role in ROLES:
        data = dict(values.pop(role, {}))
        key_env = data.pop("api_key_env", None)
        api_key = env.get(f"MINICACHE_{role.upper()}_API_KEY") or (
            env.get(key_env) if key_env else None
        )
        roles[role] = RoleSettings(**data, api_key=api_key or None)
    settings = Settings(target=roles["target"], small=roles["small"], **values, source=source)
    validate(settings)
    return settings


def load_engine_config(
    path: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    extra: Sequence[Setting] = (),
    options: Sequence[str] = (),
) -> EngineConfig:
    """The engine's options: defaults < the config file's ``[engine]`` < ``extra`` (another file's
    settings, e.g. ``serve --config``) < ``MINICACHE_ENGINE_*`` < ``--engine-option KEY=VALUE``."""
    from minicache.config.engine import EngineConfig

    env = os.environ if env is None else env
    layer, _ = _file_layer(path)
    layers = [
        [s for s in layer if s.path[0] == "engine"],
        [s for s in extra if s.path[0] == "engine"],
        env_settings(env, engine_env()),
        option_settings(options, ("engine",), ENGINE_FLAG),
    ]
    config: EngineConfig = build(EngineConfig, resolve(file_schema(), layers).get("engine", {}))
    check_engine(config)
    return config


_SHARES = (  # fractions: 0..1
    "route_threshold",
    "audit_rate",
    "audit_delta",
    "build_agreement",
    "verify.audit_rate_min",
    "verify.audit_rate_max",
    "verify.probation_max_failure",
    "step.threshold",
)


def check_engine(config: Any, prefix: str = "") -> None:
    """Checks types cannot express: no negative numbers anywhere, shares within 0..1, and a
    validation that can pass (validate_min <= validate_n)."""
    for f in dataclasses.fields(config):
        value, key = getattr(config, f.name), prefix + f.name
        if dataclasses.is_dataclass(value):
            check_engine(value, key + ".")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if value < 0:
                raise ConfigError(f"engine option {key} must not be negative, not {value}")
            if key in _SHARES and value > 1:
                raise ConfigError(
                    f"engine option {key} is a share and must be between 0 and 1, not {value}"
                )
    if not prefix and config.route_embedder not in ROUTE_EMBEDDERS:
        raise ConfigError(
            f"engine option route_embedder must be one of {', '.join(ROUTE_EMBEDDERS)}, "
            f"not {config.route_embedder!r}"
        )
    if not prefix and config.route_embedder == "minilm":
        missing = [m for m in ("tokenizers", "safetensors") if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigError(
                f"route_embedder 'minilm' needs {' and '.join(missing)}, not installed: "
                "pip install 'minicache-llm[embedded]', or keep the default 'lexical'"
            )
    if not prefix and config.validate_min > config.validate_n:
        raise ConfigError(
            f"engine option validate_min ({config.validate_min}) must not exceed validate_n "
            f"({config.validate_n}): no candidate could pass"
        )


def validate(settings: Settings) -> None:
    from minicache.models.openai import PROFILES

    if settings.speculative not in SPECULATIVE:
        raise ConfigError(
            f"speculative must be one of {', '.join(SPECULATIVE)}, not {settings.speculative!r}"
        )
    for role in ROLES:
        rs: RoleSettings = getattr(settings, role)
        if rs.backend not in BACKENDS:
            raise ConfigError(
                f"[{role}] backend must be one of {', '.join(BACKENDS)}, not {rs.backend!r}"
            )
        if rs.backend == "openai":
            if not rs.base_url or not rs.model:
                raise ConfigError(
                    f"[{role}] backend 'openai' needs base_url and model "
                    f"(MINICACHE_{role.upper()}_URL / MINICACHE_{role.upper()}_MODEL)"
                )
            url = urlsplit(rs.base_url)
            if url.scheme not in ("http", "https") or not url.hostname or " " in rs.base_url:
                raise ConfigError(
                    f"[{role}] base_url must be an http:// or https:// URL with a host, "
                    f"like http://gpu-box:8000/v1, not {rs.base_url!r}"
                )
            try:
                url.port  # noqa: B018 - reading it checks the port
            except ValueError:
                raise ConfigError(
                    f"[{role}] base_url has an invalid port: {rs.base_url!r}"
                ) from None
            if rs.profile not in PROFILES:
                raise ConfigError(
                    f"[{role}] profile must be one of {', '.join(sorted(PROFILES))}, not {rs.profile!r}"
                )


# -------------------------------------------------------------------------------------------
# Backend registry: one contract (role settings -> ModelBackend) per backend kind.

BackendFactory = Callable[[str, RoleSettings, Settings], ModelBackend]


def require_embedded() -> None:
    """The embedded models run on llama-cpp-python, an extra (it compiles llama.cpp): a clear
    error naming it, before anything loads, when it is not installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError(
            "the embedded models need llama-cpp-python, which is not installed: "
            "pip install 'minicache-llm[embedded]' (or `make setup`), or point the target and the "
            "small model at an OpenAI-compatible server (MINICACHE_TARGET_URL, MINICACHE_SMALL_URL)"
        )


def _embedded(role: str, rs: RoleSettings, settings: Settings) -> ModelBackend:
    from minicache.models.llamacpp import LlamaCppBackend

    require_embedded()
    return LlamaCppBackend.embedded(role, n_ctx=settings.n_ctx)


def _openai(role: str, rs: RoleSettings, settings: Settings) -> ModelBackend:
    from minicache.models.openai import OpenAIBackend

    assert rs.base_url and rs.model
    return OpenAIBackend(
        rs.base_url,
        rs.model,
        api_key=rs.api_key,
        profile=rs.profile,
        timeout_s=rs.timeout_s,
        name=f"{role}:{rs.model}",
    )


BACKENDS: dict[str, BackendFactory] = {"embedded": _embedded, "openai": _openai}


def build_backends(settings: Settings | None = None) -> tuple[ModelBackend, ModelBackend]:
    """Instantiate (target, small) as the settings say.

    When both are embedded, the small model is also wired in as the target's drafter, and the
    configured speculative mode becomes the target's default.
    """
    settings = settings or load_settings()
    if "embedded" in (settings.target.backend, settings.small.backend):
        require_embedded()
    small = BACKENDS[settings.small.backend]("small", settings.small, settings)
    if settings.target.backend == "embedded":
        from minicache.models.llamacpp import LlamaCppBackend

        drafter = small if isinstance(small, LlamaCppBackend) else None
        if settings.speculative == "small" and drafter is None:
            raise ConfigError("speculative = 'small' needs the small model to be embedded too")
        target: ModelBackend = LlamaCppBackend.embedded(
            "target",
            n_ctx=settings.n_ctx,
            drafter_model=drafter,
            default_draft=settings.speculative,
        )
    else:
        target = BACKENDS[settings.target.backend]("target", settings.target, settings)
    return target, small
