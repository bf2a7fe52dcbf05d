"""Sandbox worker: a zygote that forks one fresh, sealed child per untrusted program.

Started by :class:`minicache.sandbox.SandboxPool` as ``python -I -S _worker.py MEMORY CPU OS PY``
(isolated mode, no site-packages, an environment without the caller's variables, cwd ``/``) with a
Unix socket to the pool as fd 1. It imports the allowed modules once (with the restricted
interpreter, :mod:`_restricted`, a sibling module), then loops: fork a child, hand the pool that
child's reply pipe, wait for the child to end.

Why a zygote and not a long-lived worker: whatever a program does to its interpreter (``math.sqrt
= ...``, ``json.dumps = ...``, ``decimal.getcontext().prec = 2``) dies with its child, and the next
job starts from the zygote's untouched copy. The zygote itself never runs untrusted code and never
sees a job or a reply: each child has its own job pipe (its fd 0) and reply pipe, whose other
ends only the pool holds; the pool writes one length-prefixed job and reads one reply. A job its
child never read dies with that child's pipe, so no later child can take it for its own. So the
memory a child inherits holds no other tenant's variables or answers.

The child, before it sees a job: points fds 1-2 at /dev/null (fd 1 is the zygote's socket to the
pool) and closes every other fd but its reply pipe and its job pipe (fd 0), lowers its limits
(address space, CPU, file size, core dumps), asks to die with its parent, installs the seccomp
allow-list (see ``_seccomp``) and runs a trusted warm-up. Then it reads its job, closes fd 0, runs the program,
writes one length-prefixed reply and exits. The pool reads one frame and closes the pipe, so
nothing a program writes beyond its own reply reaches anyone.
"""

import array
import io
import json
import math
import os
import resource
import signal
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir out
import _restricted  # type: ignore[import-not-found]  # minicache/sandbox/_restricted.py, a sibling
import _seccomp  # type: ignore[import-not-found]  # minicache/sandbox/_seccomp.py, a sibling

# JSON escapes can grow text; the pool reads no more than this.
MAX_REPLY_BYTES = 4 * _restricted.MAX_RESULT_CHARS + 4096
MAX_JOB_BYTES = 8 * 2**20
# The child's own references: a program rebinding json.dumps cannot reach them.
_dumps, _loads = json.dumps, json.loads
_HEADER = struct.Struct("!I")
# A child's exit status when its job pipe closed unwritten (the pool is gone): the zygote exits too.
_NO_JOB = 17


def _read_exact(fd, n):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


_WARM_UP = {
    "source": "import math, json\ndef solve(x=2, y=1.5):\n    return round(math.sqrt(x * 3 + y), 2)\n",
    "kwargs": {"x": 3},
}


def _seal(reply_w, devnull, memory, cpu_s, installer):
    """Cut the child off before it sees a job: fds, limits, then the seccomp filter."""
    for fd in (1, 2):  # fd 1 is the zygote's channel to the pool
        os.dup2(devnull, fd)
    os.closerange(3, reply_w)
    os.closerange(reply_w + 1, 65536)
    cpu = max(1, math.ceil(cpu_s))
    for kind, soft, hard in (
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_FSIZE, 0, 0),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(kind, (soft, hard))
    if installer is not None:
        installer.die_with_parent()
        installer.install()


def _take_job():
    """Read this child's one job from fd 0, then close fd 0 so the program cannot read the next."""
    header = _read_exact(0, _HEADER.size)
    if header is None:
        os._exit(_NO_JOB)  # the pool closed: no job will come
    size = _HEADER.unpack(header)[0]
    raw = _read_exact(0, size) if size <= MAX_JOB_BYTES else None
    os.close(0)
    job = _loads(raw) if raw is not None else None
    if not isinstance(job, dict):
        raise ValueError("malformed job")
    return job


def _child(reply_w, devnull, memory, cpu_s, installer, python_layer):
    """Runs in the forked child; never returns.

    Everything before the job arrives (sealing, and one trusted warm-up run that takes the
    copy-on-write page faults a first run would pay) happens while the worker is idle, so a
    request waits only for its own program."""
    try:
        _seal(reply_w, devnull, memory, cpu_s, installer)
        del installer
        sys.modules.pop("_seccomp", None)
        _restricted.run(_WARM_UP, True)
        json.loads(json.dumps({"ok": True, "value": [1, 2.5, "x"], "stdout": ""}))
    except BaseException as exc:  # noqa: BLE001 - the program must not run without its limits
        _take_job()
        reply = {"ok": False, "kind": "crash", "error": f"sandbox child setup failed: {exc}"}
    else:
        try:
            reply = _restricted.run(_take_job(), python_layer)
        except BaseException as exc:  # noqa: BLE001 - the child must always reply
            reply = {
                "ok": False,
                "kind": "crash",
                "error": f"sandbox child could not read its job: {exc}",
            }
    try:
        data = _dumps(reply).encode()
    except BaseException:  # noqa: BLE001 - a hostile result may break the encoder in any way
        data = b'{"ok": false, "kind": "result", "error": "the result cannot be encoded"}'
    if len(data) > MAX_REPLY_BYTES - _HEADER.size:
        data = b'{"ok": false, "kind": "result", "error": "the reply is too large"}'
    frame = _HEADER.pack(len(data)) + data
    view = memoryview(frame)
    while view:
        view = view[os.write(reply_w, view) :]
    os._exit(0)


