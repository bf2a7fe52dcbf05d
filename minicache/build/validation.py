"""What a build records: why it made no entry, each held example's check, each candidate's validation.

Kept apart from :mod:`minicache.build.builder` (which makes them) so that what a failed build stores, and
the reasons it gives, read in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypedDict, cast

from minicache.store import Variable

# Why a build did not ask the target to generalize. Every own program it lifted answered only its
# own example, with the model-free comparison and through the hit path: nothing shows the examples
# are one computation, and a generalization of several is expected to fail. It is the build's dear
# step (55-66 s of compute on a 2-core machine), and none asked so ever made an entry in the kept
# runs (every entry was lifted). When routing grouped six different TAT-QA derivations, the
# target's attempt took 58.5 s and failed, and the requests it overlapped waited 22 s for it.
NO_SHARED_COMPUTATION = (
    "not asked: no own program reproduced another example, so the examples may be "
    "different computations"
)


# Why a build did not validate an own program that no other example backs (``Candidate.backed``):
# another such program already failed a check that needed the small model, on the same held
# examples. Such a program is trusted only if it passes every held example, and the one that came
# first in the ranking was read wrong by the model on one of them. In the kept stores, 35 groups'
# last failed builds validated two lifted programs and both failed (20 with NO_SHARED_COMPUTATION:
# neither was backed), and no entry came from a second candidate after an unbacked first one
# (every entry from a second candidate had a backed first). Failed TAT-QA groups rebuilt from the
# same examples spent 2.8-6.7 s on the second one's extraction, which failed on the same held
# example as the first.
UNBACKED_NOT_TRIED = (
    "not validated: an own program no other example backs already failed a check "
    "of the small model's on these held examples"
)


# Why a check that needed the small model failed without asking it: no choice of the request's
# numbers gives the example's answer (minicache.build.reach), so no reading of the model's could.
UNREACHABLE = "no choice of the request's numbers gives its answer (the small model was not asked)"


class AttemptSource(StrEnum):
    """Where the program a build tried came from (an attempt's ``source``, the entry's too).

    Members are the strings stored in the entry's validation record and the group's failure."""

    LIFTED = "lifted"  # an example's plain miss program, lifted into ``solve(**variables)``
    MISS_PROGRAM = "miss-program"  # an example's miss program, already parameterized
    TARGET_BUILD = "target-build"  # the target's generalization of the held examples
    AGREEMENT = "agreement"  # no program: the group's own programs contradict each other
    SAMPLES = "samples"  # no program: the target's samples agree on no computation


class NotYet:
    """What an early build that made no entry returns: not a failure, the group waits for more examples."""


NOT_YET = NotYet()


class CheckRecord(TypedDict):
    """A :class:`Check` as plain data (its fields, in order), as a failed build records it."""

    example: str
    expected: Any
    variables: dict[str, Any] | None
    got: Any
    match: bool
    error: str | None
    extraction: str | None


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

    def as_dict(self) -> CheckRecord:
        return cast(CheckRecord, asdict(self))  # its fields, in order: CheckRecord's


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
    # the candidate's defaults (None where it has none)
    defaults: dict[str, Any] = field(default_factory=dict)
    # examples the entry's hit path would refuse (tables)
    refused: list[str] = field(default_factory=list)
    model_s: float = 0.0  # compute seconds of the small model's checks
    # stopped before the small model's first check: not expected to pay (admission)
    declined: bool = False


class Attempt(TypedDict, total=False):
    """One candidate a build tried, as stored in the entry's validation record and the group's failure."""

    source: AttemptSource
    ok: bool
    error: str | None
    agreements: int
