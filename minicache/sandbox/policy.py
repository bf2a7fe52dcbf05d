"""The static half of the sandbox: the one gate every program passes before it is stored or run.

:func:`check_program` parses a program (never runs it) and rejects anything outside an allow-list:
imports of seven modules, names that are not reflective builtins, and attributes from a fixed list
(the public methods and fields of the values a numeric program handles: numbers, strings,
containers, ``Decimal``, ``Fraction``, dates, regex matches, plus the allowed modules' exports).
No frame, code, generator, coroutine or traceback attribute is on that list, so a program cannot
walk from a generator to its caller's globals. Attributes are read-only: assigning or deleting one
is rejected, which also stops ``math.sqrt = ...``. ``str.format``/``format_map`` would walk
attributes from inside a string (``"{0.gi_frame}"``), so they are allowed only on a constant format
string whose fields name no attribute or index.

Every path that stores or runs a program (miss, build, imports, warm start) calls this function,
directly or through :class:`minicache.sandbox.SandboxPool`; its name and signature are stable.
This layer is assumed to have holes: the OS layer (see ``_worker``/``_seccomp``) must hold alone.
"""

from __future__ import annotations

import ast
import datetime
import decimal
import fractions
import json
import math
import re
import statistics
import string
import threading

from minicache.errors import (
    SandboxError as SandboxError,
)  # re-exported: defined with every other error
from minicache.errors import SandboxViolation

ALLOWED_MODULES = frozenset(
    {"math", "statistics", "decimal", "fractions", "datetime", "re", "json"}
)

FORBIDDEN_NAMES = frozenset(
    {
        "open",
        "exec",
        "eval",
        "compile",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "hasattr",
        "__import__",
        "input",
        "breakpoint",
        "help",
        "exit",
        "quit",
        "memoryview",
        "type",
        "object",
        "super",
        "classmethod",
        "staticmethod",
        "property",
        "dir",
        "id",
        "print_function",
        "__builtins__",
        "__loader__",
        "__spec__",
        "os",
        "sys",
        "subprocess",
        "socket",
        "importlib",
    }
)

# Never allowed, whatever type has them: they reach frames, code, globals or tracebacks.
INTROSPECTION_ATTRIBUTES = frozenset(
    {
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "gi_running",
        "gi_suspended",
        "cr_frame",
        "cr_code",
        "cr_await",
        "cr_origin",
        "cr_running",
        "ag_frame",
        "ag_code",
        "ag_await",
        "ag_running",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "f_trace",
        "f_lasti",
        "f_lineno",
        "tb_frame",
        "tb_next",
        "tb_lasti",
        "tb_lineno",
        "co_code",
        "co_consts",
        "co_names",
        "with_traceback",
        "mro",
        "format",
        "format_map",
    }
)
# Harmless on a value but a submodule on an allowed module (``re.Pattern.scanner``, ``json.scanner``).
MODULE_COLLISIONS = frozenset({"scanner"})

_VALUE_TYPES: tuple[type, ...] = (
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    list,
    tuple,
    dict,
    set,
    frozenset,
    range,
    slice,
    type({}.keys()),
    type({}.values()),
    type({}.items()),
    decimal.Decimal,
    decimal.Context,
    decimal.DecimalTuple,
    fractions.Fraction,
    datetime.date,
    datetime.datetime,
    datetime.time,
    datetime.timedelta,
    datetime.timezone,
    re.Pattern,
    re.Match,
    statistics.NormalDist,
    BaseException,
    StopIteration,
    json.JSONDecodeError,
)


def _public(names: object) -> set[str]:
    return {n for n in names if isinstance(n, str) and not n.startswith("_")}  # type: ignore[attr-defined]


def _allowed_attributes() -> frozenset[str]:
    names: set[str] = set()
    for kind in _VALUE_TYPES:
        names |= _public(dir(kind))
    for module in (math, statistics, decimal, fractions, datetime, re, json):
        names |= _public(getattr(module, "__all__", None) or dir(module))
    return frozenset(names - INTROSPECTION_ATTRIBUTES - MODULE_COLLISIONS)