def _ending(status):
    """How a child ended, as the pool reads it when no complete reply came."""
    if os.WIFSIGNALED(status):
        return {"signal": signal.Signals(os.WTERMSIG(status)).name}
    return {"exit": os.WEXITSTATUS(status)}


class Zygote:
    """The trusted parent: forks one child at a time and hands the pool the child's reply pipe.

    For each child the zygote sends the pool one message on its socket (fd 1): the read end of
    that child's fresh reply pipe, with how the previous child ended. The pool reads the reply
    straight from the pipe, so a reply crosses two processes (child, pool) and never passes
    through the zygote, which sleeps in ``waitpid`` while a job runs. The wall clock is the
    pool's: on a timeout it kills this zygote's process group and starts another."""

    def __init__(self, memory, cpu_s, os_layer, python_layer):
        self.memory, self.cpu_s, self.python_layer = memory, cpu_s, python_layer
        self.installer = _seccomp.Installer() if os_layer else None
        self.devnull = os.open(os.devnull, os.O_RDWR)

    def fork(self):
        """A child with its own job pipe (as its fd 0) and reply pipe; the pool gets the other ends."""
        reply_r, reply_w = os.pipe()
        job_r, job_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(reply_r)
                os.close(job_w)
                os.dup2(job_r, 0)
                os.close(job_r)
                _child(
                    reply_w,
                    self.devnull,
                    self.memory,
                    self.cpu_s,
                    self.installer,
                    self.python_layer,
                )
            finally:
                os._exit(1)  # whatever happened, the child never returns into the zygote's loop
        os.close(reply_w)
        # Only the child may read its job: once it is gone, a write to the pipe fails.
        os.close(job_r)
        return pid, reply_r, job_w

    def serve(self, channel):
        """Until the pool goes (a child reads no job): fork a child, hand over its pipes, wait for it."""
        ended = None
        while True:
            pid, reply_r, job_w = self.fork()
            message = _dumps({"ended": ended}).encode()
            channel.sendmsg(
                [message],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [reply_r, job_w]))],
            )
            # The pool's copies are the only ones: nothing here can read a reply or write a job.
            os.close(reply_r)
            os.close(job_w)
            status = os.waitpid(pid, 0)[1]
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _NO_JOB:
                return
            ended = _ending(status)


def _probe(zygote):
    """Fork once with the filter on and check that opening a file is refused; None if it holds."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            zygote.installer.install()
            try:
                os.close(os.open("/", os.O_RDONLY))
                code = 4
            except PermissionError:
                code = 0
        finally:
            os._exit(code)
    status = os.waitpid(pid, 0)[1]
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return None
    return {
        3: "the kernel refused the seccomp filter",
        4: "the seccomp filter did not block open()",
    }.get(
        os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1,
        f"the probe ended with status {status}",
    )


def main():
    memory, cpu_s = int(sys.argv[1]), float(sys.argv[2])
    os_layer, python_layer = sys.argv[3] == "on", sys.argv[4] == "on"
    sys.stdout = sys.stderr = io.StringIO()  # stray writes cannot reach the protocol (fd 1)
    _restricted.prewarm(python_layer)
    ready = {"ready": True, "os_layer": "seccomp" if os_layer else "off", "netns": False}
    try:
        # The zygote waits on its children through pidfds (Linux 5.3+).
        os.close(os.pidfd_open(os.getpid()))
        zygote = Zygote(memory, cpu_s, os_layer, python_layer)
        if os_layer:
            problem = _probe(zygote)
            if problem:
                raise OSError(problem)
            ready["netns"] = _seccomp.unshare_network()
    except (OSError, AttributeError) as exc:
        ready = {"ready": False, "error": str(exc)}
    os.write(1, (json.dumps(ready) + "\n").encode())
    if not ready["ready"]:
        return
    import gc

    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on the first collection
    zygote.serve(socket.socket(fileno=1))


if __name__ == "__main__":
    main()
