"""When a group is built, and where: :class:`BuildQueue` offers a group to :class:`~minicache.build.builder.Builder`
once it has enough examples, is not backing off, has no entry, and admission expects the build to pay
(:mod:`minicache.build.admission`); the build then runs on the engine's shared background worker (one at a
time, so builds queue instead of competing for the two cores) or inline when background builds are off.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from minicache.build.builder import Builder
from minicache.build.failures import backing_off
from minicache.config.engine import EngineConfig
from minicache.models.compute import working_for

log = logging.getLogger(__name__)


class BuildQueue:
    """When a group is built (enough examples, not backing off, admitted) and where: on the shared
    background worker, or inline when background builds are off. A build that raises is logged."""

    def __init__(
        self, builder: Builder, executor: ThreadPoolExecutor, config: EngineConfig
    ) -> None:
        self.builder, self.executor, self.config = builder, executor, config
        self.running: dict[tuple[str, str], Future[Any]] = {}  # (tenant, group id) -> its build
        self.lock = threading.Lock()

    def maybe_build(self, tenant: str, group_id: str) -> None:
        """Start a build of the group if it has enough examples and its arrivals predict it pays."""
        store, admission = self.builder.store, self.builder.admission
        if self.config.frozen:
            return
        group = store.get_group(tenant, group_id)
        if (
            group is None
            or group.n_examples < self.config.build_after
            and not self._early(group.n_examples)
        ):
            return
        failure = store.group_failure(tenant, group_id) if group.build_failures else None
        if group.build_failures and backing_off(group, failure):
            return
        if store.active_entry(tenant, group_id) is not None:
            return
        seen, first_misses, _ = self.builder.admission_view(tenant, group_id, group.n_examples)
        samples = self.samples_planned(group.n_examples, failure)
        if not admission.admits(tenant, seen, first_misses, group.build_failures, samples)[
            0
        ]:  # no hits that pay
            return
        key = (tenant, group_id)
        with self.lock:
            running = self.running.get(key)
            if running is not None and not running.done():
                return
            if self.config.background_builds:
                future = self.executor.submit(self._build, tenant, group_id)
                future.add_done_callback(lambda done: self._done(tenant, group_id, done))
                self.running[key] = future
                return
        try:
            self._build(tenant, group_id)
        except Exception as exc:  # noqa: BLE001 - a failed build must not fail the request that triggered it
            self._crashed(tenant, group_id, exc)

    def samples_planned(self, n_examples: int, failure: dict[str, Any] | None) -> int:
        """The target calls a build of a group with ``n_examples`` draws for self-consistency
        (``build_samples`` per held example: the newest ``validate_n`` and those its last failure
        recorded, :func:`~minicache.build.failures.validation_set`); 0 without samples."""
        k = self.config.build_samples
        if k <= 1:
            return 0
        recorded = (
            len(failure.get("examples", [])) + len(failure.get("requests", [])) if failure else 0
        )
        return k * min(n_examples, self.config.validate_n + recorded)

    def _build(self, tenant: str, group_id: str) -> Any:
        """The build, as the tenant's work: its sandbox jobs take the tenant's turns."""
        with working_for(tenant):
            return self.builder.build(tenant, group_id)

    def _early(self, n_examples: int) -> bool:
        """Whether a group with fewer than ``build_after`` examples may be built early: it has
        ``build_early`` (2 or more). Whether the build pays is then admission's to say; during its
        warm-up, when it admits every group seen twice, an early build is still only tried on a
        model-free agreement between the group's programs (``Builder.build``), so a wrong guess
        costs a few milliseconds. Why not wait for the warm-up: groups that arrive early in a
        process had their second example during it and then paid a third miss (module note in
        docs/scale.md, "Early builds")."""
        return 2 <= self.config.build_early <= n_examples

    def building(self, tenant: str) -> set[str]:
        """The tenant's groups with a build queued or running."""
        with self.lock:
            return {gid for (t, gid), f in self.running.items() if t == tenant and not f.done()}

    def wait(self, timeout: float | None = None) -> None:
        with self.lock:
            futures = list(self.running.values())
        for f in futures:
            f.result(timeout=timeout)

    def _done(self, tenant: str, group_id: str, future: Future[Any]) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self._crashed(tenant, group_id, error)

    def _crashed(self, tenant: str, group_id: str, exc: BaseException) -> None:
        """A build that raised (not one that ran and found no candidate): count it, log why, show it.

        A background build's exception would otherwise stay inside its Future, unseen."""
        log.error(
            "build of group %s (tenant %s) failed: %s: %s",
            group_id,
            tenant,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )
        self.builder.store.bump(tenant, "builds_failed")
        self.builder.events.append(
            {
                "event": "build",
                "tenant": tenant,
                "group": group_id,
                "ok": False,
                "attempts": 0,
                "error": str(exc),
            }
        )
