"""What ``solve`` returns, and what counts as an answer: checked on the way out of every program,
written in the precision the request asks for.

The hit, miss and build paths all pass a program's value through :func:`check_answer`, so a value
that is not an answer (None, a bool, NaN, an empty or huge object) fails the same way everywhere:
:class:`~minicache.errors.AnswerError`, which the stages catch with the sandbox's errors.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from minicache.errors import AnswerError


class Route(StrEnum):
    """The way a request was answered. Members are their strings, so JSON, metrics labels and
    comparisons with ``"hit"`` read the same as plain text."""

    # the program cache
    HIT = "hit"  # a cached program ran on values extracted from this request
    MISS = "miss"  # the target wrote a program (no entry, or the lookup was skipped)
    FALLBACK = "fallback"  # a hit was tried and failed, then the miss path answered
    # StepCache
    STEP_REUSE = "step-reuse"  # a cached output, re-instantiated, passed every check
    STEP_PATCH = "step-patch"  # a cached output whose failing steps the target rewrote
    STEP_SKIP = "step-skip"  # nothing reusable: the target wrote the whole output
    FULL = "full"  # a whole output written elsewhere, only checked (StepCache.check_or_fallback)
    # not a computation the cache can serve: the target answered the client's own request
    PASSTHROUGH = "passthrough"
    # labels of requests that have no result (the server's metrics)
    INVALID = "invalid"
    ERROR = "error"


@dataclass
class SolveResult:
    answer: Any
    route: Route
    group: str
    entry_id: str | None = None
    program: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    # Tokens each model computed; a miss on a real model also gives "target_cached": prompt tokens
    # whose KV state was already there (a system prompt, a group's kept boilerplate) and not prefilled.
    tokens: dict[str, int] = field(default_factory=lambda: {"target": 0, "small": 0})
    similarity: float = 0.0
    extraction: str | None = None  # how a hit's values were found (minicache.hit.extraction.Method)
    # The variables whose values the entry's learned rules read and gave the small model, which
    # chose the rest (minicache.hit.verify.HitVerifier.pinned); empty where no model chose.
    pinned: list[str] = field(default_factory=list)
    fallback_reason: str | None = None
    answer_text: str = ""
    # StepCache (structured outputs): the stitched output, its steps, whether every check passed,
    # and whether the deterministic solver wrote it after the target failed the checks.
    output: str | None = None
    steps: list[str] = field(default_factory=list)
    verified: bool | None = None
    solver_fallback: bool = False
    reused_from: str | None = None
    # Seconds of this request spent waiting for the compute lock (background builds and audits
    # within their share, or another request): in the stages' timings already, told apart here.
    lock_wait_s: float = 0.0
    # Why the engine left this request to the target (route "passthrough", no answer): the caller
    # forwards the client's own request, and ``tokens`` are what the engine spent first.
    passthrough_reason: str | None = None

    def __post_init__(self) -> None:
        self.route = Route(self.route)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def passed_through(reason: str, group: str, tokens: dict[str, int] | None = None) -> SolveResult:
    """The result of a request the engine leaves to the target (see ``MiniCache.solve``)."""
    spent = {"target": 0, "small": 0, **(tokens or {})}
    return SolveResult(None, Route.PASSTHROUGH, group, tokens=spent, passthrough_reason=reason)


# Starts only where a number starts: inside a long run of digits every start would rescan the run.
_DECIMALS = re.compile(r"(?<!\d)(\d+|one|two|three|four) decimal places?", re.I)
_WORD_NUM = {"one": 1, "two": 2, "three": 3, "four": 4}
# a float has 17 significant digits; "50000000 decimal places" would be a 50 MB answer
MAX_DECIMALS = 100


def requested_decimals(question: str) -> int | None:
    """The decimal places the question asks for ("2 decimal places"), if any."""
    m = _DECIMALS.search(question)
    if not m:
        return None
    digits = m.group(1).lower()
    return _WORD_NUM.get(digits) or (int(digits) if len(digits) <= 9 else 10**9)


def format_answer(value: Any, question: str) -> str:
    """The answer as text, in the precision the request asks for ("2 decimal places", at most
    :data:`MAX_DECIMALS`; ``solve`` refuses requests that ask for more before anything runs)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        n = requested_decimals(question)
        if n is not None:
            return f"{value:.{min(n, MAX_DECIMALS)}f}"
        return f"{value:.10g}" if isinstance(value, float) else str(value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _is_word_list(value: Any) -> bool:
    return (
        isinstance(value, list) and 0 < len(value) <= 50 and all(isinstance(v, str) for v in value)
    )


def check_answer(value: Any) -> Any:
    """Answers must be finite numbers, short strings, or a small flat object of those (an action
    such as ``{"keywords": "red shoes", "max_price": 40}``); anything else raises AnswerError."""
    if isinstance(value, dict):
        if not 0 < len(value) <= 20 or len(json.dumps(value)) > 2000:
            raise AnswerError("program returned an object that is empty or too large")
        # A list of words as one of its values ("keywords": ["red", "shoes"]) is read as one text.
        return {
            str(k): check_answer(" ".join(map(str, v)) if _is_word_list(v) else v)
            for k, v in value.items()
        }
    if isinstance(value, bool) or value is None:
        raise AnswerError(f"program returned {value!r}, not a number")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise AnswerError(f"program returned a non-finite number {value!r}")
        return value
    if isinstance(value, str) and 0 < len(value) <= 500:
        try:
            return float(value.replace(",", ""))
        except ValueError:
            return value
    raise AnswerError(f"program returned {type(value).__name__}, not a number")
