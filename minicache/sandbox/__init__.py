"""Run untrusted generated programs: AST allow-list, then a pre-started worker process with limits.

Generated code never runs in the caller's process. :class:`SandboxPool` keeps ``size`` worker
processes started ahead of time so that a cache hit never pays a process start; a worker that
times out, crashes or exceeds a limit is killed and replaced in the background.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .policy import ALLOWED_MODULES, SandboxError, SandboxViolation, check_program, function_names

__all__ = ["SandboxPool", "SandboxResult", "SandboxError", "SandboxViolation", "check_program",
           "function_names", "ALLOWED_MODULES", "default_pool", "run_untrusted"]

_WORKER = Path(__file__).with_name("_worker.py")


@dataclass
class SandboxResult:
    value: Any
    stdout: str
    seconds: float


class _Worker:
    def __init__(self, memory_bytes: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(_WORKER), str(memory_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1, cwd="/", env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
            start_new_session=True)
        self._replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._replies.get(timeout=30)
        if not ready or not json.loads(ready).get("ready"):
            self.kill()
            raise SandboxError("sandbox worker failed to start", kind="crash")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def request(self, job: dict[str, Any], wall_s: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise SandboxError(f"sandbox worker died: {exc}", kind="crash") from exc
        try:
            line = self._replies.get(timeout=wall_s)
        except queue.Empty:
            raise SandboxError(f"program exceeded the {wall_s:g}s time limit", kind="timeout") from None
        if line is None:
            code = self.proc.poll()
            kind = "timeout" if code in (-24, -9) else "crash"  # SIGXCPU / SIGKILL
            raise SandboxError(f"sandbox worker died running the program (exit {code})", kind=kind)
        return json.loads(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe:
                    pipe.close()
            except OSError:
                pass


class SandboxPool:
    """A pool of pre-started sandbox workers. Thread-safe; use as a context manager or call close()."""

    def __init__(self, size: int = 2, *, timeout_s: float = 2.0, cpu_s: float = 2.0,
                 memory_mb: int = 512) -> None:
        self.size = size
        self.timeout_s = timeout_s
        self.cpu_s = cpu_s
        self.memory_bytes = memory_mb * 2**20
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._closed = False
        self.stats = {"runs": 0, "violations": 0, "errors": 0, "timeouts": 0, "crashes": 0, "replaced": 0}
        self._stats_lock = threading.Lock()
        for _ in range(size):
            self._idle.put(_Worker(self.memory_bytes))

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _replace(self) -> None:
        def spawn() -> None:
            if not self._closed:
                self._idle.put(_Worker(self.memory_bytes))
        self._count("replaced")
        threading.Thread(target=spawn, daemon=True).start()

    def run(self, source: str, kwargs: dict[str, Any] | None = None, *, function: str = "solve",
            timeout_s: float | None = None) -> SandboxResult:
        """Check ``source`` against the allow-list, then call ``function(**kwargs)`` in a worker.

        Raises :class:`SandboxViolation` (not run) or :class:`SandboxError` (ran and failed).
        """
        try:
            check_program(source)
        except SandboxViolation:
            self._count("violations")
            raise
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        kwargs = kwargs or {}
        try:
            json.dumps(kwargs)
        except (TypeError, ValueError) as exc:
            raise SandboxError(f"arguments are not JSON-serializable: {exc}") from exc
        wall = timeout_s or self.timeout_s
        worker = self._idle.get(timeout=60)
        began = time.perf_counter()
        try:
            reply = worker.request({"source": source, "function": function, "kwargs": kwargs,
                                    "cpu_s": self.cpu_s}, wall)
        except SandboxError as exc:
            worker.kill()
            self._count("timeouts" if exc.kind == "timeout" else "crashes")
            self._replace()
            raise
        if not worker.alive():
            self._replace()
        else:
            self._idle.put(worker)
        self._count("runs")
        if not reply.get("ok"):
            self._count("errors")
            raise SandboxError(reply.get("error", "program failed"), kind=reply.get("kind", "error"))
        return SandboxResult(reply.get("value"), reply.get("stdout", ""), time.perf_counter() - began)

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().kill()
            except queue.Empty:
                break

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """A process-wide pool, started on first use."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = SandboxPool()
        return _default


def run_untrusted(source: str, kwargs: dict[str, Any] | None = None, function: str = "solve") -> Any:
    """Convenience: run in the default pool and return the value."""
    return default_pool().run(source, kwargs, function=function).value
