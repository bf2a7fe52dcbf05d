"""Run untrusted generated programs: an AST allow-list, then a fresh forked process per program.

Generated code never runs in the caller's process. Three layers, each meant to hold if another
fails (see docs/sandbox.md): the static policy (:mod:`.policy`), a restricted interpreter, and an
OS layer (seccomp allow-list, limits) in a child forked per job from a clean zygote (:mod:`._worker`)
so that nothing a program does survives it. :class:`SandboxPool` (:mod:`.pool`) keeps zygotes
started ahead of time and enforces the wall clock; :mod:`.worker` is its end of one zygote.
"""

from minicache.errors import SandboxError, SandboxUnavailable, SandboxViolation  # re-exported
from minicache.sandbox.policy import ALLOWED_MODULES, check_program, function_names, parse_source
from minicache.sandbox.pool import SandboxPool, SandboxResult, default_pool, run_untrusted
from minicache.sandbox.worker import OS_LAYER_ENV

__all__ = [
    "SandboxPool",
    "SandboxResult",
    "SandboxError",
    "SandboxUnavailable",
    "SandboxViolation",
    "check_program",
    "parse_source",
    "function_names",
    "ALLOWED_MODULES",
    "default_pool",
    "run_untrusted",
    "OS_LAYER_ENV",
]
