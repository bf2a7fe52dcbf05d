"""The build stage: turn a group's examples into a validated, parameterized entry.

A build runs under the group's lease in the store (renewed before each of the target's samples),
so two replicas never build one group at once. It lifts the group's own miss programs into
``solve(**variables)`` candidates without a model, ranked by model-free agreement with the group's
other examples (:mod:`minicache.build.candidates`), and trusts one only after the real hit path
reproduces enough held examples (:class:`~minicache.build.validator.Validator`). Failing those,
the target generalizes (:mod:`minicache.build.generalize`) if another example backs an own program
or none could be lifted (``NO_SHARED_COMPUTATION``), and if admission, from the tenant's record of
generalizations, expects it to pay; the small model's checks are priced the same way. What a failed
build failed on is recorded for the next one (:mod:`minicache.build.failures`); when a group is
built, and where, is :mod:`minicache.build.queue`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from minicache.build.admission import Admission
from minicache.build.candidates import Candidate, backed_by_other_values, own_candidates
from minicache.build.consistency import sample_consensus
from minicache.build.entry import new_entry
from minicache.build.failures import record_build_failure, validation_set
from minicache.build.generalize import generalize
from minicache.build.run import BuildRun, distinct_requests
from minicache.build.step_costs import (
    BUILD_TARGET_TOKENS,
    record_generalization,
    record_model_checks,
)
from minicache.build.validation import (
    NO_SHARED_COMPUTATION,
    NOT_YET,
    UNBACKED_NOT_TRIED,
    UNREACHABLE,
    AttemptSource,
    NotYet,
    Validation,
)
from minicache.build.validator import Validator
from minicache.config.engine import EngineConfig
from minicache.errors import BackendError
from minicache.events import EventLog
from minicache.hit.audits import needs_probation
from minicache.hit.extraction import Extractor
from minicache.models.base import ModelBackend
from minicache.models.compute import compute_clock
from minicache.request import request_text, shared_prefix
from minicache.sandbox import SandboxPool
from minicache.store import Entry, Example, Store

# The reasons a build records, importable here too.
__all__ = ["NO_SHARED_COMPUTATION", "UNBACKED_NOT_TRIED", "UNREACHABLE", "Builder"]


class Builder:
    """Builds one group at a time: candidates, validation, the entry (or the recorded failure)."""

    def __init__(
        self,
        target: ModelBackend,
        sandbox: SandboxPool,
        store: Store,
        extractor: Extractor,
        events: EventLog,
        admission: Admission,
        config: EngineConfig,
        owner: str,
    ) -> None:
        self.target, self.sandbox, self.store, self.extractor = target, sandbox, store, extractor
        self.events, self.admission, self.config = events, admission, config
        self.owner = owner  # this engine's name in build leases
        self.validator = Validator(sandbox, extractor, config)
        # (tenant, group id) -> compute seconds of the target's samples in the build running now
        self.sampled_s: dict[tuple[str, str], float] = {}

    def build(self, tenant: str, group_id: str) -> Entry | None:
        """Build under the group's lease in the store, so two replicas never build one group at once."""
        if not self.store.acquire_build_lease(
            tenant, group_id, self.owner, self.config.build_lease_s
        ):
            return None
        try:
            if self.store.active_entry(tenant, group_id) is not None:  # another replica built it
                return None
            began = compute_clock()
            entry = self._build_locked(tenant, group_id)
            # What the build cost the machine: its wall time less the time it waited for the compute
            # lock (requests go first), which is not a cost of building; less its target samples,
            # which admission prices apart (per sample, Admission.estimate).
            cost = compute_clock() - began - self.sampled_s.get((tenant, group_id), 0.0)
            if isinstance(entry, NotYet):
                self.admission.observe_build(max(0.0, cost), None)
                return None
            self.admission.observe_build(max(0.0, cost), entry is not None)
            return entry
        finally:
            self.sampled_s.pop((tenant, group_id), None)
            self.store.release_build_lease(tenant, group_id, self.owner)

    def _build_locked(self, tenant: str, group_id: str) -> Entry | None | NotYet:
        """The build's steps, in order: the target's samples (if asked for), the group's own
        programs, then the target's generalization; the first candidate validated is the entry, else
        the failure is recorded. An early build waits (``NOT_YET``) rather than fail."""
        run = self._begin(tenant, group_id)
        if self.config.build_samples > 1:  # self-consistency: drawn once, by a full build
            agreed = NOT_YET if run.early else self._agree(run)
            if agreed is False:
                self._fail(run)
            if agreed is not True:  # NOT_YET: early, or the lease was lost to another replica
                return None if agreed is False else NOT_YET
        candidates, split = own_candidates(
            run.newest, run.prefix, self.sandbox, self.config.build_candidates
        )
        if run.early:
            candidates = backed_by_other_values(candidates)
            if not candidates:
                return NOT_YET
        if not candidates and split:  # the group's own programs contradict each other
            run.attempts.append(
                {
                    "source": AttemptSource.AGREEMENT,
                    "ok": False,
                    "error": "no program has a majority of the examples",
                }
            )
            self._fail(run)
            return None
        made = self._try_own_programs(run, candidates)
        if made is not None:
            return made
        if run.early:  # the backed candidates failed: wait for build_after, as if not tried
            return NOT_YET
        made = self._try_generalizations(run)
        if made is not None:
            return made
        self._fail(run)
        return None

    def _begin(self, tenant: str, group_id: str) -> BuildRun:
        """What a build works from: the group's examples, its last failure, the held examples."""
        # A request sent again is one example: copies would make the whole request, its numbers
        # included, the boilerplate the group's requests share (``shared_prefix``), and back a
        # program with the very values it was written from.
        examples = distinct_requests(self.store.examples(tenant, group_id))
        # What failed last time (minicache.build.failures) must pass now, and seeds the target's
        # feedback.
        failure = self.store.group_failure(tenant, group_id)
        held, must = validation_set(examples, failure, self.config.validate_n)
        return BuildRun(
            tenant=tenant,
            group_id=group_id,
            examples=examples,
            failure=failure,
            held=held,
            must=must,
            # Values that vary cannot be in the boilerplate every request of the group starts with.
            prefix=shared_prefix([request_text(ex.question, ex.context) for ex in held]),
            # oldest first in the store
            newest=examples[max(len(examples) - self.config.build_compare, 0) :],
            # An early build (fewer than build_after examples, EngineConfig.build_early) tries only
            # own programs another example backs; without one the group waits, nothing recorded.
            early=len(examples) < self.config.build_after,
            feedback=failure.get("feedback") if failure else None,
        )

    def _agree(self, run: BuildRun) -> bool | NotYet:
        """Sample the held examples (:mod:`minicache.build.consistency`), renewing the lease before
        each sample: whether the build works from them (else the attempt says why), or ``NOT_YET``."""
        c = self.config
        consensus = sample_consensus(
            self.target,
            self.sandbox,
            run.held,
            *(c.build_samples, c.build_temperature, c.miss_max_tokens),
            renew=lambda: self.store.acquire_build_lease(
                run.tenant, run.group_id, self.owner, c.build_lease_s
            ),
            least=c.validate_min,
        )
        self.store.bump(run.tenant, "target_tokens", consensus.tokens)
        self.store.bump(run.tenant, BUILD_TARGET_TOKENS, consensus.tokens)
        self.sampled_s[(run.tenant, run.group_id)] = consensus.seconds  # under the group's lease
        if consensus.lease_lost:
            return NOT_YET
        error = run.work_from(consensus, c.build_agreement)
        if error is not None:
            run.attempts.append({"source": AttemptSource.SAMPLES, "ok": False, "error": error})
        return error is None

    def _try_own_programs(
        self, run: BuildRun, candidates: list[Candidate]
    ) -> Entry | NotYet | None:
        """Validate the group's own programs, best first: the entry from the first that passes, or
        ``NOT_YET`` when the small model's checks were declined; None when none passed."""
        run.shared = any(c.backed for c in candidates)
        while candidates:
            cand = candidates.pop(0)
            record = self._validate(run, cand, backed=cand.backed)
            if record.declined:
                # Candidates that need no model (a table's, or read by alignment) may still be
                # trusted; without one the build is not a failure: the group waits, as after an
                # early build.
                if candidates:
                    continue
                return self._declined(run)
            run.own_tried = True
            run.shared = run.shared or any(
                c.match and c.example != cand.origin.id for c in record.checks
            )
            if record.ok:
                return self._succeed(run, cand, record)
            failing = run.learn_from(record)
            if not cand.backed and any(c.by_model for c in failing):
                candidates = self._skip_unbacked(run, candidates)
        return None

    def _skip_unbacked(self, run: BuildRun, candidates: list[Candidate]) -> list[Candidate]:
        """After an unbacked own program failed a model check, the other unbacked ones are not
        validated (``UNBACKED_NOT_TRIED``): the candidates left to try."""
        for skipped in [c for c in candidates if not c.backed]:
            run.attempts.append(
                {
                    "source": skipped.kind,
                    "ok": False,
                    "error": UNBACKED_NOT_TRIED,
                    "agreements": skipped.score,
                }
            )
        return [c for c in candidates if c.backed]

    def _try_generalizations(self, run: BuildRun) -> Entry | NotYet | None:
        """Ask the target to generalize the held examples, up to ``build_retries`` times, each try
        told what the last failed on: the entry, ``NOT_YET`` (the model's checks declined), or None."""
        # Until an own program has been tried, none could be lifted, and the target is the way to one.
        if run.own_tried and not run.shared:
            run.attempts.append(
                {
                    "source": AttemptSource.TARGET_BUILD,
                    "ok": False,
                    "error": NO_SHARED_COMPUTATION,
                }
            )
            return None
        while (
            sum(a["source"] == AttemptSource.TARGET_BUILD for a in run.attempts)
            < self.config.build_retries
        ):
            if self._ask_model(run) is not None:  # its program would need the small model's checks
                return self._declined(run)
            declined = self._target_declined(run.tenant, run.group_id, len(run.examples))
            if declined is not None:
                run.attempts.append(
                    {"source": AttemptSource.TARGET_BUILD, "ok": False, "error": declined}
                )
                return None
            asked = compute_clock()  # its compute, as a build's: wall time less lock waits
            try:
                source, used = generalize(self.target, run.held, run.feedback)
            except BackendError as exc:
                run.attempts.append({"source": AttemptSource.TARGET_BUILD, "error": str(exc)})
                record_generalization(self.store, run.tenant, compute_clock() - asked, False)
                return None
            self.store.bump(run.tenant, "target_tokens", used)
            self.store.bump(run.tenant, BUILD_TARGET_TOKENS, used)
            # its defaults: the first example's values
            cand = Candidate(AttemptSource.TARGET_BUILD, source, run.held[0])
            record = self._validate(run, cand, backed=True)
            if record.declined:
                return self._declined(run)
            record_generalization(self.store, run.tenant, compute_clock() - asked, record.ok)
            if record.ok:
                return self._succeed(run, cand, record)
            run.learn_from(record)
        return None

    def _validate(self, run: BuildRun, cand: Candidate, backed: bool) -> Validation:
        """Validate one candidate (an own program no other example backs must pass every held
        example), hold it to what the group failed on before, and record the attempt."""
        record = self.validate(
            cand.source,
            run.held,
            cand.origin,
            run.prefix,
            backed=backed,
            also=run.newest,
            ask_model=lambda: self._ask_model(run),
        )
        run.model_s += record.model_s
        if not record.declined:
            run.veto(record)
            cand.fill_defaults(record)
        run.attempts.append(
            {"source": cand.kind, "ok": record.ok, "error": record.error, "agreements": cand.score}
        )
        return record

    def _ask_model(self, run: BuildRun) -> str | None:
        """Why this build may not ask the small model (admission), or None; decided once a build."""
        if not run.model_checks:
            seen, first_misses, counters = self.admission_view(
                run.tenant, run.group_id, len(run.examples)
            )
            run.model_checks.append(
                self.admission.model_checks_declined(
                    run.tenant, seen, counters, first_misses, run.failures
                )
            )
        return run.model_checks[0]

    def _fail(self, run: BuildRun) -> None:
        """No entry: back the group off exponentially and record why for the next attempt."""
        self._spent_on_model(run.tenant, run.model_s)
        group = self.store.get_group(run.tenant, run.group_id)
        if group is not None:
            record_build_failure(
                self.store,
                group,
                run.attempts,
                [c.as_dict() for c in run.failed_checks],
                run.feedback,
                self.config.admission,
                self.config.max_build_failures,
                run.vetoed,
            )
        self.store.bump(run.tenant, "builds_failed")
        self.events.append(
            {
                "event": "build",
                "tenant": run.tenant,
                "group": run.group_id,
                "ok": False,
                "attempts": len(run.attempts),
            }
        )

    def _declined(self, run: BuildRun) -> NotYet:
        """A build whose small-model checks admission declined: no failure, the group waits."""
        self._spent_on_model(run.tenant, run.model_s)
        self.store.bump(run.tenant, "builds_declined")
        return NOT_YET

    def _spent_on_model(self, tenant: str, seconds: float) -> None:
        """A build's small-model checks into the tenant's record, which prices the next build's."""
        if seconds > 0:
            record_model_checks(self.store, tenant, seconds)

    def _target_declined(self, tenant: str, group_id: str, n_examples: int) -> str | None:
        """Why the target is not asked to generalize (:meth:`Admission.target_declined`), or None."""
        seen, first_misses, counters = self.admission_view(tenant, group_id, n_examples)
        return self.admission.target_declined(tenant, seen, counters, first_misses)

    def admission_view(
        self, tenant: str, group_id: str, n_examples: int
    ) -> tuple[int, int, dict[str, int]]:
        """What admission weighs a group by, for a build and for its generalization alike: its arrivals
        (at least its examples), those a new entry answers as misses on probation, the tenant's counters."""
        counters = self.store.counters(tenant)
        first_misses = (
            self.config.verify.probation if needs_probation(counters, self.config.verify) else 0
        )
        return max(n_examples, self.admission.arrivals(tenant, group_id)), first_misses, counters

    def _succeed(self, run: BuildRun, cand: Candidate, record: Validation) -> Entry:
        """Store the validated candidate as the group's entry (:func:`new_entry`)."""
        self._spent_on_model(run.tenant, run.model_s)
        entry = new_entry(run, cand, record, self.config, self.store.counters(run.tenant))
        self.store.put_entry(entry)
        if run.failure:
            self.store.set_group_failure(run.tenant, run.group_id, None)
        self.store.bump(run.tenant, "builds_ok")
        self.events.append(
            {
                "event": "build",
                "tenant": run.tenant,
                "group": run.group_id,
                "entry": entry.id,
                "ok": True,
                "source": cand.kind,
                "rules": len(entry.rules),
            }
        )
        return entry

    def validate(
        self,
        source: str,
        held: list[Example],
        origin: Example,
        prefix: str,
        backed: bool = True,
        also: list[Example] | None = None,
        ask_model: Callable[[], str | None] | None = None,
    ) -> Validation:
        """Check a candidate on held examples through the real hit path
        (:meth:`Validator.validate`); every candidate a build tries is checked through here."""
        return self.validator.validate(
            source, held, origin, prefix, backed=backed, also=also, ask_model=ask_model
        )
