"""One build of one group, as :class:`~minicache.build.builder.Builder` carries it through its
steps: what it works from (the group's examples, its last failure, the held examples) and what it
has tried so far (the attempts, the failed checks, the small model's seconds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minicache.build.validation import Attempt, Check
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

    @property
    def failures(self) -> int:
        """The group's failed builds so far, as its last failure recorded them."""
        return int(self.failure.get("failures", 0)) if self.failure else 0
