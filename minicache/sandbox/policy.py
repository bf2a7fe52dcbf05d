"""The static half of the sandbox: an AST allow-list that generated programs must pass.

This runs in the caller's process but never executes the program; it only parses it. The dynamic
half (separate process, restricted builtins, resource limits) is in :mod:`._worker`.
"""

from __future__ import annotations

import ast

from ..errors import MiniCacheError

ALLOWED_MODULES = frozenset({"math", "statistics", "decimal", "fractions", "datetime", "re", "json"})

FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "hasattr", "__import__", "input", "breakpoint", "help", "exit", "quit", "memoryview", "type",
    "object", "super", "classmethod", "staticmethod", "property", "dir", "id", "print_function",
    "__builtins__", "__loader__", "__spec__", "os", "sys", "subprocess", "socket", "importlib",
})

MAX_SOURCE_CHARS = 20_000


class SandboxViolation(MiniCacheError):
    """The program uses something outside the sandbox's allow-list; it was not run."""


class SandboxError(MiniCacheError):
    """The program ran in the sandbox but failed: exception, timeout, resource limit, bad result."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind  # "error" | "timeout" | "memory" | "crash" | "result"


def check_program(source: str) -> ast.Module:
    """Parse ``source`` and reject anything outside the allow-list. Returns the parsed module."""
    if not isinstance(source, str) or not source.strip():
        raise SandboxViolation("empty program")
    if len(source) > MAX_SOURCE_CHARS:
        raise SandboxViolation(f"program is {len(source):,} characters, limit {MAX_SOURCE_CHARS:,}")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SandboxViolation(f"program does not parse: {exc.msg} (line {exc.lineno})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_MODULES or "." in alias.name:
                    raise SandboxViolation(f"import of {alias.name!r} is not allowed (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "") not in ALLOWED_MODULES:
                raise SandboxViolation(f"import from {node.module!r} is not allowed (line {node.lineno})")
            for alias in node.names:
                if alias.name == "*" or alias.name.startswith("_"):
                    raise SandboxViolation(f"'from {node.module} import {alias.name}' is not allowed")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                raise SandboxViolation(f"access to attribute {node.attr!r} is not allowed (line {node.lineno})")
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_NAMES or node.id.startswith("__"):
                raise SandboxViolation(f"use of {node.id!r} is not allowed (line {node.lineno})")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            raise SandboxViolation(f"'global'/'nonlocal' is not allowed (line {node.lineno})")
        elif isinstance(node, (ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
            raise SandboxViolation(f"{type(node).__name__} is not allowed (line {node.lineno})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
            # Strings are how dunder names get smuggled into format() or re-built lookups.
            raise SandboxViolation(f"string constants containing '__' are not allowed (line {node.lineno})")
    return tree


def function_names(tree: ast.Module) -> list[str]:
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
