"""The process-wide lock on in-process compute, with requests ahead of background work.

In-process compute (the llama.cpp models, the NumPy embedder) uses every core it is given. Two such
computations at once only slow each other down (llama.cpp's threads spin while they wait for
cores), so they take one lock, one after the other. A plain lock is not enough once builds and
audits run in the background: a build's target call can last a minute and more on a small CPU, and
a request that arrives meanwhile (its routing needs the embedder) would wait for all of it: routing
was measured waiting 7, 7 and 102 s behind one build.

So the lock knows two kinds of holder:

* **foreground** (every thread not marked otherwise: request handlers, the CLI, the benchmark
  loop) - acquires as soon as the lock is free, ahead of any background thread that waits;
* **background** (threads marked with :func:`mark_background_thread`, the engine's build and audit
  worker) - acquires only when no foreground thread waits, and while it holds the lock it *yields*
  at the next safe point (:meth:`ComputeLock.should_yield`, checked by the llama.cpp backend before
  every forward pass) once a foreground thread waits and the background work has used up its
  share.

The share is a token bucket: each second the foreground holds the lock earns background work
``background_share`` seconds (at most ``max_credit_s`` saved) that it may keep the lock while a
request waits. Time when no request waits is free. So background work can delay requests by at
most about ``background_share`` of their own compute (plus one forward pass, or one embedding,
which cannot be interrupted), and it still progresses on a machine that is never idle. On a
machine with idle time it runs in that time.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

DEFAULT_BACKGROUND_SHARE = 0.2
MAX_CREDIT_S = 5.0

_local = threading.local()


def mark_background_thread() -> None:
    """Mark the calling thread as background work (a ThreadPoolExecutor ``initializer``)."""
    _local.background = True


def is_background_thread() -> bool:
    return getattr(_local, "background", False)


def thread_waited_s() -> float:
    """Seconds the calling thread has spent, so far, waiting for the compute lock: blocked in
    ``acquire`` or stepped aside in ``pause``. A build subtracts what it waited from its wall time to
    learn what it cost (admission), since on a busy machine a background build waits most of its
    wall time for requests (builds of 18-122 s of wall time, their compute a fraction of it)."""
    return getattr(_local, "waited_s", 0.0)


def compute_clock() -> float:
    """Wall time less the calling thread's waits for the compute lock (:func:`thread_waited_s`): the
    difference of two readings is what the thread computed between them (a build's, or a target
    generalization's, cost to admission)."""
    return time.perf_counter() - thread_waited_s()


def _add_wait(seconds: float) -> None:
    _local.waited_s = thread_waited_s() + seconds


def _share_from_env() -> float:
    raw = os.environ.get("MINICACHE_BACKGROUND_SHARE")
    if not raw:
        return DEFAULT_BACKGROUND_SHARE
    try:
        share = float(raw)
    except ValueError as exc:
        raise ValueError(
            f"MINICACHE_BACKGROUND_SHARE must be a number from 0 to 1, got {raw!r}"
        ) from exc
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"MINICACHE_BACKGROUND_SHARE must be a number from 0 to 1, got {raw!r}")
    return share