ALLOWED_ATTRIBUTES = _allowed_attributes()
FORMAT_METHODS = frozenset({"format", "format_map"})
MAX_SOURCE_CHARS = 20_000


def plain_format_string(text: str) -> bool:
    """True if ``text`` used as a format string names no attribute or index (``{0.x}``, ``{0[x]}``)."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:
        return False
    for _literal, field, spec, _conversion in fields:
        if field is not None and ("." in field or "[" in field):
            return False
        if spec and "{" in spec and not plain_format_string(spec):
            return False
    return True


def _check_attribute(node: ast.Attribute) -> None:
    where = f"(line {node.lineno})"
    if not isinstance(node.ctx, ast.Load):
        raise SandboxViolation(
            f"assigning or deleting attribute {node.attr!r} is not allowed {where}"
        )
    if node.attr in FORMAT_METHODS:
        value = node.value
        if not (
            isinstance(value, ast.Constant)
            and isinstance(value.value, str)
            and plain_format_string(value.value)
        ):
            raise SandboxViolation(
                f"{node.attr!r} is allowed only on a constant format string whose fields "
                f"name no attribute or index {where}"
            )
        return
    if node.attr not in ALLOWED_ATTRIBUTES:
        raise SandboxViolation(f"access to attribute {node.attr!r} is not allowed {where}")


_PARSE_LOCK = threading.Lock()


def parse_source(source: str) -> ast.Module:
    """``ast.parse`` with one thread at a time. CPython 3.11 keeps the AST constructor's recursion
    depth in per-interpreter state, so two threads parsing at once can fail with ``SystemError: AST
    constructor recursion depth mismatch`` (python/cpython#106905); the server parses in worker
    threads, and one such error in 2,000 loaded requests came back as a 500."""
    with _PARSE_LOCK:
        return ast.parse(source)


def check_program(source: str) -> ast.Module:
    """Parse ``source`` and reject anything outside the allow-list. Returns the parsed module.

    Raises :class:`SandboxViolation` with the first reason found; never runs the program."""
    if not isinstance(source, str) or not source.strip():
        raise SandboxViolation("empty program")
    if len(source) > MAX_SOURCE_CHARS:
        raise SandboxViolation(f"program is {len(source):,} characters, limit {MAX_SOURCE_CHARS:,}")
    try:
        tree = parse_source(source)
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
        raise SandboxViolation(
            f"program does not parse: {getattr(exc, 'msg', exc)} "
            f"(line {getattr(exc, 'lineno', '?')})"
        ) from None
    except (RecursionError, MemoryError):
        raise SandboxViolation("program is nested too deeply to parse") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in ALLOWED_MODULES:
                    raise SandboxViolation(
                        f"import of {alias.name!r} is not allowed (line {node.lineno})"
                    )
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "") not in ALLOWED_MODULES:
                raise SandboxViolation(
                    f"import from {node.module!r} is not allowed (line {node.lineno})"
                )
            for alias in node.names:
                if alias.name not in ALLOWED_ATTRIBUTES:
                    raise SandboxViolation(
                        f"'from {node.module} import {alias.name}' is not allowed"
                    )
        elif isinstance(node, ast.Attribute):
            _check_attribute(node)
        elif isinstance(node, ast.MatchClass):
            for attr in node.kwd_attrs:
                if attr not in ALLOWED_ATTRIBUTES:
                    raise SandboxViolation(
                        f"matching attribute {attr!r} is not allowed (line {node.lineno})"
                    )
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_NAMES or node.id.startswith("__"):
                raise SandboxViolation(f"use of {node.id!r} is not allowed (line {node.lineno})")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            raise SandboxViolation(f"'global'/'nonlocal' is not allowed (line {node.lineno})")
        elif isinstance(
            node, (ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)
        ):
            raise SandboxViolation(f"{type(node).__name__} is not allowed (line {node.lineno})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
            # Strings are how dunder names get smuggled into lookups built at run time.
            raise SandboxViolation(
                f"string constants containing '__' are not allowed (line {node.lineno})"
            )
    return tree


def function_names(tree: ast.Module) -> list[str]:
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
