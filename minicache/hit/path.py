"""The hit stage: serve a request from its group's entry, audit a sample of hits, evict failing entries.

Values come from :class:`~minicache.hit.verify.HitVerifier` (rules and alignment first, the small model
only when its choice is corroborated); the entry's program runs in the sandbox; the answer must be
plausible for the group. Whatever cannot be shown right raises
:class:`~minicache.errors.HitRefused` and the engine pays for a miss instead. A share of served hits,
sized from the entry's record (:mod:`minicache.hit.scrutiny`), is also answered by the miss path in
the background (:meth:`HitPath.audit`), and an entry that fails ``max_failures`` times in service
is evicted (:meth:`HitPath.count_failure`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from minicache.answers import Route, SolveResult, check_answer, format_answer
from minicache.config.engine import EngineConfig
from minicache.errors import HitRefused, MiniCacheError
from minicache.events import EventLog
from minicache.hit.audits import demoted, on_probation
from minicache.hit.checks import Check
from minicache.hit.failures import record_failed_hit
from minicache.hit.model_record import model_declined
from minicache.hit.refusals import LEARNABLE, revise
from minicache.hit.scrutiny import audit_share, probation_length
from minicache.hit.verify import MODEL_PATHS, ZERO_MODEL_PATHS, HitVerifier
from minicache.miss.path import MissPath
from minicache.models.compute import working_for
from minicache.programs.signature import answers_match
from minicache.request import request_text
from minicache.sandbox import SandboxPool
from minicache.store import Entry, Store, new_id


class HitPath:
    """Serves hits and keeps each entry's record in service (hits, audits, failures)."""

    def __init__(
        self,
        store: Store,
        sandbox: SandboxPool,
        verifier: HitVerifier,
        miss: MissPath,
        events: EventLog,
        config: EngineConfig,
        submit: Callable[..., Future[Any]],
        owner: str = "hits",
        miss_cost: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.store, self.sandbox, self.verifier, self.miss = store, sandbox, verifier, miss
        # What a miss costs (seconds, None until measured): the engine's admission estimate.
        self.miss_cost = miss_cost
        self.events, self.config = events, config
        self.owner = owner  # this engine's name in build leases (a revision is written under one)
        self.submit = submit  # the engine's audit worker (background, behind requests)
        self._audits: list[Future[Any]] = []
        self._lock = threading.Lock()
        self._rng = random.Random(
            config.audit_seed
        )  # which hits are audited (EngineConfig.audit_seed)

    def serve(
        self,
        entry: Entry,
        question: str,
        context: str | None,
        timings: dict[str, float],
        tenant: str,
        record: bool = True,
    ) -> SolveResult:
        """Verified values, the program, then the answer's plausibility; whatever cannot be shown
        right raises HitRefused. An entry on probation serves none; a demoted one zero-model hits only."""
        if on_probation(entry, self.config.verify, lambda: self.store.counters(tenant)):
            raise HitRefused(
                Check.PROBATION,
                "a new entry's first hit attempts are answered by the miss path and "
                "compared before it serves",
                shadow=True,
            )
        began = time.perf_counter()
        try:
            extraction = self.verifier.extract(
                entry, request_text(question, context), no_model=self._no_model(entry, tenant)
            )
        except HitRefused as exc:
            if record and exc.model_s is not None:
                self._record_model_choice(tenant, entry, False, exc.model_s)
            raise
        by_model = extraction.method in MODEL_PATHS
        timings["extract_s"] = extraction.seconds
        run = self.sandbox.run(entry.program, extraction.variables, tenant=tenant)
        timings["sandbox_s"] = run.seconds
        value = check_answer(run.value)
        try:
            self.verifier.check_answer(entry, value)
        except HitRefused as exc:
            exc.readings, exc.answer = {"hit": dict(extraction.variables)}, value
            if record and by_model:
                self._record_model_choice(tenant, entry, False, time.perf_counter() - began)
            raise
        if record:
            if by_model:
                self._record_model_choice(tenant, entry, True, time.perf_counter() - began)
            self.store.record_hit(tenant, entry.id)
            if extraction.small_tokens:
                self.store.bump(tenant, "small_tokens", extraction.small_tokens)
            share = audit_share(entry, self.config, extraction.method)
            if share > 0 and self._rng.random() < share:  # sized from the entry's record
                self.schedule_audit(
                    tenant, entry, question, context, hit_answer=value, method=extraction.method
                )
        return SolveResult(
            answer=value,
            answer_text=format_answer(value, question),
            route=Route.HIT,
            group=entry.group_id,
            entry_id=entry.id,
            program=entry.program,
            variables=extraction.variables,
            timings=timings,
            tokens={"target": 0, "small": extraction.small_tokens},
            extraction=extraction.method,
            pinned=list(extraction.detail.get("pinned", [])),
        )

    def _record_model_choice(self, tenant: str, entry: Entry, served: bool, seconds: float) -> None:
        """One hit attempt in which the small model chose values, into the entry's record."""
        self.store.record_model_choice(tenant, entry.id, served, round(seconds * 1000))

    def _no_model(self, entry: Entry, tenant: str) -> HitRefused | None:
        """The refusal that stands in for the small model where it is not asked: a demoted entry
        serves zero-model hits only (its would-be hit is audited against the miss answer), and an
        entry whose model choices have not paid their seconds asks it no more (minicache.hit.model_record)."""
        if demoted(entry, self.config.audit_delta, self.config.audit_z):
            return HitRefused(
                Check.AUDIT, "the entry is demoted and only zero-model hits are served", shadow=True
            )
        verify = self.config.verify
        if verify.model_gate:
            why = model_declined(
                entry, self.miss_cost(), verify.model_gate_z, verify.model_gate_min_s
            )
            if why is not None:
                return HitRefused(Check.MODEL_RECORD, why)
        return None

    def schedule_audit(
        self, tenant: str, entry: Entry, question: str, context: str | None, **kwargs: Any
    ) -> None:
        """Run :meth:`audit` on the background worker, or now without background builds."""
        self._background(self.audit, tenant, entry, question, context, **kwargs)

    def schedule_review(
        self, tenant: str, entry: Entry, refused: HitRefused, reference: Any
    ) -> None:
        """Run :meth:`review_refusal` on the background worker, or now without background builds."""
        if refused.check in LEARNABLE and refused.readings and reference is not None:
            self._background(self.review_refusal, tenant, entry, refused, reference)

    def _background(self, fn: Callable[..., Any], tenant: str, *args: Any, **kwargs: Any) -> None:
        def run() -> Any:
            with working_for(tenant):  # its sandbox jobs and misses take the tenant's turns
                return fn(tenant, *args, **kwargs)

        if not self.config.background_builds:
            run()
            return
        with self._lock:
            self._audits = [f for f in self._audits if not f.done()]
            self._audits.append(self.submit(run))

    def review_refusal(
        self, tenant: str, entry: Entry, refused: HitRefused, reference: Any
    ) -> Entry | None:
        """Compare a refused hit with the miss answer it was refused for; when the refusal was
        unfounded, store the entry's next version without what refused it (minicache.hit.refusals).
        Under the group's build lease, and only while ``entry`` is still the group's active one, so
        a revision never replaces a newer build. Returns the new version, or None."""

        def run(values: dict[str, Any]) -> Any:
            try:
                return check_answer(self.sandbox.run(entry.program, values).value)
            except MiniCacheError:
                return None

        revision = revise(entry, refused, reference, run)
        if revision is None or not self.store.acquire_build_lease(
            tenant, entry.group_id, self.owner, self.config.build_lease_s
        ):
            return None
        try:
            current = self.store.active_entry(tenant, entry.group_id)
            if current is None or current.id != entry.id:
                return None
            revised = replace(
                current,
                id=new_id("ent"),
                rules=revision.rules,
                validation={**revision.validation, "revised_from": current.id},
            )
            self.store.put_entry(revised)
        finally:
            self.store.release_build_lease(tenant, entry.group_id, self.owner)
        self.store.bump(tenant, "refusals_overturned")
        self.events.append(
            {"event": "revise", "group": entry.group_id, "entry": revised.id, **revision.note}
        )
        return revised

    def audit(
        self,
        tenant: str,
        entry: Entry,
        question: str,
        context: str | None,
        *,
        hit_answer: Any = None,
        method: str | None = None,
        reference: Any = None,
    ) -> bool | None:
        """Compare a hit's answer with the miss path's on one request and add it to the entry's record.

        A served hit brings ``hit_answer`` (the miss path answers again, recording nothing); a demoted
        entry's refused request brings the miss answer as ``reference`` (the would-be hit is computed
        here, with every check). Returns whether they agreed, or None if either side had no answer.
        A zero-model hit caught wrong also counts as the entry's failure: its values were unambiguous,
        so the program is the likely culprit."""
        try:
            if reference is None:
                miss = self.miss.solve(
                    entry.group_id,
                    question,
                    context,
                    {},
                    tenant,
                    record=False,
                    new_group=False,
                    label=None,
                )
                reference = miss.answer
                self.store.bump(tenant, "target_tokens", miss.tokens["target"])
            if hit_answer is None:
                extraction = self.verifier.extract(entry, request_text(question, context))
                hit_answer = check_answer(
                    self.sandbox.run(entry.program, extraction.variables).value
                )
                self.verifier.check_answer(entry, hit_answer)
                method = extraction.method
        except MiniCacheError:
            return None
        if reference is None or hit_answer is None:
            return None
        agreed = answers_match(hit_answer, reference)
        agreements, disagreements = self.store.record_audit(tenant, entry.id, agreed)
        self.store.bump(tenant, "audits")
        if not agreed:
            self.store.bump(tenant, "audits_disagreed")
        length = probation_length(entry, self.config.verify)
        probation = (
            on_probation(entry, self.config.verify, lambda: self.store.counters(tenant))
            and agreements - agreed < length
        )
        if probation:
            self._probation(tenant, entry, question, agreed, agreements, disagreements, length)
        elif not agreed and method in ZERO_MODEL_PATHS:
            self.count_failure(tenant, entry)
        self.events.append(
            {
                "event": "audit",
                "group": entry.group_id,
                "entry": entry.id,
                "agreed": agreed,
                "extraction": method,
            }
        )
        return agreed

    def _probation(
        self,
        tenant: str,
        entry: Entry,
        question: str,
        agreed: bool,
        agreements: int,
        disagreements: int,
        length: int,
    ) -> None:
        """A comparison made while ``entry`` was on probation (``length`` agreeing comparisons long,
        fixed by its stored record: minicache.hit.scrutiny.probation_length): its last agreeing one
        passes it for good, a disagreeing one evicts it, with the request recorded for the group's
        next build (which must answer it as the miss path did). Each entry's outcome goes once into
        the tenant's probation record, which decides whether its next entries start on probation
        (minicache.hit.audits.needs_probation)."""
        if agreed and (agreements < length or disagreements):
            return  # not yet passed, or failed by an earlier comparison
        if not agreed and disagreements > 1:  # failed by an earlier comparison: counted once
            return
        self.store.bump(tenant, "probations")
        if not agreed:
            self.store.bump(tenant, "probations_failed")
            self.count_failure(
                tenant,
                entry,
                question,
                "probation: the would-be hit disagreed with the miss path",
                evict=True,
            )
        self.events.append(
            {"event": "probation", "group": entry.group_id, "entry": entry.id, "passed": agreed}
        )

    def wait_for_audits(self, timeout: float | None = None) -> None:
        with self._lock:
            futures = list(self._audits)
        for f in futures:
            f.result(timeout=timeout)

    def count_failure(
        self,
        tenant: str,
        entry: Entry,
        question: str | None = None,
        reason: str = "",
        evict: bool = False,
    ) -> None:
        """An entry's failure in service; at ``max_failures`` (or with ``evict``) it is evicted. With
        ``question`` the request is recorded, and the group's next build must answer it right."""
        failures = self.store.record_failure(tenant, entry.id)
        evict = evict or failures >= self.config.max_failures
        if question is not None:
            record_failed_hit(self.store, tenant, entry.group_id, question, reason, evicted=evict)
        if evict:
            self.store.set_entry_status(tenant, entry.id, "evicted")
            self.store.bump(tenant, "evictions")
            self.events.append(
                {"event": "evict", "group": entry.group_id, "entry": entry.id, "failures": failures}
            )
