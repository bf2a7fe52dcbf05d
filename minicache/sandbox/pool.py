"""The sandbox pool: zygotes started ahead of time, one job at a time each, and the wall clock.

:class:`SandboxPool` keeps ``size`` zygotes (:class:`~.worker.Worker`) started ahead of time, each
with a child already forked and waiting, so a cache hit never pays a process start. The pool
enforces the wall clock: a job past it takes its zygote with it (killed with its process group and
replaced in the background); a job past its CPU limit is killed by the kernel and its zygote
carries on. Workers are handed out by a :class:`~minicache.models.compute.FairGate`: tenants take
turns, and one worker stays free for a tenant that holds none, so that one tenant's programs
running to their time limit cannot hold every worker while another tenant's hit waits. A timed-out
job's tenant keeps its slot until the worker that replaces the killed one is ready.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import resource
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any

from minicache.errors import SandboxError, SandboxUnavailable, SandboxViolation
from minicache.models.compute import FairGate, current_tenant
from minicache.sandbox.policy import check_program
from minicache.sandbox.worker import OS_LAYER_ENV, Worker

_log = logging.getLogger(__name__)


def os_layer_setting() -> bool:
    """True unless ``MINICACHE_SANDBOX_OS_LAYER=off`` explicitly asks for the weaker mode."""
    value = os.environ.get(OS_LAYER_ENV, "on").strip().lower()
    if value not in ("on", "off"):
        raise SandboxUnavailable(f"{OS_LAYER_ENV} must be 'on' or 'off', not {value!r}")
    return value == "on"


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open descriptors to its hard limit; the new soft limit.

    A server holds a descriptor per connection and the sandbox a few per job; the soft limit
    (often 1,024) is what a flood of idle connections would otherwise exhaust, while the hard limit
    is usually far higher. Where the limit cannot be changed the process keeps what it has."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or (hard != resource.RLIM_INFINITY and soft > hard):
        return soft
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target


@dataclass
class SandboxResult:
    value: Any
    stdout: str
    seconds: float
    worker: int = 0  # the pid of the zygote whose child ran the program


class SandboxPool:
    """A pool of pre-started sandbox zygotes. Thread-safe; use as a context manager or call close().

    ``unsafe_no_python_layer`` is for tests only: it skips the static check and gives programs the
    real builtins, so that a test can show what the OS layer stops on its own.
    """

    def __init__(
        self,
        size: int = 2,
        *,
        timeout_s: float = 2.0,
        cpu_s: float = 2.0,
        memory_mb: int = 512,
        unsafe_no_python_layer: bool = False,
    ) -> None:
        raise_open_file_limit()
        self.size = size
        self.timeout_s = timeout_s
        self.cpu_s = cpu_s
        self.memory_bytes = memory_mb * 2**20
        self.os_layer = os_layer_setting()
        self.python_layer = not unsafe_no_python_layer
        if not self.os_layer:
            message = (
                f"{OS_LAYER_ENV}=off: the sandbox runs untrusted programs WITHOUT its OS layer "
                "(no seccomp filter). Do not use this with programs anyone else can influence."
            )
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            _log.warning(message)
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._gate = FairGate(size)
        self._closed = False
        self.stats = {
            "runs": 0,
            "violations": 0,
            "errors": 0,
            "timeouts": 0,
            "crashes": 0,
            "replaced": 0,
        }
        self._stats_lock = threading.Lock()
        self.workers: list[int] = []
        try:
            for _ in range(size):
                self._idle.put(self._start())
        except BaseException:
            self.close()
            raise
        self.netns = all(w.netns for w in list(self._idle.queue))

    def _start(self) -> Worker:
        worker = Worker(self.memory_bytes, self.cpu_s, self.os_layer, self.python_layer)
        with self._stats_lock:
            self.workers.append(worker.pid)
        return worker

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _replace(self, worker: Worker, tenant: str | None) -> None:
        def spawn() -> None:
            try:
                worker.kill()
                if not self._closed:
                    try:
                        self._idle.put(self._start())
                    except SandboxError as exc:
                        _log.error("could not replace a sandbox worker: %s", exc)
            finally:
                self._gate.release(tenant)  # the job's tenant waited for the replacement

        self._count("replaced")
        with self._stats_lock:
            if worker.pid in self.workers:
                self.workers.remove(worker.pid)
        threading.Thread(target=spawn, daemon=True).start()

    def run(
        self,
        source: str,
        kwargs: dict[str, Any] | None = None,
        *,
        function: str = "solve",
        timeout_s: float | None = None,
        tenant: str | None = None,
    ) -> SandboxResult:
        """Check ``source`` against the policy, then call ``function(**kwargs)`` in a fresh child,
        for ``tenant`` (by default :func:`~minicache.models.compute.current_tenant`).

        Raises :class:`SandboxViolation` (not run) or :class:`SandboxError` (ran and failed).
        """
        if self.python_layer:
            try:
                check_program(source)
            except SandboxViolation:
                self._count("violations")
                raise
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        kwargs = kwargs or {}
        wall = timeout_s or self.timeout_s
        try:
            job = {"source": source, "function": function, "kwargs": kwargs, "wall_s": wall}
            json.dumps(job)
        except (TypeError, ValueError) as exc:
            raise SandboxError(f"arguments are not JSON-serializable: {exc}") from exc
        tenant = tenant if tenant is not None else current_tenant()
        busy = SandboxError("no sandbox worker became free within 60 s", kind="busy")
        began = time.monotonic()
        if not self._gate.acquire(tenant, timeout=60):
            raise busy
        try:  # a slot granted, a worker is idle or being replaced
            worker = self._idle.get(timeout=max(0.1, 60 - (time.monotonic() - began)))
        except queue.Empty:
            self._gate.release(tenant)
            raise busy from None
        began = time.perf_counter()
        try:
            reply = worker.request(job, wall)
        except SandboxError as exc:  # the wall clock ran out, or the zygote failed: start another
            self._count("timeouts" if exc.kind == "timeout" else "crashes")
            self._replace(worker, tenant)
            raise
        except BaseException:
            # Anything else (an interrupt, a bug): the worker's state is unknown, so it is
            # replaced too; kept out of the pool, it would be lost for good.
            self._count("crashes")
            self._replace(worker, tenant)
            raise
        self._idle.put(worker)
        self._gate.release(tenant)
        self._count("runs")
        if not reply.get("ok"):
            kind = str(reply.get("kind", "error"))
            self._count({"timeout": "timeouts", "crash": "crashes"}.get(kind, "errors"))
            raise SandboxError(str(reply.get("error", "program failed")), kind=kind)
        return SandboxResult(
            reply.get("value"),
            str(reply.get("stdout", "")),
            time.perf_counter() - began,
            worker.pid,
        )

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


def run_untrusted(
    source: str, kwargs: dict[str, Any] | None = None, function: str = "solve"
) -> Any:
    """Convenience: run in the default pool and return the value."""
    return default_pool().run(source, kwargs, function=function).value
