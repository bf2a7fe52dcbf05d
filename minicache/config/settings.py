"""The one configuration layer: every setting of the models, the engine and the server, in layers.

Precedence, lowest first (a later layer overrides an earlier one, key by key):

1. **defaults**: the fields of :class:`~minicache.config.models.Settings`, :class:`~minicache.engine.EngineConfig`
   and :class:`~minicache.server.config.ServerConfig`;
2. **the config file**: ``$MINICACHE_CONFIG``, else ``~/.config/minicache/config.toml`` (models and
   ``[engine]``), then, for ``minicache serve``, the ``--config`` file (server keys and ``[engine]``);
3. **the environment**: ``MINICACHE_*`` variables (each module lists its own; engine options are
   ``MINICACHE_ENGINE_<KEY>``, nested tables joined by ``__``: ``MINICACHE_ENGINE_VERIFY__MIN_MARGIN``);
4. **command-line flags**: ``--engine-option KEY=VALUE`` (``verify.min_margin=1.5``).

Why a small mechanism of its own instead of pydantic-settings' sources: the environment variables
that already work do not follow one naming rule (``MINICACHE_TARGET_URL`` sets ``target.base_url``,
``MINICACHE_SERVER_API_KEYS`` is ``key=tenant,key=tenant``, ``MINICACHE_SERVER_RATE_PER_S`` sets
``limits.rate_per_s``), and every error must name the layer it came from. Here a layer is a list of
:class:`Setting` (a key path, a value and where it came from); a *schema* (a dict of key -> type, a
nested dict or a dataclass for a table) says which keys exist and what type each value has, and
pydantic checks each value against its type: file values strictly (``rate_per_s = true`` is an
error, not 1.0), text from the environment and flags as text (``"8"`` is 8, ``"off"`` is false).
A bad value or an unknown key is a :class:`~minicache.errors.ConfigError` naming the source, the key
and the reason. Checks across keys stay with the objects that own them.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from minicache.errors import ConfigError

__all__ = [
    "Setting",
    "Parsed",
    "Schema",
    "read_toml",
    "file_settings",
    "env_names",
    "env_settings",
    "option_settings",
    "resolve",
    "build",
]

Schema = Mapping[str, Any]  # key -> leaf type | nested Schema | dataclass type (a table)
Path_ = tuple[str, ...]
EnvParser = Callable[[str], Any]


@dataclass(frozen=True)
class Setting:
    """One value for one key path, and where it came from (shown in errors)."""

    path: Path_
    value: Any
    source: str
    text: bool = False  # the value is text to parse (environment, flags), not a typed TOML value


def dotted(path: Path_) -> str:
    return ".".join(path)


def _table(node: Any) -> Schema | None:
    """The keys of a table node (a nested schema or a dataclass), or None for a leaf."""
    if isinstance(node, Mapping):
        return node
    if isinstance(node, type) and dataclasses.is_dataclass(node):
        hints = typing.get_type_hints(node)
        return {f.name: hints[f.name] for f in dataclasses.fields(node)}
    return None


class _Unknown(Exception):
    """A key path the schema does not have; ``str()`` names it and the keys allowed there."""

    def __init__(self, path: Path_, depth: int, table: Schema | None) -> None:
        where = f"[{dotted(path[:depth])}]" if depth else "the top level"
        known = ", ".join(sorted(table)) if table else "none: it is not a table"
        super().__init__(f"{dotted(path)!r} (keys in {where}: {known})")


def _node(schema: Schema, path: Path_) -> Any:
    node: Any = schema
    for depth, key in enumerate(path):
        table = _table(node)
        if table is None or key not in table:
            raise _Unknown(path, depth, table)
        node = table[key]
    return node


def read_toml(path: Path) -> dict[str, Any]:
    """The file's TOML document; an unreadable or invalid file is a ConfigError naming it."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def file_settings(
    data: Mapping[str, Any], schema: Schema, source: str, prefix: Path_ = ()
) -> list[Setting]:
    """Flatten a TOML document into settings, refusing keys the schema does not have."""
    out: list[Setting] = []
    for key, value in data.items():
        path = (*prefix, key)
        try:
            node = _node(schema, path)
        except _Unknown as exc:
            kind = "section" if isinstance(value, dict) and not prefix else "key"
            raise ConfigError(f"{source}: unknown {kind} {exc}") from None
        if _table(node) is not None:
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: {dotted(path)} must be a table ([{dotted(path)}])")
            out.extend(file_settings(value, schema, source, path))
        else:
            out.append(Setting(path, value, source))
    return out


