"""One build of one group, as :class:`~minicache.build.builder.Builder` carries it through its
steps: what it works from (the group's examples, its last failure, the held examples) and what it
has tried so far (the attempts, the failed checks, the small model's seconds)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from minicache.build.consistency import Consensus
from minicache.build.failures import failure_feedback
from minicache.build.validation import Attempt, Check, Validation
from minicache.programs.signature import answers_match
from minicache.store import Example


def distinct_requests(examples: list[Example]) -> list[Example]:
    """``examples`` with each request (question and context) once, the first time it was served."""
    seen: set[tuple[str, str | None]] = set()
    kept = []
    for ex in examples:
        if (ex.question, ex.context) not in seen:
            seen.add((ex.question, ex.context))
            kept.append(ex)
    return kept


@dataclass
class BuildRun:
    """One build of one group: what it works from, and what it has tried so far."""

    tenant: str
    group_id: str
    examples: list[Example]  # each request once, oldest first
    failure: dict[str, Any] | None  # what the group's last failed build recorded
    held: list[Example]  # the examples candidates are validated on
    must: set[str]  # of those, the ids that must pass (minicache.build.failures)
    prefix: str  # the boilerplate every held request starts with
    newest: list[Example]  # the examples own programs are compared on
    early: bool  # fewer than build_after examples: only backed own programs are tried
    feedback: str | None  # for the target: what the last failed program got wrong
    attempts: list[Attempt] = field(default_factory=list)
    failed_checks: list[Check] = field(default_factory=list)
    vetoed: set[str] = field(default_factory=set)  # must-pass examples this build failed on
    model_s: float = 0.0  # compute seconds of the small model's checks
    own_tried: bool = False  # whether an own program was validated
    shared: bool = False  # whether another example backs an own program
    # Whether admission declined the small model's checks: decided once, when first needed.
    model_checks: list[str | None] = field(default_factory=list)
    # What the target's samples agreed on (EngineConfig.build_samples > 1), None without samples.
    consensus: Consensus | None = None

    def work_from(self, consensus: Consensus, bar: float) -> str | None:
        """Build from the samples' winners (:mod:`minicache.build.consistency`), or say why not.

        Each held example becomes its winning sample's program and answer, and an example with no
        winner is left out; the examples own programs are compared on are the winners. A request
        the group failed on before (``must``) keeps the answer the miss path gave it, which the
        next build must reproduce (:mod:`minicache.build.failures`): one with no winner stays held
        as recorded and must still pass, and a winner that answers one otherwise vetoes this build
        (``vetoed``), as a candidate that fails it does (:meth:`veto`)."""
        self.consensus = consensus
        if not consensus.reached(bar):
            return consensus.refusal(bar)
        # A minority computation's examples are held as recorded: the entry refuses them or
        # answers them as their misses did; one that vetoed the last build is held as any example,
        # as a failed request is (minicache.build.failures), so it cannot block every build.
        vetoed = set((self.failure or {}).get("vetoed", []))
        self.must |= set(consensus.left_out) - vetoed
        winners = consensus.winners
        recorded = {ex.id: ex.answer for ex in self.held}
        contradicted = sorted(
            i for i in self.must & set(winners) if not answers_match(winners[i].answer, recorded[i])
        )
        if contradicted:
            self.vetoed |= set(contradicted)
            return (
                "the samples' computation answers a request the group failed on before otherwise "
                f"than the miss path did: {', '.join(contradicted)}"
            )

        def rewritten(ex: Example) -> Example:
            if ex.id not in winners:
                return ex  # a request the group failed on before, as recorded
            answer = ex.answer if ex.id in self.must else winners[ex.id].answer
            return replace(ex, program=winners[ex.id].code, answer=answer)

        kept = set(winners) | set(consensus.left_out) | self.must
        self.examples = [rewritten(ex) for ex in self.examples if ex.id in kept]
        self.held = [rewritten(ex) for ex in self.held if ex.id in kept]
        self.newest = [ex for ex in self.held if ex.id in winners]  # the samples' programs
        return None

    @property
    def failures(self) -> int:
        """The group's failed builds so far, as its last failure recorded them."""
        return int(self.failure.get("failures", 0)) if self.failure else 0

    def veto(self, record: Validation) -> None:
        """A candidate that fails a request the group failed on before is not trusted; each such
        request vetoes this build only (minicache.build.failures)."""
        missed = self.must - set(record.refused) - {c.example for c in record.checks if c.match}
        if record.ok and missed:
            record.ok, record.error = False, "it fails a request the group failed on before"
            self.vetoed |= missed

    def learn_from(self, record: Validation) -> list[Check]:
        """Keep a failed candidate's failing checks for the record, and tell the target of them."""
        failing = [c for c in record.checks if not c.match]
        self.failed_checks += failing
        self.feedback = failure_feedback(failing) or record.error
        return failing
