"""The pool's end of one sandbox zygote (:mod:`._worker`): start it, send a job, read its reply.

The protocol is one job and one reply per forked child: the zygote passes each waiting child's two
pipes to the pool over a Unix socket, the pool writes a length-prefixed JSON job to the child's
job pipe and reads one length-prefixed JSON reply from its reply pipe, within the job's wall clock.
A child that ends without a reply is described by the zygote's next message (how it ended).
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from minicache.errors import SandboxError, SandboxUnavailable

WORKER_SCRIPT = Path(__file__).with_name("_worker.py")
OS_LAYER_ENV = "MINICACHE_SANDBOX_OS_LAYER"
# Past a job's wall-clock limit, for the child to be ready and the reply to travel.
_WALL_GRACE_S = 0.25
_HEADER = struct.Struct("!I")  # a job's and a reply's length prefix (as in _worker)
_MAX_FRAME = 4 * 65_536 + 4096  # _worker.MAX_REPLY_BYTES: no reply frame is longer


def _ready(fd: int | socket.socket, events: int, seconds: float) -> bool:
    """Whether ``fd`` becomes ready for ``events`` (``select.POLLIN`` / ``POLLOUT``) within ``seconds``.

    ``poll``, not ``select``: ``select`` cannot watch a descriptor above 1023, and a server holding
    a thousand idle connections hands the sandbox descriptors above that. A hang-up or error counts
    as ready, so that the read or write that follows reports it."""
    if seconds <= 0:
        return False
    poller = select.poll()
    poller.register(fd, events)
    return bool(poller.poll(max(1, int(seconds * 1000))))


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


class Worker:
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
                    str(WORKER_SCRIPT),
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
        # The waiting child's reply pipe (read end) and job pipe (write end).
        self._pipes: tuple[int, int] | None = None
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
        if not _ready(self.channel, select.POLLIN, left):
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
            if not _ready(fd, select.POLLIN, left):
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
            if not _ready(fd, select.POLLOUT, left):
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