class ComputeLock:
    """Re-entrant, like the ``threading.RLock`` it replaces; foreground first; background yields.

    ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        background_share: float | None = None,
        max_credit_s: float = MAX_CREDIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.background_share = _share_from_env() if background_share is None else background_share
        self.max_credit_s = max_credit_s
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._owner_background = False
        self._held_since = 0.0
        self._foreground_waiting = 0
        self._contended_since: float | None = (
            None  # when a request began waiting on a background holder
        )
        self._credit = 0.0
        self.yields = (
            0  # how often background work stepped aside (reported by tests and the benchmark)
        )

    # -- the RLock interface ---------------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = threading.get_ident()
        background = is_background_thread()
        deadline = None if timeout is None or timeout < 0 else self._clock() + timeout
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            if not background:
                self._foreground_waiting += 1
                if (
                    self._owner is not None
                    and self._owner_background
                    and self._contended_since is None
                ):
                    self._contended_since = self._clock()
            began = time.perf_counter()
            try:
                while not self._free_for(background):
                    if not blocking:
                        return False
                    remaining = None if deadline is None else deadline - self._clock()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining)
            finally:
                if not background:
                    self._foreground_waiting -= 1
                _add_wait(time.perf_counter() - began)
            self._take(me, background, depth=1)
            return True

    def release(self) -> None:
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("cannot release a ComputeLock this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._drop()

    def __enter__(self) -> ComputeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- background work stepping aside -------------------------------------------------------
    def should_yield(self) -> bool:
        """True when the calling thread holds the lock as background work, a request waits, and the
        background share is used up. Cheap: the llama.cpp backend asks before every forward pass."""
        if not self._foreground_waiting or not is_background_thread():
            return False
        with self._cond:
            if self._owner != threading.get_ident() or not self._foreground_waiting:
                return False
            since = self._contended_since if self._contended_since is not None else self._clock()
            return self._clock() - since >= min(self._credit, self.max_credit_s)

    def pause(self) -> None:
        """Give the lock to the waiting requests and take it back (at the same depth) once none
        waits. The caller saves and restores whatever the foreground may change meanwhile."""
        me = threading.get_ident()
        with self._cond:
            if self._owner != me:
                raise RuntimeError("cannot pause a ComputeLock this thread does not hold")
            depth = self._depth
            self.yields += 1
            self._drop()
            began = time.perf_counter()
            while not self._free_for(True):
                self._cond.wait()
            _add_wait(time.perf_counter() - began)
            self._take(me, True, depth=depth)

    # -- internals (under self._cond) ---------------------------------------------------------
    def _free_for(self, background: bool) -> bool:
        return self._owner is None and (not background or self._foreground_waiting == 0)

    def _take(self, me: int, background: bool, depth: int) -> None:
        self._owner, self._depth, self._owner_background = me, depth, background
        self._held_since = self._clock()
        if background and self._foreground_waiting:
            self._contended_since = self._held_since
        else:
            self._contended_since = None

    def _drop(self) -> None:
        now = self._clock()
        if self._owner_background:
            if self._contended_since is not None:  # the share it used while a request waited
                self._credit = max(0.0, self._credit - (now - self._contended_since))
        else:
            self._credit = min(
                self.max_credit_s, self._credit + self.background_share * (now - self._held_since)
            )
        self._owner, self._depth, self._owner_background = None, 0, False
        self._contended_since = None
        self._cond.notify_all()


CPU_LOCK = ComputeLock()


# -- whose work it is, and fair admission among tenants ----------------------------------------

_tenant: ContextVar[str | None] = ContextVar("minicache_tenant", default=None)


@contextmanager
def working_for(tenant: str) -> Iterator[None]:
    """Mark the work done inside as ``tenant``'s, for the fair gates below (the sandbox's workers,
    StepCache's checks). A context variable: a thread started by ``asyncio.to_thread`` or anyio
    inherits it, a ``ThreadPoolExecutor`` task does not (wrap what it runs)."""
    token = _tenant.set(tenant)
    try:
        yield
    finally:
        _tenant.reset(token)


def current_tenant() -> str | None:
    """The tenant the calling code works for (:func:`working_for`), or None when unmarked."""
    return _tenant.get()


class _Waiter:
    __slots__ = ("tenant", "granted")

    def __init__(self, tenant: str | None) -> None:
        self.tenant, self.granted = tenant, False


class FairGate:
    """``slots`` holders at once, handed to waiting tenants in turn, with ``reserve`` slots kept for
    tenants that hold none.

    One tenant's load must not delay another's cache hits: a plain semaphore (or queue) serves in
    arrival order, so a tenant sending sixteen programs that run to their time limit holds every
    slot and another tenant's 10 ms hit waits seconds behind them. Here waiting tenants take turns
    (one grant each, round robin, whatever their number of waiters), and a tenant that already
    holds a slot may not take the last ``reserve`` free ones: those are for a tenant that holds
    none, so its first job starts at once. Work not marked with a tenant (tests, the CLI) takes
    turns as one more tenant but is not held back by the reserve. Thread-safe.
    """

    def __init__(self, slots: int, reserve: int = 1) -> None:
        if slots < 1:
            raise ValueError("a FairGate needs at least one slot")
        self.slots = slots
        self.reserve = min(reserve, slots - 1)
        self._free = slots
        self._held: dict[str | None, int] = {}
        self._waiting: dict[str | None, deque[_Waiter]] = {}  # in turn order (dicts keep order)
        self._cond = threading.Condition(threading.Lock())

    def held(self, tenant: str | None) -> int:
        with self._cond:
            return self._held.get(tenant, 0)

    def acquire(self, tenant: str | None, timeout: float | None = None) -> bool:
        """Take a slot for ``tenant``; False if none was granted within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        me = _Waiter(tenant)
        with self._cond:
            self._waiting.setdefault(tenant, deque()).append(me)
            self._grant()
            while not me.granted:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    queue = self._waiting[tenant]
                    queue.remove(me)
                    if not queue:
                        del self._waiting[tenant]
                    self._grant()  # a tenant behind this one may now be admissible
                    return False
                self._cond.wait(left)
            return True

    def release(self, tenant: str | None) -> None:
        with self._cond:
            held = self._held.get(tenant, 0)
            if held <= 0:
                raise RuntimeError(f"release of a FairGate slot tenant {tenant!r} does not hold")
            if held == 1:
                del self._held[tenant]
            else:
                self._held[tenant] = held - 1
            self._free += 1
            self._grant()

    @contextmanager
    def slot(self, tenant: str | None, timeout: float | None = None) -> Iterator[bool]:
        """Hold a slot for the block; yields whether one was granted (the block runs either way)."""
        got = self.acquire(tenant, timeout)
        try:
            yield got
        finally:
            if got:
                self.release(tenant)

    def _admissible(self, tenant: str | None) -> bool:
        if self._free <= 0:
            return False
        return tenant is None or not self._held.get(tenant) or self._free > self.reserve

    def _grant(self) -> None:
        """Hand free slots to waiting tenants in turn (under the lock); a tenant served goes last."""
        granted = False
        progress = True
        while self._free > 0 and progress:
            progress = False
            for tenant in list(self._waiting):
                if not self._admissible(tenant):
                    continue
                queue = self._waiting.pop(tenant)
                waiter = queue.popleft()
                if queue:
                    self._waiting[tenant] = queue  # back of the turn order
                waiter.granted = True
                self._held[tenant] = self._held.get(tenant, 0) + 1
                self._free -= 1
                granted = progress = True
                break
        if granted:
            self._cond.notify_all()


CPU_SECTIONS = FairGate(max(2, os.cpu_count() or 1))
"""The in-process CPU-heavy sections (StepCache's exact checks): as many at once as there are
cores, one tenant never all of them."""


@contextmanager
def cpu_section(tenant: str | None = None) -> Iterator[None]:
    """Run a CPU-heavy section in :data:`CPU_SECTIONS`, for ``tenant`` (or :func:`current_tenant`).

    Python threads share one interpreter lock, so a cache hit's few milliseconds of Python wait for
    every CPU-bound thread in turn; bounding one tenant's CPU-bound threads bounds that wait."""
    with CPU_SECTIONS.slot(tenant if tenant is not None else current_tenant()):
        yield
