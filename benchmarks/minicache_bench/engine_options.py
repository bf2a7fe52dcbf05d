"""The minicache method's engine options in ``minicache bench`` (``--engine-option KEY=VALUE``).

They are parsed and checked by the configuration layer the other commands use
(``load_engine_config``), so the syntax, the keys and the error messages are those of
``minicache serve --engine-option``. Only the keys they name are laid over the benchmark's own
settings for the method (background builds, no audits unless ``MINICACHE_AUDIT_RATE``, admission as
in serving); the config file's ``[engine]`` and ``MINICACHE_ENGINE_*`` are checked with them, as
``minicache config`` checks them, but set nothing in a benchmark. A run records each key and the
value it took in results.json's config (``engine_options``), the report's title names them, and a
folder keeps them: the rows of a resumed run all come from one engine.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from minicache.config.engine import AdmissionConfig, EngineConfig
from minicache.config.models import ENGINE_FLAG, check_engine, load_engine_config
from minicache.config.settings import dotted, option_settings
from minicache.errors import ConfigError

__all__ = ["minicache_config", "option_values", "options_title", "refuse_other_options"]


def _chosen(options: Sequence[str]) -> tuple[EngineConfig, list[tuple[str, ...]]]:
    """The engine config the options give (checked as ``minicache config --engine-option`` checks
    them), and the key paths they set, in order."""
    chosen = load_engine_config(options=options)
    return chosen, [s.path for s in option_settings(options, (), ENGINE_FLAG)]


def _with(config: Any, path: tuple[str, ...], source: Any) -> Any:
    """``config`` with the value at ``path`` taken from ``source`` (nested tables field by field,
    so the rest of e.g. the benchmark's admission stays)."""
    head, rest = path[0], path[1:]
    value = getattr(source, head)
    if rest:
        value = _with(getattr(config, head), rest, value)
    return dataclasses.replace(config, **{head: value})


def minicache_config(
    options: Sequence[str] = (),
    *,
    background_builds: bool = True,
    admission: AdmissionConfig | None = None,
) -> EngineConfig:
    """The minicache method's EngineConfig: the benchmark's settings, then each key ``options`` set.
    No audits unless MINICACHE_AUDIT_RATE asks for them: they would add target calls to the stream."""
    config = EngineConfig(
        background_builds=background_builds,
        audit_rate=float(os.environ.get("MINICACHE_AUDIT_RATE", "0")),
        admission=admission or AdmissionConfig(),
    )
    if not options:
        return config
    chosen, paths = _chosen(options)
    for path in paths:
        config = _with(config, path, chosen)
    check_engine(config)  # the checks across keys, on the config the method gets
    return config


def option_values(options: Sequence[str]) -> dict[str, Any]:
    """Each key the options set and the value it took (a later option over an earlier one), as
    results.json holds them: ``["merge_groups=true"]`` gives ``{"merge_groups": True}``."""
    if not options:
        return {}
    chosen, paths = _chosen(options)
    values: dict[str, Any] = {}
    for path in paths:
        value: Any = chosen
        for key in path:
            value = getattr(value, key)
        values[dotted(path)] = value
    return dict(json.loads(json.dumps(values, default=str)))


def _shown(values: Mapping[str, Any]) -> str:
    """``merge_groups=true, verify.min_margin=1.5``; text values as they are."""
    return ", ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in values.items()
    )


def options_title(config: Mapping[str, Any]) -> str:
    """What the report's title adds for a run with engine options ("" without)."""
    values = config.get("engine_options") or {}
    return f"; minicache engine options: {_shown(values)}" if values else ""


def refuse_other_options(folders: Iterable[Path], values: Mapping[str, Any]) -> None:
    """Refuse to resume a folder whose results.json recorded other engine options (none, for
    results written before they were recorded): its rows and store came from another engine."""
    for folder in folders:
        path = folder / "results.json"
        if not path.exists():
            continue
        recorded = json.loads(path.read_text()).get("config", {}).get("engine_options") or {}
        if recorded != dict(values):
            raise ConfigError(
                f"{folder} holds a run with engine options {_shown(recorded) or '(none)'}, not "
                f"{_shown(values) or '(none)'}: a resumed run uses the --engine-option values its "
                "rows were recorded with; give those, or another --out"
            )
