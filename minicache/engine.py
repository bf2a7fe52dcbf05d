"""The MiniCache engine: route -> hit (extract + run cached program) | miss (target writes PoT) -> build.

Reading order: :meth:`MiniCache.solve` validates a request, picks the cache once
(:func:`minicache.stepcache.step_request_of`) and counts the outcome (:mod:`minicache.counters`);
:meth:`MiniCache._serve` is the program cache's whole pipeline. The stages live in their own
modules: routing (:mod:`minicache.route.router`), the hit (:mod:`minicache.hit.path`, with the
checks of :mod:`minicache.hit.verify`), the miss (:mod:`minicache.miss.path`) and the build
(:mod:`minicache.build.builder`); answers are checked and written by :mod:`minicache.answers`,
exports read by :mod:`minicache.portability`. Generated code only ever runs in the sandbox's worker
processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from minicache import invalidation, portability
from minicache.answers import (
    MAX_DECIMALS,
    Route,
    SolveResult,
    check_answer,
    format_answer,
    passed_through,
    requested_decimals,
)
from minicache.build.admission import Admission, observed_route, request_cost
from minicache.build.builder import Builder
from minicache.build.join import GroupJoiner
from minicache.build.merge import GroupMerger
from minicache.build.queue import BuildQueue
from minicache.config.engine import EngineConfig
from minicache.counters import count_failed, count_served, tenant_stats
from minicache.errors import ExtractionError, HitRefused, InvalidRequest, ProgramError, SolveError
from minicache.events import EventLog
from minicache.hit.audits import demoted
from minicache.hit.extraction import Extractor
from minicache.hit.path import HitPath
from minicache.hit.verify import HitVerifier
from minicache.miss.path import MissPath
from minicache.models.base import ModelBackend
from minicache.models.compute import (
    CPU_LOCK,
    mark_background_thread,
    thread_waited_s,
    working_for,
)
from minicache.request import shared_prefix, validate_request
from minicache.route.router import Embedder, LazyMiniLM, Router, route_embedder
from minicache.sandbox import SandboxPool
from minicache.stepcache import StepCache, step_request_of
from minicache.store import Store, new_id, open_store

# What ``from minicache.engine import ...`` has always offered; each now lives with its stage.
__all__ = ["MiniCache", "EngineConfig", "SolveResult", "SolveError", "InvalidRequest"]
__all__ += ["format_answer", "check_answer", "requested_decimals", "MAX_DECIMALS", "shared_prefix"]


class MiniCache:
    """Parameterized program cache in front of a target model, with a small model for extraction."""

    def __init__(
        self,
        target: ModelBackend,
        small: ModelBackend,
        store: Store | str | None = None,
        *,
        embedder: Embedder | None = None,
        sandbox: SandboxPool | None = None,
        config: EngineConfig | None = None,
    ) -> None:
        self.target = target
        self.small = small
        self.store = open_store(store)
        self.config = config or EngineConfig()
        # An embedder passed in (a test's fake) serves routing and StepCache alike; by default routing
        # uses the configured one and StepCache the MiniLM its threshold was calibrated on.
        steps_embedder: Embedder = embedder if embedder is not None else LazyMiniLM()
        if embedder is None:
            embedder = route_embedder(self.config.route_embedder)
        self.router = Router(
            self.store,
            embedder,
            self.config.route_threshold,
            refresh_s=self.config.route_refresh_s,
            per_group=self.config.route_per_group,
            exact_rows=self.config.route_exact_rows,
            word_slots=self.config.route_word_slots,
            table_rows=self.config.route_table_rows,
        )
        self.sandbox = sandbox or SandboxPool()
        self._own_sandbox = sandbox is None
        self.extractor = Extractor(
            small, use_rules=self.config.use_rules, use_choice=self.config.use_choice
        )
        self.verifier = HitVerifier(
            self.extractor, self.config.verify, word_slots=self.config.route_word_slots
        )
        # Build, audit and eviction events for progress displays and the dashboard; bounded.
        self.events = EventLog(self.config.max_events)
        self.admission = Admission(self.config.admission)
        # Background workers, behind requests on the compute lock: one runs builds, one at a time; the
        # other audits, so that a new entry's probation is not queued behind builds of other groups
        # (minutes each on a small CPU, while every request of the entry's group paid for a miss).
        self._worker = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="minicache-build", initializer=mark_background_thread
        )
        self._auditor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="minicache-audit", initializer=mark_background_thread
        )
        self.miss = MissPath(target, self.sandbox, self.store, self.router, self.config)
        owner = new_id("replica")  # this engine's name in build leases
        self.hits = HitPath(
            self.store,
            self.sandbox,
            self.verifier,
            self.miss,
            self.events,
            self.config,
            self._auditor.submit,
            owner=owner,
            miss_cost=self.admission.miss_cost,
        )
        self.builder = Builder(
            target,
            self.sandbox,
            self.store,
            self.extractor,
            self.events,
            self.admission,
            self.config,
            owner=owner,
        )
        self.builds = BuildQueue(self.builder, self._worker, self.config)
        self.merges = GroupMerger(self.builder, self.router, self._worker.submit)  # merge_groups
        self.joins = GroupJoiner(self.merges, self.sandbox)  # a group without entry joins one
        self.steps = StepCache(target, self.store, steps_embedder, self.config.step)

    @classmethod
    def local(cls, store: Store | str | None = "minicache.db", **kwargs: Any) -> MiniCache:
        """The embedded default models (see `minicache models`) with a SQLite store."""
        from minicache.config.models import build_backends

        target, small = build_backends()
        return cls(target, small, store, **kwargs)

    # ------------------------------------------------------------------------------------------
    def solve(
        self,
        question: Any,
        context: Any = None,
        group: str | None = None,
        tenant: str = "default",
        *,
        no_cache: bool = False,
        no_store: bool = False,
        force_refresh: bool = False,
        mode: str = "auto",
        passthrough: bool = False,
        on_text: Callable[[str], None] | None = None,
        on_route: Callable[[str, Route], None] | None = None,
    ) -> SolveResult:
        """Answer one request. ``no_cache`` skips the lookup, ``no_store`` records nothing,
        ``force_refresh`` recomputes with the target (and records the result).

        ``mode`` picks the cache: ``"program"`` (parameterized programs), ``"step"`` (StepCache, for
        structured outputs it can verify) or ``"auto"``: StepCache for a request without context that
        it recognises (a linear equation to solve in steps, a JSON object with typed keys), else programs.

        ``passthrough``: what programs cannot serve (an uncacheable group, a failing program) is a
        ``passthrough`` result, uncounted, for the caller to forward; ``on_text`` sees a miss's text.
        ``on_route(group, route)`` is told a miss's group and route (``miss``, or ``fallback`` after a
        refused hit) before its target call, so a stream can name them before its first token."""
        began, waited = time.perf_counter(), thread_waited_s()
        question, context, mode = validate_request(
            question,
            context,
            group,
            tenant,
            mode,
            max_question_chars=self.config.max_question_chars,
            max_context_chars=self.config.max_context_chars,
        )
        step_request = step_request_of(question, context, mode)
        try:
            with working_for(tenant):  # its sandbox jobs and CPU-heavy work take the tenant's turns
                if step_request is not None:
                    result = self.steps.solve(
                        question,
                        tenant,
                        record=not no_store,
                        reuse=not (no_cache or force_refresh),
                        request=step_request,
                    ).to_result()
                else:
                    result = self._serve(
                        question,
                        context,
                        group,
                        tenant,
                        no_cache=no_cache,
                        no_store=no_store,
                        force_refresh=force_refresh,
                        passthrough=passthrough,
                        on_text=on_text,
                        on_route=on_route,
                    )
        except BaseException:
            if not no_store:
                count_failed(self.store, tenant)
            raise
        finally:
            self.router.forget_pending(tenant, question)
        if not no_store and result.route != Route.PASSTHROUGH:  # the caller counts its forward
            count_served(self.store, tenant, result)
            if result.route in (Route.HIT, Route.MISS, Route.FALLBACK):
                # its cost without any build it triggered
                route = observed_route(result.route, result.fallback_reason) or result.route
                self.admission.observe_request(
                    tenant, result.group, route, request_cost(result.timings)
                )
        result.timings["total_s"] = time.perf_counter() - began
        result.lock_wait_s = thread_waited_s() - waited
        return result

    def _serve(
        self,
        question: str,
        context: str | None,
        group: str | None,
        tenant: str,
        *,
        no_cache: bool,
        no_store: bool,
        force_refresh: bool,
        passthrough: bool = False,
        on_text: Callable[[str], None] | None = None,
        on_route: Callable[[str, Route], None] | None = None,
    ) -> SolveResult:
        """Route, then hit if the group has an entry and it works, else miss (a fallback if a hit
        failed); a recorded miss may start the group's build."""
        timings: dict[str, float] = {}
        t = time.perf_counter()
        decision = self.router.route(tenant, question, group, context)
        timings["route_s"] = time.perf_counter() - t
        known = self.store.get_group(tenant, decision.group_id) if passthrough else None
        if known is not None and known.status == "uncacheable":
            return passed_through("its group is marked uncacheable", decision.group_id)
        fallback_reason = None
        refused: HitRefused | None = None
        entry = None
        if not (no_cache or force_refresh):
            entry = self.store.active_entry(tenant, decision.group_id)
            if entry is not None:
                try:
                    result = self.hits.serve(
                        entry, question, context, timings, tenant, record=not no_store
                    )
                    result.similarity = decision.similarity
                    return result
                except HitRefused as exc:
                    # the hit could not be shown right: not the entry's failure
                    refused, fallback_reason = exc, f"HitRefused: {exc}"
                    if not no_store:
                        self.store.bump(tenant, "hit_refusals")
                except (ExtractionError, ProgramError) as exc:
                    fallback_reason = f"{type(exc).__name__}: {exc}"
                    # a full pool is not the entry's fault
                    if not no_store and getattr(exc, "kind", "") != "busy":
                        self.hits.count_failure(tenant, entry, question, fallback_reason)
        if on_route is not None:
            on_route(decision.group_id, Route.FALLBACK if fallback_reason else Route.MISS)
        try:
            result = self.miss.solve(
                decision.group_id,
                question,
                context,
                timings,
                tenant,
                record=not no_store,
                new_group=decision.new_group,
                label=group,
                embedding=decision.embedding,
                on_text=on_text,
                passthrough=passthrough,
            )
        except SolveError as exc:
            exc.fallback_reason = fallback_reason  # what the hit attempt before it ended in
            raise
        if result.route == Route.PASSTHROUGH:
            return result
        if not no_store:
            self.builds.maybe_build(tenant, decision.group_id)
            self.joins.after_miss(tenant, decision.group_id)  # on the build worker
        result.similarity = decision.similarity
        if fallback_reason:
            result.route, result.fallback_reason = Route.FALLBACK, fallback_reason
        if refused is not None and entry is not None and not no_store:
            if refused.shadow:
                # a demoted entry's would-be hit, checked against this miss answer, is its way back
                self.hits.schedule_audit(tenant, entry, question, context, reference=result.answer)
            else:  # a check this miss answer shows wrong is revised (minicache.hit.refusals)
                self.hits.schedule_review(tenant, entry, refused, result.answer)
        return result

    async def asolve(self, *args: Any, **kwargs: Any) -> SolveResult:
        """``solve`` off the event loop (models, sandbox and store all block)."""
        return await asyncio.to_thread(self.solve, *args, **kwargs)

    # -- background work ----------------------------------------------------------------------------
    def building_groups(self, tenant: str) -> set[str]:
        """The tenant's groups with a build queued or running in this process."""
        return self.builds.building(tenant)

    def warm_routing(self, tenants: Iterable[str]) -> dict[str, float]:
        """Load these tenants' routing indexes now (seconds each): a load reads the tenant's whole
        history, which a request should not wait for. The server calls this at start-up."""
        return self.router.warm(tenants)

    def wait_for_builds(self, timeout: float | None = None) -> None:
        self.builds.wait(timeout)
        self.merges.wait(timeout)  # the merges those builds started

    def wait_for_audits(self, timeout: float | None = None) -> None:
        self.hits.wait_for_audits(timeout)

    # -- management ---------------------------------------------------------------------------------
    def stats(self, tenant: str = "default") -> dict[str, Any]:
        """The tenant's counters and entries (:func:`minicache.counters.tenant_stats`), with this
        process's sandbox figures."""
        entries = self.store.list_entries(tenant)
        stats = tenant_stats(
            self.store.counters(tenant),
            entries,
            self.store.list_groups(tenant),
            entries_demoted=sum(
                e.status == "active" and demoted(e, self.config.audit_delta, self.config.audit_z)
                for e in entries
            ),
        )
        stats["sandbox"] = dict(self.sandbox.stats)
        # this process's builds and audits stepping aside for requests
        stats["background_yields"] = CPU_LOCK.yields
        return stats

    def invalidate(
        self, *, group: str | None = None, entry: str | None = None, tenant: str = "default"
    ) -> int:
        """Evict one active entry, or a group's entries and examples
        (:func:`minicache.invalidation.invalidate`). Returns how many active entries were evicted."""
        return invalidation.invalidate(
            self.store, self.router, group=group, entry=entry, tenant=tenant
        )

    def export_entries(self, tenant: str = "default", examples: int = 3) -> list[dict[str, Any]]:
        """Active entries as JSON, each with up to ``examples`` of its group's requests, which let an
        importing cache route unlabelled requests to it (see :mod:`minicache.portability`)."""
        return portability.export_entries(self.store, tenant, examples)

    def import_entries(self, data: list[dict[str, Any]], tenant: str = "default") -> int:
        """Import an export (parsed JSON): the whole document is validated first
        (:class:`~minicache.portability.EntryExport`; :class:`InvalidRequest` names the first
        problem), then written in one transaction. Returns how many entries were imported."""
        return portability.import_entries(
            self.store,
            portability.parse_export(data),
            tenant,
            lambda: self.router.embedder,
            self.router.recorded,
            self.config.route_table_rows,
        )

    def warm_start(self, path: str | Path, tenant: str = "default") -> int:
        """Import an export file, as :meth:`import_entries` (unreadable files are InvalidRequest too)."""
        return portability.import_entries(
            self.store,
            portability.load_export(path),
            tenant,
            lambda: self.router.embedder,
            self.router.recorded,
            self.config.route_table_rows,
        )

    def close(self) -> None:
        self._worker.shutdown(wait=True)
        self._auditor.shutdown(wait=True)
        if self._own_sandbox:
            self.sandbox.close()
        self.store.close()

    def __enter__(self) -> MiniCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
