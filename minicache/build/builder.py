"""The build stage: turn a group's examples into a validated, parameterized entry.

A build (under the group's lease in the store, so two replicas never build one group at once)
takes the group's own miss programs, lifted into ``solve(**variables)`` candidates without a model
and ranked by model-free agreement with the group's other examples (:mod:`minicache.build.candidates`), and
trusts one only after the real hit path (extraction, then the program) reproduces enough held
examples (:meth:`Builder.validate`). Failing those, the target writes a generalized program
(:func:`minicache.programs.signature.generalize`), if another example backs one of the group's own programs
or none could be lifted (``NO_SHARED_COMPUTATION``), and if admission, from the tenant's record of
generalizations, expects it to pay; the small model's checks are priced the same way before the
first is asked. What a failed build failed on is recorded for the next one (:mod:`minicache.build.failures`),
what it records is :mod:`minicache.build.validation`'s; when a group is built, and where, is
:mod:`minicache.build.queue`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

from minicache.answers import check_answer
from minicache.build.admission import Admission
from minicache.build.candidates import Candidate, own_candidates
from minicache.build.failures import record_build_failure, validation_set
from minicache.build.generalize import generalize
from minicache.build.reach import unreachable
from minicache.build.step_costs import record_generalization, record_model_checks
from minicache.build.validation import (
    NO_SHARED_COMPUTATION,
    NOT_YET,
    UNBACKED_NOT_TRIED,
    UNREACHABLE,
    Attempt,
    AttemptSource,
    Check,
    NotYet,
    Validation,
)
from minicache.config.engine import EngineConfig
from minicache.errors import BackendError, ExtractionError, ProgramError, ProgramShapeError
from minicache.events import EventLog
from minicache.hit.align import align, learn_exemplar
from minicache.hit.extraction import Extractor, check_types
from minicache.hit.rules import learn_rules
from minicache.hit.verify import learn_profile, needs_probation, probation_reason
from minicache.models.base import ModelBackend
from minicache.models.compute import compute_clock
from minicache.programs.numbers import candidate_values
from minicache.programs.signature import answers_match, fill_defaults, parse_signature
from minicache.request import request_text, shared_prefix, strip_prefix
from minicache.sandbox import SandboxPool
from minicache.store import Entry, Example, Store, new_id


def distinct_requests(examples: list[Example]) -> list[Example]:
    """``examples`` with each request (question and context) once, the first time it was served."""
    seen: set[tuple[str, str | None]] = set()
    kept = []
    for ex in examples:
        if (ex.question, ex.context) not in seen:
            seen.add((ex.question, ex.context))
            kept.append(ex)
    return kept


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

    def build(self, tenant: str, group_id: str) -> Entry | None:
        """Build under the group's lease in the store, so two replicas never build one group at once."""
        if not self.store.acquire_build_lease(
            tenant, group_id, self.owner, self.config.build_lease_s
        ):
            return None
        try:
            if (
                self.store.active_entry(tenant, group_id) is not None
            ):  # another replica just built it
                return None
            began = compute_clock()
            entry = self._build_locked(tenant, group_id)
            # What the build cost the machine: its wall time less the time it waited for the compute
            # lock (requests go first), which is not a cost of building.
            cost = compute_clock() - began
            if isinstance(entry, NotYet):
                self.admission.observe_build(max(0.0, cost), None)
                return None
            self.admission.observe_build(max(0.0, cost), entry is not None)
            return entry
        finally:
            self.store.release_build_lease(tenant, group_id, self.owner)

    def _build_locked(self, tenant: str, group_id: str) -> Entry | None | NotYet:
        # A request sent again is one example: copies would make the whole request, its numbers
        # included, the boilerplate the group's requests share (``shared_prefix``), and back a
        # program with the very values it was written from.
        examples = distinct_requests(self.store.examples(tenant, group_id))
        # An early build (fewer than build_after examples, EngineConfig.build_early) tries only own
        # programs another example backs; without one the group waits, and nothing is recorded.
        early = len(examples) < self.config.build_after
        # What failed last time (minicache.build.failures) must pass now, and seeds the target's feedback.
        failure = self.store.group_failure(tenant, group_id)
        held, must = validation_set(examples, failure, self.config.validate_n)
        # Values that vary cannot be in the boilerplate every request of the group starts with.
        prefix = shared_prefix([request_text(ex.question, ex.context) for ex in held])
        newest = examples[
            max(len(examples) - self.config.build_compare, 0) :
        ]  # oldest first in the store
        candidates, split = own_candidates(
            newest, prefix, self.sandbox, self.config.build_candidates
        )
        if (
            early
        ):  # backed by another example with other values (a request sent twice backs nothing)
            candidates = [
                c
                for c in candidates
                if c.backed
                and any(
                    values != dict(parse_signature(c.source).defaults) for _, values in c.agreed
                )
            ]
            if not candidates:
                return NOT_YET
        feedback = failure.get("feedback") if failure else None
        decision: list[str | None] = []  # whether this build may ask the small model, decided once

        def ask_model() -> str | None:
            if not decision:
                seen, first_misses, counters = self.admission_view(tenant, group_id, len(examples))
                decision.append(
                    self.admission.model_checks_declined(
                        tenant,
                        seen,
                        counters,
                        first_misses,
                        int(failure.get("failures", 0)) if failure else 0,
                    )
                )
            return decision[0]

        model_s = 0.0
        attempts: list[Attempt] = []
        failed_checks: list[Check] = []
        vetoed: set[str] = set()
        no_majority = not candidates and split
        if no_majority:  # the group's own programs contradict each other: nothing to cache yet
            attempts.append(
                {
                    "source": AttemptSource.AGREEMENT,
                    "ok": False,
                    "error": "no program has a majority of the examples",
                }
            )
        # Whether another example backs an own program (NO_SHARED_COMPUTATION). Until an own program
        # has been tried, none could be lifted, and the target is the way to one.
        own_tried = False
        shared = any(c.backed for c in candidates)
        while not no_majority:
            if candidates:
                cand = candidates.pop(0)
            elif early:  # the backed candidates failed: wait for build_after, as if not tried
                return NOT_YET
            elif own_tried and not shared:
                attempts.append(
                    {
                        "source": AttemptSource.TARGET_BUILD,
                        "ok": False,
                        "error": NO_SHARED_COMPUTATION,
                    }
                )
                break
            elif (
                sum(a["source"] == AttemptSource.TARGET_BUILD for a in attempts)
                < self.config.build_retries
            ):
                if ask_model() is not None:  # its program would need the small model's checks
                    return self._declined(tenant, model_s)
                declined = self._target_declined(tenant, group_id, len(examples))
                if declined is not None:
                    attempts.append(
                        {"source": AttemptSource.TARGET_BUILD, "ok": False, "error": declined}
                    )
                    break
                asked = compute_clock()  # its compute, as a build's: wall time less lock waits
                try:
                    source, used = generalize(self.target, held, feedback)
                except BackendError as exc:
                    attempts.append({"source": AttemptSource.TARGET_BUILD, "error": str(exc)})
                    record_generalization(self.store, tenant, compute_clock() - asked, False)
                    break
                self.store.bump(tenant, "target_tokens", used)
                cand = Candidate(
                    AttemptSource.TARGET_BUILD, source, held[0]
                )  # its defaults: the first example's values
            else:
                break
            # An own program no other example's program agreed with must pass every held example.
            backed = cand.kind == AttemptSource.TARGET_BUILD or cand.backed
            record = self.validate(
                cand.source,
                held,
                cand.origin,
                prefix,
                backed=backed,
                also=newest,
                ask_model=ask_model,
            )
            model_s += record.model_s
            if record.declined:
                # Candidates that need no model (a table's, or read by alignment) may still be trusted;
                # without one the build is not a failure: the group waits, as after an early build.
                attempts.append(
                    {
                        "source": cand.kind,
                        "ok": False,
                        "error": record.error,
                        "agreements": cand.score,
                    }
                )
                if candidates:
                    continue
                return self._declined(tenant, model_s)
            if cand.kind != AttemptSource.TARGET_BUILD:
                own_tried = True
                shared = shared or any(
                    c.match and c.example != cand.origin.id for c in record.checks
                )
            missed = must - set(record.refused) - {c.example for c in record.checks if c.match}
            if record.ok and missed:
                record.ok, record.error = False, "it fails a request the group failed on before"
                vetoed |= missed  # each vetoes this build only (minicache.build.failures)
            if record.ok and None in record.defaults.values():
                # The target wrote parameters without defaults: write in the values the first example
                # passed with, so that a stored entry's program is a whole signature (export, rules).
                if record.validated:
                    cand.source = fill_defaults(cand.source, record.validated[0][1])
                    record.template = parse_signature(cand.source).template
                else:
                    record.ok, record.error = (
                        False,
                        "no validated example to take its defaults from",
                    )
            attempts.append(
                {
                    "source": cand.kind,
                    "ok": record.ok,
                    "error": record.error,
                    "agreements": cand.score,
                }
            )
            if cand.kind == AttemptSource.TARGET_BUILD:
                record_generalization(self.store, tenant, compute_clock() - asked, record.ok)
            if record.ok:
                self._spent_on_model(tenant, model_s)
                return self._store_entry(
                    tenant, group_id, cand, record, attempts, examples, held, failure
                )
            failing = [c for c in record.checks if not c.match]
            failed_checks += failing
            if not backed and any(c.by_model for c in failing):
                for skipped in [c for c in candidates if not c.backed]:
                    attempts.append(
                        {
                            "source": skipped.kind,
                            "ok": False,
                            "error": UNBACKED_NOT_TRIED,
                            "agreements": skipped.score,
                        }
                    )
                candidates = [c for c in candidates if c.backed]
            feedback = (
                "\n".join(
                    f"- expected {c.expected}, got {c.error if c.error is not None else c.got} with "
                    f"variables {c.variables}"
                    for c in failing[:4]
                )
                or record.error
            )
        self._spent_on_model(tenant, model_s)
        group = self.store.get_group(tenant, group_id)
        if group is not None:  # back off exponentially; record why for the next attempt
            record_build_failure(
                self.store,
                group,
                attempts,
                [c.as_dict() for c in failed_checks],
                feedback,
                self.config.admission,
                self.config.max_build_failures,
                vetoed,
            )
        self.store.bump(tenant, "builds_failed")
        self.events.append(
            {"event": "build", "group": group_id, "ok": False, "attempts": len(attempts)}
        )
        return None

    def _declined(self, tenant: str, model_s: float) -> NotYet:
        """A build whose small-model checks admission declined: no failure, the group waits."""
        self._spent_on_model(tenant, model_s)
        self.store.bump(tenant, "builds_declined")
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

    def _store_entry(
        self,
        tenant: str,
        group_id: str,
        cand: Candidate,
        record: Validation,
        attempts: list[Attempt],
        examples: list[Example],
        held: list[Example],
        failure: dict[str, Any] | None,
    ) -> Entry:
        """The validated candidate as the group's entry, with rules learned from every agreeing example."""
        template = record.template
        pairs = list(record.validated)
        pairs += [p for p in cand.agreed if all(p[0] != q[0] for q in pairs)]
        rules = learn_rules(template, pairs) if self.config.use_rules else {}
        if len(pairs) < 3:  # positions are only trusted with three agreeing examples
            rules = {k: r for k, r in rules.items() if r.kind != "position"}
        entry = Entry(
            id=new_id("ent"),
            tenant=tenant,
            group_id=group_id,
            template=template,
            program=cand.source,
            validation={
                "extraction": record.extraction,
                "passed": record.passed,
                "shared_prefix": record.shared_prefix,
                "of": record.of,
                "source": cand.kind,
                "attempts": attempts,
                "rule_examples": len(pairs),
                "profile": learn_profile(
                    template, pairs, [ex.answer for ex in examples], self.config.verify.exemplars
                ),
                "held": [ex.id for ex in held],
                "at": time.time(),
                "probation": probation_reason(self.store.counters(tenant), self.config.verify)
                or False,
            },
            rules={name: rule.to_json() for name, rule in rules.items()},
        )
        self.store.put_entry(entry)
        if failure:
            self.store.set_group_failure(tenant, group_id, None)
        self.store.bump(tenant, "builds_ok")
        self.events.append(
            {
                "event": "build",
                "group": group_id,
                "entry": entry.id,
                "ok": True,
                "source": cand.kind,
                "rules": len(rules),
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
        """Run the real hit path (extraction, then the program) on each held example; the candidate
        passes if enough answers match the ones its examples were served.

        Extraction is as on a hit: zero-model alignment first, with an exemplar learned from the
        example the candidate's defaults are the values of (its origin; docs/hits.md, section 1),
        then the small model. An alignment that is complete but reads the values wrong fails the
        check, as the hit it stands for would be wrong. Why not the small model alone: on Formula-v5
        it swapped values in validation (CPI 300 and 315 read the other way round) and failed builds
        a hit would have served right by alignment, and each of its extractions costs 1-3 s of a
        build's compute on two cores (4-8 s over TAT-QA's tables).

        How many must match: ``validate_min`` of the held examples, and more than half of them, when
        something other than the model backs the candidate (``backed``: another example's own program
        agreed with it, or the target wrote it from the held examples), or when a complete alignment
        reproduces an example other than its origin. Otherwise every held example must match, so the
        model-free checks run first and the first failed model check ends the validation. Why more
        than half: a failed build's wrong examples join the held ones (:mod:`minicache.build.failures`), and
        in svamp-v11 (2026-12-05) a rebuild in a group of five different word-problem computations
        made an entry that fitted its origin and one other of 4 held: 2 was ``validate_min``. At the
        default 3 held the two bars are one (2 of 3). Why: in tatqa-v2 (2026-12-03)
        each failed build validated two such candidates, programs over one table's line items
        that the small model then read off other tables' wrong rows, and spent 20-25 s of compute
        on four extractions that could not have made an entry trusted on its own example alone.

        A candidate whose values are table cells (its exemplar is a table exemplar, minicache.hit.tables)
        is checked only where its table reads the example, as its hits are served only there (the
        hit path refuses the rest, ``refused``); and, since those checks need no model, on every
        example of ``also`` (the group's newest) its table reads too. Of those, ``validate_min`` must
        match, and a majority when backed (all when not), so that no table entry stands on its origin
        alone. Why: in tatqa-v7 (2026-12-04) the largest percentage-change group failed both builds
        on held examples the table did not read (one asked for two changes at once) and that the
        small model read wrong; the entry would have refused them. On the same stream with this
        (tatqa-v8), that group was built in 0.1 s and served table hits.

        ``ask_model``, called before the small model's first check, says why the build should not pay
        for it (admission, :meth:`Admission.model_checks_declined`); the validation then stops there,
        ``declined``. A check no choice of the example's numbers can pass asks no model
        (:mod:`minicache.build.reach`)."""
        try:
            signature = parse_signature(
                source, require_defaults=False
            )  # a target-built one may have none
        except ProgramShapeError as exc:
            return Validation(ok=False, error=f"program shape: {exc}")
        # Candidate choice works only if the values are written in the request: check on the example
        # whose values the program's defaults are.
        origin_text = strip_prefix(request_text(origin.question, origin.context), prefix)
        written = candidate_values(origin_text)
        numeric = [
            v for v in signature.defaults.values() if v is not None and not isinstance(v, str)
        ]
        mode: Literal["choice", "free"] = (
            "choice" if self.config.use_choice and all(v in written for v in numeric) else "free"
        )
        exemplar = None
        if (
            self.config.use_rules
            and self.config.verify.align
            and None not in signature.defaults.values()
        ):
            exemplar = learn_exemplar(signature.template, origin_text, signature.defaults)
        table = exemplar is not None and "table" in exemplar
        pool = held + [ex for ex in also or [] if table and all(ex.id != h.id for h in held)]
        # Each example with its alignment, the complete ones (no model) first.
        planned, refused = [], []
        for ex in pool:
            text = strip_prefix(request_text(ex.question, ex.context), prefix)
            aligned = align(exemplar, text) if exemplar is not None else None
            complete = aligned if aligned is not None and aligned.complete else None
            if table and complete is None:
                refused.append(ex.id)
            else:
                planned.append((ex, text, complete))
        planned.sort(key=lambda p: p[2] is None)

        def needed() -> int:
            if table:  # a majority of what its table reads, and never its origin alone
                return max(
                    self.config.validate_min, len(planned) // 2 + 1 if backed else len(planned)
                )
            return (
                max(min(self.config.validate_min, len(held)), len(held) // 2 + 1)
                if backed
                else len(held)
            )

        checks: list[Check] = []
        validated: list[tuple[str, dict[str, Any]]] = []
        model_s = 0.0
        declined: str | None = None
        for n, (ex, text, aligned) in enumerate(planned):
            if sum(c.match for c in checks) + (len(planned) - n) < needed():
                break  # cannot reach the required matches any more
            check = Check(example=ex.id, expected=ex.answer)
            try:
                if aligned is not None:
                    check.extraction, check.variables = (
                        "align",
                        check_types(signature.template, aligned.values),
                    )
                else:
                    check.extraction = mode
                    if mode == "choice" and unreachable(
                        source, signature.template, text, ex.answer, self.sandbox
                    ):
                        raise ExtractionError(UNREACHABLE)
                    declined = ask_model() if ask_model is not None else None
                    if declined is not None:
                        break  # the validation stops before the model's first check
                    began = compute_clock()
                    try:
                        check.variables = self.extractor.by_model(
                            signature.template, text, choice=(mode == "choice")
                        ).variables
                    finally:
                        model_s += compute_clock() - began
                value = check_answer(self.sandbox.run(source, check.variables).value)
                check.got, check.match = value, answers_match(value, ex.answer)
                if check.match:
                    validated.append((text, check.variables))
                    backed = backed or (aligned is not None and ex.id != origin.id)
            except (ExtractionError, ProgramError) as exc:
                check.match, check.error = False, str(exc)
            checks.append(check)
        passed = sum(c.match for c in checks)
        return Validation(
            ok=declined is None and passed >= needed(),
            error=declined,
            template=signature.template,
            extraction=mode,
            checks=checks,
            validated=validated,
            passed=passed,
            of=len(planned),
            shared_prefix=prefix,
            defaults=signature.defaults,
            refused=refused,
            model_s=model_s,
            declined=declined is not None,
        )
