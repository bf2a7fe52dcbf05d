"""Run untrusted generated programs: an AST allow-list, then a fresh forked process per program.

Generated code never runs in the caller's process. Three layers, each meant to hold if another
fails (see docs/sandbox.md): the static policy (:mod:`.policy`), a restricted interpreter, and an
OS layer (seccomp allow-list, limits) in a child forked per job from a clean zygote (:mod:`._worker`)
so that nothing a program does survives it. :class:`SandboxPool` keeps ``size`` zygotes started
ahead of time, each with a child already forked and waiting, so a cache hit never pays a process
start. The pool enforces the wall clock: a job past it takes its zygote with it (killed with its
process group and replaced in the background); a job past its CPU limit is killed by the kernel
and its zygote carries on.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minicache.errors import SandboxError, SandboxUnavailable, SandboxViolation  # re-exported
from minicache.sandbox.policy import ALLOWED_MODULES, check_program, function_names, parse_source

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

_WORKER = Path(__file__).with_name("_worker.py")
OS_LAYER_ENV = "MINICACHE_SANDBOX_OS_LAYER"
_WALL_GRACE_S = (
    0.25  # past a job's wall-clock limit, for the child to be ready and the reply to travel
)
_HEADER = struct.Struct("!I")  # a job's and a reply's length prefix (as in _worker)
_MAX_FRAME = 4 * 65_536 + 4096  # _worker.MAX_REPLY_BYTES: no reply frame is longer
_log = logging.getLogger(__name__)


def os_layer_setting() -> bool:
    """True unless ``MINICACHE_SANDBOX_OS_LAYER=off`` explicitly asks for the weaker mode."""
    value = os.environ.get(OS_LAYER_ENV, "on").strip().lower()
    if value not in ("on", "off"):
        raise SandboxUnavailable(f"{OS_LAYER_ENV} must be 'on' or 'off', not {value!r}")
    return value == "on"


@dataclass
class SandboxResult:
    value: Any
    stdout: str
    seconds: float
    worker: int = 0  # the pid of the zygote whose child ran the program


def _ended_reply(ended: dict[str, Any]) -> dict[str, Any]:
    """The reply for a child that ended without one, from how the zygote saw it end."""
    sig = ended.get("signal")
    if sig in ("SIGXCPU", "SIGKILL"):  # the soft, then the hard CPU limit
        return {"ok": False, "kind": "timeout", "error": "program exceeded its CPU time limit"}
    if sig:
        return {"ok": False, "kind": "crash", "error": f"the program's process was killed by {sig}"}
    return {
        "ok": False,
        "kind": "crash",
        "error": "the program's process ended without a complete reply",
    }


class _Worker:
    """One zygote process (see :mod:`._worker`), used by one thread at a time (the pool's idle
    queue hands it out). Each child's two pipes arrive ahead of time on a Unix socket: the job is
    written to the child's own job pipe and the reply read from its own reply pipe. A pipe per
    child, not the zygote's stdin: a job its child never read (it died first) cannot become the next
    child's job, and writing to a dead child fails at once instead of blocking."""

    def __init__(self, memory_bytes: int, cpu_s: float, os_layer: bool, python_layer: bool) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    str(_WORKER),
                    str(memory_bytes),
                    str(cpu_s),
                    "on" if os_layer else "off",
                    "on" if python_layer else "off",
                ],
                stdin=subprocess.DEVNULL,
                stdout=theirs.fileno(),
                stderr=subprocess.DEVNULL,
                bufsize=-1,
                cwd="/",
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
                start_new_session=True,
            )
        finally:
            theirs.close()
        self.channel = ours
        self.pid = self.proc.pid
        self.cpu_s = cpu_s
        self._pipes: tuple[int, int] | None = (
            None  # the waiting child's reply pipe (read end), job pipe (write end)
        )
        try:
            ready = (self._receive(time.monotonic() + 30) or ({}, []))[0]
        except ValueError:
            ready = {}
        if not ready.get("ready"):
            self.kill()
            problem = ready.get("error", "the worker did not start")
            raise SandboxUnavailable(
                f"the sandbox's OS layer is unavailable: {problem}. Untrusted programs are not run "
                f"without it; {OS_LAYER_ENV}=off runs them with the Python layer and limits only "
                f"(not safe against hostile programs, see docs/sandbox.md)"
            )
        self.os_layer, self.netns = ready.get("os_layer", "off"), bool(ready.get("netns"))

    def _receive(self, deadline: float) -> tuple[dict[str, Any], list[int]] | None:
        """One message from the zygote and the fds it carries; None on EOF or past the deadline."""
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.channel], [], [], left)[0]:
            return None
        data, fds, _flags, _addr = socket.recv_fds(self.channel, 1 << 16, 2)
        if not data:
            for fd in fds:
                os.close(fd)
            return None
        try:
            return json.loads(data), fds
        except ValueError:
            for fd in fds:
                os.close(fd)
            raise

    def _read_frame(self, fd: int, deadline: float) -> bytes | str:
        """The child's one reply frame, or "eof" / "timeout" / "malformed"."""
        data = bytearray()
        need = _HEADER.size
        while len(data) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return "timeout"
            chunk = os.read(fd, min(need - len(data), 1 << 16))
            if not chunk:
                return "eof"
            data += chunk
            if need == _HEADER.size and len(data) == need:
                size = _HEADER.unpack(data)[0]
                if size > _MAX_FRAME:
                    return "malformed"
                need += size
        return bytes(data[_HEADER.size :])

    def request(self, job: dict[str, Any], wall_s: float) -> dict[str, Any]:
        """Send one job; its reply. Raises SandboxError ("timeout" past ``wall_s``, "crash" if the
        zygote died or sent garbage); the caller then kills this worker and starts another."""
        data = json.dumps(job).encode()
        if self._pipes is None:  # the last child may still be ending (at most its CPU limit)
            self._pipes = self._next_pipe()[1]
        (fd, job_fd), self._pipes = self._pipes, None
        deadline = time.monotonic() + wall_s + _WALL_GRACE_S
        try:
            try:
                sent = self._send(job_fd, _HEADER.pack(len(data)) + data, deadline)
            finally:
                os.close(job_fd)
            if not sent:
                raise SandboxError(
                    f"program exceeded the {wall_s:g}s time limit (its job was not read)",
                    kind="timeout",
                )
            frame = self._read_frame(fd, deadline)
        finally:
            os.close(fd)  # whatever else the child writes goes nowhere
        if frame == "timeout":
            raise SandboxError(f"program exceeded the {wall_s:g}s time limit", kind="timeout")
        if frame == "malformed":
            return {
                "ok": False,
                "kind": "crash",
                "error": "the program's process wrote a malformed reply",
            }
        if frame == "eof":  # the child ended without a reply: the zygote says how
            ended, self._pipes = self._next_pipe()
            return _ended_reply(ended)
        try:
            reply = json.loads(frame)
        except ValueError:
            reply = None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            return {
                "ok": False,
                "kind": "crash",
                "error": "the program's process wrote a malformed reply",
            }
        return reply

    @staticmethod
    def _send(fd: int, data: bytes, deadline: float) -> bool:
        """Write a job to its child's pipe; False if the child has not taken it all by the deadline.

        The pipe holds 64 KiB, so a larger job is taken as the child reads it; a child that is alive
        but not reading (stopped, or still starting on a starved machine) must not block the caller
        past the job's wall clock, which a plain blocking write would."""
        os.set_blocking(fd, False)
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                return False
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
            except OSError as exc:  # EPIPE: no process holds the read end any more
                raise SandboxError(
                    f"the program's process ended before reading its job ({exc})", kind="crash"
                ) from exc
        return True

    def _next_pipe(self) -> tuple[dict[str, Any], tuple[int, int]]:
        """The zygote's next message: how the last child ended, and the next child's two pipes."""
        try:
            got = self._receive(time.monotonic() + self.cpu_s + 10)
        except (ValueError, OSError) as exc:
            raise SandboxError(f"sandbox worker sent garbage: {exc}", kind="crash") from exc
        if got is None or len(got[1]) != 2:
            for fd in got[1] if got else []:
                os.close(fd)
            raise SandboxError(f"sandbox worker died (exit {self.proc.poll()})", kind="crash")
        return got[0].get("ended") or {}, (got[1][0], got[1][1])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=5)
        for closing in (self.proc.stdin, self.channel):
            try:
                if closing:
                    closing.close()
            except OSError:
                pass
        for fd in self._pipes or ():
            os.close(fd)
        self._pipes = None


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
        self._idle: queue.Queue[_Worker] = queue.Queue()
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

    def _start(self) -> _Worker:
        worker = _Worker(self.memory_bytes, self.cpu_s, self.os_layer, self.python_layer)
        with self._stats_lock:
            self.workers.append(worker.pid)
        return worker

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _replace(self, worker: _Worker) -> None:
        def spawn() -> None:
            worker.kill()
            if not self._closed:
                try:
                    self._idle.put(self._start())
                except SandboxError as exc:
                    _log.error("could not replace a sandbox worker: %s", exc)

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
    ) -> SandboxResult:
        """Check ``source`` against the policy, then call ``function(**kwargs)`` in a fresh child.

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
        try:
            worker = self._idle.get(timeout=60)
        except queue.Empty:
            raise SandboxError("no sandbox worker became free within 60 s", kind="busy") from None
        began = time.perf_counter()
        try:
            reply = worker.request(job, wall)
        except SandboxError as exc:  # the wall clock ran out, or the zygote failed: start another
            self._count("timeouts" if exc.kind == "timeout" else "crashes")
            self._replace(worker)
            raise
        except (
            BaseException
        ):  # anything else (an interrupt, a bug): the worker's state is unknown, so
            self._count(
                "crashes"
            )  # it is replaced too; kept out of the pool, it would be lost for good
            self._replace(worker)
            raise
        self._idle.put(worker)
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
