"""What a build records: why it made no entry, each held example's check, each candidate's validation.

Kept apart from :mod:`minicache.build.builder` (which makes them) so that what a failed build stores, and
the reasons it gives, read in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

from minicache.store import Variable

# Why a build did not ask the target to generalize. Every own program it lifted answered only its
# own example, with the model-free comparison and through the hit path: nothing shows the examples
# are one computation, and a generalization of several is expected to fail. It is the build's dear
# step (55-66 s of compute on the 2-core VM), and none asked so ever made an entry in the committed
# runs (Formula v3-v6, SVAMP, no-repetition: every entry was lifted). In no-repetition-v3, routing
# grouped six different TAT-QA derivations; the target's attempt took 58.5 s and failed, and the
# requests it overlapped waited 22 s for it.
NO_SHARED_COMPUTATION = (
    "not asked: no own program reproduced another example, so the examples may be "
    "different computations"
)


# Why a build did not validate an own program that no other example backs (``Candidate.backed``):
# another such program already failed a check that needed the small model, on the same held
# examples. Such a program is trusted only if it passes every held example, and the one that came
# first in the ranking was read wrong by the model on one of them. In the committed stores
# (benchmarks/results, 2026-12-04) 35 groups' last failed builds validated two lifted programs and
# both failed (20 with NO_SHARED_COMPUTATION: neither was backed), and no entry came from a second
# candidate after an unbacked first one (in each of Formula v6-v12 one entry came from a second
# candidate, and its first was backed). tatqa-v5's seven failed groups, rebuilt from the same examples
# (scripts/rebuild_replay.py), spent 2.8-6.7 s on the second one's extraction, which failed on
# the same held example as the first.
UNBACKED_NOT_TRIED = (
    "not validated: an own program no other example backs already failed a check "
    "of the small model's on these held examples"
)


# Why a check that needed the small model failed without asking it: no choice of the request's
# numbers gives the example's answer (minicache.build.reach), so no reading of the model's could.
UNREACHABLE = "no choice of the request's numbers gives its answer (the small model was not asked)"


class NotYet:
    """What an early build that made no entry returns: not a failure, the group waits for more examples."""


NOT_YET = NotYet()


@dataclass
class Check:
    """One held example run through the real hit path during validation (stored with a failed build)."""

    example: str
    expected: Any
    variables: dict[str, Any] | None = None
    got: Any = None
    match: bool = False
    error: str | None = None
    extraction: str | None = None  # "align" (with the candidate's own example) or the model's mode

    @property
    def by_model(self) -> bool:
        """Whether the small model chose this check's values (not a complete alignment)."""
        return self.extraction is not None and self.extraction != "align"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Validation:
    """What validating one candidate found: whether it passed, with which template and extraction
    mode, each held example's check, and the (request text, values) pairs that matched."""

    ok: bool
    error: str | None = None
    template: list[Variable] = field(default_factory=list)
    extraction: Literal["choice", "free"] | None = None
    checks: list[Check] = field(default_factory=list)
    validated: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    passed: int = 0
    of: int = 0
    shared_prefix: str = ""
    defaults: dict[str, Any] = field(
        default_factory=dict
    )  # the candidate's defaults (None where it has none)
    refused: list[str] = field(
        default_factory=list
    )  # examples the entry's hit path would refuse (tables)
    model_s: float = 0.0  # compute seconds of the small model's checks
    declined: bool = (
        False  # stopped before the small model's first check: not expected to pay (admission)
    )


class Attempt(TypedDict, total=False):
    """One candidate a build tried, as stored in the entry's validation record and the group's failure."""

    source: str
    ok: bool
    error: str | None
    agreements: int