def env_names(schema: Schema, prefix: str, under: Path_ = ()) -> dict[str, Path_]:
    """Environment variable names for every leaf of the table at ``under``: ``prefix`` + the key path
    below it, upper case, nested tables joined by ``__`` (``MINICACHE_ENGINE_VERIFY__MIN_MARGIN``)."""
    out: dict[str, Path_] = {}

    def walk(table: Schema, rel: Path_) -> None:
        for key, node in table.items():
            sub = _table(node)
            if sub is not None:
                walk(sub, (*rel, key))
            else:
                out[prefix + "__".join((*rel, key)).upper()] = (*under, *rel, key)

    top = _table(_node(schema, under)) if under else schema
    assert top is not None, f"{dotted(under)} is not a table"
    walk(top, ())
    return out


@dataclass(frozen=True)
class Parsed:
    """An environment variable with a format of its own (``key=tenant,key=tenant``): ``parse`` turns
    its text into the key's value, or raises ValueError saying what the format is."""

    path: Path_
    parse: EnvParser


def env_settings(env: Mapping[str, str], names: Mapping[str, Path_ | Parsed]) -> list[Setting]:
    """Settings from the variables in ``names`` that are set and not empty: a key path (the text is
    parsed by the key's type) or :class:`Parsed`."""
    out: list[Setting] = []
    for name, target in names.items():
        raw = env.get(name, "")
        if not raw.strip():
            continue
        if not isinstance(target, Parsed):
            out.append(Setting(target, raw.strip(), name, text=True))
            continue
        try:
            out.append(Setting(target.path, target.parse(raw), name))
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
    return out


def option_settings(options: Iterable[str], prefix: Path_, flag: str) -> list[Setting]:
    """``KEY=VALUE`` command-line options (``verify.min_margin=1.5``) as settings under ``prefix``."""
    out = []
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {option!r}: expected KEY=VALUE, e.g. {flag} build_after=5")
        out.append(
            Setting(
                (*prefix, *key.strip().split(".")), value.strip(), f"{flag} {option}", text=True
            )
        )
    return out


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: Any) -> TypeAdapter[Any]:
    """One TypeAdapter per type (building one costs more than validating a value)."""
    if tp not in _ADAPTERS:
        _ADAPTERS[tp] = TypeAdapter(tp)
    return _ADAPTERS[tp]


def _reason(exc: ValidationError, value: Any) -> str:
    error = exc.errors(include_url=False)[0]
    where = "".join(f"[{p!r}]" for p in error["loc"])
    shown = (
        f", got {value!r}"
        if isinstance(value, (str, int, float, bool)) and len(repr(value)) <= 60
        else ""
    )
    return f"{where + ': ' if where else ''}{error['msg']}{shown}"


def resolve(schema: Schema, layers: Sequence[Iterable[Setting]]) -> dict[str, Any]:
    """Check every setting against ``schema`` and merge the layers, later over earlier, into one
    nested dict of the keys that were set (the defaults stay with the objects built from it)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for s in layer:
            try:
                node = _node(schema, s.path)
            except _Unknown as exc:
                raise ConfigError(f"{s.source}: unknown key {exc}") from None
            if _table(node) is not None:
                raise ConfigError(
                    f"{s.source}: {dotted(s.path)} is a table; set one of its keys "
                    f"({', '.join(sorted(_table(node) or {}))})"
                )
            try:
                value = _adapter(node).validate_python(s.value, strict=not s.text)
            except ValidationError as exc:
                raise ConfigError(
                    f"{s.source}: {dotted(s.path)}: {_reason(exc, s.value)}"
                ) from None
            target = merged
            for key in s.path[:-1]:
                target = target.setdefault(key, {})
            target[s.path[-1]] = value
    return merged


def build(cls: type[Any], values: Mapping[str, Any]) -> Any:
    """A dataclass (nested ones included) from checked values; unset keys keep their defaults."""
    return _adapter(cls).validate_python(dict(values))
