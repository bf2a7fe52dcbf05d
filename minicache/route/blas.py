"""NumPy's matrix products on one thread, for the work on a request's path (routing's embedding).

Why: NumPy's wheels ship OpenBLAS, which runs a product on every core and then keeps its worker
threads spinning for a while in case another product comes. Measured on a 2-core VM: after each
routing embedding (about 0.05 s) OpenBLAS burned 0.10 s more of CPU while the process slept, and a
miss's target call starts right after routing, with llama.cpp's threads on both cores. On one thread
the embedding takes 0.06 s instead of 0.046 s and nothing spins after it (`OPENBLAS_NUM_THREADS=1`:
0.000 s of CPU in the same sleep). The products routing does are small (one request, a 384-wide
model), so one thread loses little and leaves the cores to the model.

:func:`one_blas_thread` sets OpenBLAS to one thread for a block and restores what it was. It finds
the OpenBLAS that NumPy loaded through its C entry points (``openblas_set_num_threads`` and the
64-bit-integer, ``scipy_``-prefixed names NumPy's wheels use). Where there is none (another BLAS,
another platform), it does nothing: correctness never depends on it.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np  # noqa: F401 - imported first so that its OpenBLAS is loaded before we look for it

_PREFIXES = ("scipy_openblas_", "openblas_")
_SUFFIXES = ("64_", "")


class _OpenBlas:
    def __init__(self, lib: ctypes.CDLL, prefix: str, suffix: str) -> None:
        self._set = getattr(lib, f"{prefix}set_num_threads{suffix}")
        self._set.argtypes, self._set.restype = [ctypes.c_int], None
        self._get = getattr(lib, f"{prefix}get_num_threads{suffix}")
        self._get.argtypes, self._get.restype = [], ctypes.c_int

    def get(self) -> int:
        return int(self._get())

    def set(self, n: int) -> None:
        self._set(n)


def _loaded_libraries() -> list[str]:
    """Paths of the shared libraries this process has mapped whose name says OpenBLAS."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    paths = {line.split(maxsplit=5)[-1] for line in maps.splitlines() if "openblas" in line.lower()}
    return sorted(p for p in paths if p.startswith("/"))


def _find() -> _OpenBlas | None:
    for path in _loaded_libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                try:
                    return _OpenBlas(lib, prefix, suffix)
                except AttributeError:
                    continue
    return None


_lock = threading.RLock()
_openblas: _OpenBlas | None = None
_searched = False


def openblas() -> _OpenBlas | None:
    """The OpenBLAS NumPy uses, or None where it uses another BLAS (looked up once)."""
    global _openblas, _searched
    with _lock:
        if not _searched:
            _openblas, _searched = _find(), True
        return _openblas


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block's NumPy products on one thread (see the module's docstring); re-entrant.

    The setting is process-wide, so the block holds a lock: two threads in it at once would restore
    each other's value."""
    lib = openblas()
    if lib is None:
        yield
        return
    with _lock:
        before = lib.get()
        if before != 1:
            lib.set(1)
        try:
            yield
        finally:
            if before != 1:
                lib.set(before)
