"""The OS layer: a seccomp-BPF allow-list, assembled by hand and installed with ``prctl``.

Why by hand: the filter is about forty instructions and needs nothing but ``ctypes`` and the
kernel, so the sandbox gains an OS layer without a new dependency. Why an allow-list: a job that
only computes and writes one reply to a pipe it already holds needs a dozen system calls; anything
a hostile program could use to reach the host (``openat``, ``socket``, ``connect``, ``execve``,
``clone``/``fork``, ``kill``, ``ptrace``, ``prlimit64``, ...) is simply not on the list.

A call off the list fails with ``EPERM`` rather than killing the process, so a program that trips
it (directly, or through a lazy import that would open a file) gets an ordinary Python error
instead of a crash. A call made under another ABI (32-bit ``int 0x80`` or x32) kills the process
outright: syscall numbers differ there and the allow-list would not mean what it says.

Imported by the sandbox worker (run as a script with ``-I -S``) and by the pool for its probe, so
it uses the standard library only. x86-64 only; :func:`supported` says why not elsewhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import struct

# <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>, <linux/prctl.h>
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_KILL_PROCESS = 0x80000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM = 1
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
PROT_EXEC = 0x4
# seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_OFF_NR, _OFF_ARCH = 0, 4


def _off_arg_low(i: int) -> int:
    return 16 + 8 * i  # little-endian: the low 32 bits come first


# What computing a value and writing one reply needs (x86-64 numbers). Nothing here opens, names
# or creates anything: file descriptors are only those the trusted code left open.
ALLOWED_SYSCALLS = {
    "read": 0,
    "write": 1,
    "close": 3,
    "brk": 12,
    "rt_sigprocmask": 14,
    "rt_sigreturn": 15,
    "mremap": 25,
    "madvise": 28,
    "munmap": 11,
    "sched_yield": 24,
    "nanosleep": 35,
    "getpid": 39,
    "exit": 60,
    "gettimeofday": 96,
    "getrusage": 98,
    "sigaltstack": 131,
    "gettid": 186,
    "time": 201,
    "futex": 202,
    "restart_syscall": 219,
    "clock_gettime": 228,
    "clock_getres": 229,
    "clock_nanosleep": 230,
    "exit_group": 231,
    "getrandom": 318,
}
# Allowed only without PROT_EXEC (argument 2): memory, yes; new machine code, no.
NO_EXEC_SYSCALLS = {"mmap": 9, "mprotect": 10}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter() -> bytes:
    """The BPF program as bytes (struct sock_filter[])."""
    allowed = sorted(ALLOWED_SYSCALLS.values())
    no_exec = sorted(NO_EXEC_SYSCALLS.values())
    # Layout: [arch][x32][allow tests][no-exec tests] deny, ld arg2, jset exec, allow, deny, kill
    # (BPF jumps only go forward, hence the second deny after the PROT_EXEC test).
    n_tests = len(allowed) + len(no_exec)
    deny_at = 4 + n_tests
    prot_at = deny_at + 1
    allow_at = prot_at + 2
    deny_exec_at = allow_at + 1
    kill_at = deny_exec_at + 1
    prog: list[bytes] = []

    def jump(target: int) -> int:  # relative to the next instruction
        offset = target - (len(prog) + 1)
        if not 0 <= offset <= 255:
            raise ValueError("seccomp filter too long for 8-bit jumps")
        return offset

    prog.append(_insn(_LD_W_ABS, 0, 0, _OFF_ARCH))
    prog.append(_insn(_JEQ_K, 0, jump(kill_at), AUDIT_ARCH_X86_64))
    prog.append(_insn(_LD_W_ABS, 0, 0, _OFF_NR))
    prog.append(_insn(_JGE_K, jump(kill_at), 0, X32_SYSCALL_BIT))
    for nr in allowed:
        prog.append(_insn(_JEQ_K, jump(allow_at), 0, nr))
    for nr in no_exec:
        prog.append(_insn(_JEQ_K, jump(prot_at), 0, nr))
    assert len(prog) == deny_at
    prog.append(_insn(_RET_K, 0, 0, RET_ERRNO | EPERM))
    prog.append(_insn(_LD_W_ABS, 0, 0, _off_arg_low(2)))
    prog.append(_insn(_JSET_K, jump(deny_exec_at), 0, PROT_EXEC))
    assert len(prog) == allow_at
    prog.append(_insn(_RET_K, 0, 0, RET_ALLOW))
    prog.append(_insn(_RET_K, 0, 0, RET_ERRNO | EPERM))
    assert len(prog) == kill_at
    prog.append(_insn(_RET_K, 0, 0, RET_KILL_PROCESS))
    return b"".join(prog)


def supported() -> str | None:
    """None if this machine can run the filter, else the reason it cannot."""
    if platform.system() != "Linux":
        return f"seccomp needs Linux, this is {platform.system()}"
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"the seccomp allow-list is written for x86-64, this machine is {platform.machine()}"
    return None


class Installer:
    """Everything the filter needs, prepared before fork so the child only makes two prctl calls."""

    def __init__(self) -> None:
        reason = supported()
        if reason:
            raise OSError(reason)
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._prctl = self._libc.prctl
        self._prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        self._prctl.restype = ctypes.c_int
        code = build_filter()
        self._filter = ctypes.create_string_buffer(code, len(code))

        class _Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self._fprog = _Fprog(len(code) // 8, ctypes.addressof(self._filter))
        self._fprog_addr = ctypes.addressof(self._fprog)

    def die_with_parent(self, signal_number: int = 9) -> None:
        """Kill this process if its parent (the worker) dies, so no job outlives its worker."""
        self._prctl(PR_SET_PDEATHSIG, signal_number, 0, 0, 0)

    def install(self) -> None:
        """Apply the filter to this process (irreversibly). Raises OSError if the kernel refuses."""
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self._fprog_addr, 0, 0) != 0:
            raise OSError(
                ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed: seccomp filters unavailable"
            )


def unshare_network() -> bool:
    """Move the calling process into a new, empty network namespace (only loopback, down).

    Defence in depth under the filter (which already refuses ``socket``): if it works, even a
    filter bypass finds no network. Needs CAP_SYS_ADMIN or user namespaces; False if refused.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.unshare(0x40000000) == 0  # CLONE_NEWNET
    except (OSError, AttributeError):
        return False
