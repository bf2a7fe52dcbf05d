"""What a failed build or an evicted entry teaches the next build.

A failed build records which examples failed which check (expected, got, variables, error); a
failed hit records the request. The record lives in the store (``groups.failure``), so every
replica's next attempt sees it: the failing examples and requests join the validation set, the
target's generalization starts from the recorded feedback, and a retry waits for a new example.
A request an entry failed on must pass, but it vetoes one build only (``vetoed``): its answer is
one miss-path sample, as often wrong as pot is (on Formula's Net Present Value pot is right on
about a third), so the entry whose would-be hit disagreed with it may be the right side. When
such a request had to pass every build, one answered wrong by the miss path failed each of its
group's six builds and made it uncacheable; a failing held example had to pass every later build
in the same way, and the group's wrong miss answers made every candidate fail. After its one
veto the request stays in the validation set as an ordinary held example, and the rebuilt entry
is checked by probation and audits like any other.
From the second failure on, the group also backs off in time, doubling each failure (``backoff_s``
x 2^(k-2) after the k-th, at most ``backoff_max_s``), instead of a fixed hour after a fixed number
of failures. Whether a failed group is worth building again is admission's
(:mod:`minicache.build.admission`, the group's own failures in its odds).
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from minicache.build.validation import Attempt, AttemptSource, Check, CheckRecord
from minicache.config.engine import AdmissionConfig
from minicache.hit.failures import MAX_RECORDED
from minicache.store.base import Example, Group, Store


class RecordedCheck(TypedDict):
    """A failed check as the group's failure keeps it: what the next build's feedback is made of."""

    example: str
    expected: Any
    got: Any
    variables: dict[str, Any] | None
    error: str | None


class RecordedAttempt(TypedDict):
    """An attempt as the group's failure keeps it (``ok`` None: it raised before it was validated)."""

    source: AttemptSource | None
    ok: bool | None
    error: str | None


def recorded_check(check: CheckRecord) -> RecordedCheck:
    return {
        "example": check["example"],
        "expected": check["expected"],
        "got": check["got"],
        "variables": check["variables"],
        "error": check["error"],
    }


def recorded_attempt(attempt: Attempt) -> RecordedAttempt:
    return {
        "source": attempt.get("source"),
        "ok": attempt.get("ok"),
        "error": attempt.get("error"),
    }


def backing_off(group: Group, failure: dict[str, Any] | None, now: float | None = None) -> bool:
    """Whether a failed group must wait: its back-off has not run out, or no example is new since."""
    if (now or time.time()) < group.uncacheable_until:
        return True
    return (
        failure is not None
        and failure.get("kind") == "build"
        and group.n_examples <= failure.get("n_examples", 0)
    )


def record_build_failure(
    store: Store,
    group: Group,
    attempts: list[Attempt],
    checks: list[CheckRecord],
    feedback: str | None,
    config: AdmissionConfig,
    max_build_failures: int,
    vetoed: set[str] | frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Count a failed build, back the group off exponentially, and record why for the next attempt.
    ``vetoed``: the examples of must-pass requests this build failed on; they veto no later build."""
    previous = store.group_failure(group.tenant, group.id) or {}
    group.build_failures += 1
    # The first failure waits only for a new example (it joins the validation set); then time doubles.
    wait = (
        0.0
        if group.build_failures == 1
        else min(config.backoff_s * 2 ** (group.build_failures - 2), config.backoff_max_s)
    )
    group.uncacheable_until = time.time() + wait
    if group.build_failures >= max_build_failures:
        group.status = "uncacheable"
    store.update_group(group)
    failed = [c for c in checks if not c["match"]]
    examples = list(
        dict.fromkeys([c["example"] for c in failed if c["example"]] + previous.get("examples", []))
    )
    failure = {
        "kind": "build",
        "at": time.time(),
        "failures": group.build_failures,
        "backoff_s": wait,
        "n_examples": group.n_examples,
        "examples": examples[:MAX_RECORDED],
        "requests": previous.get("requests", [])[:MAX_RECORDED],
        "hit_errors": previous.get("hit_errors", [])[:MAX_RECORDED],
        "vetoed": sorted(set(previous.get("vetoed", [])) | set(vetoed)),
        "checks": [recorded_check(c) for c in failed[:MAX_RECORDED]],
        "attempts": [recorded_attempt(a) for a in attempts],
        "feedback": feedback,
    }
    store.set_group_failure(group.tenant, group.id, failure)
    return failure


def validation_set(
    examples: list[Example], failure: dict[str, Any] | None, n: int
) -> tuple[list[Example], set[str]]:
    """The examples a build validates on: the newest ``n``, plus every recorded failing example or
    request still in the group. Returns them and the ids that must pass: the recorded requests an
    entry failed on, each until a build has failed on it (``vetoed``, see the module's docstring)."""
    held = examples[-n:]
    if not failure:
        return held, set()
    ids = set(failure.get("examples", []))
    questions = set(failure.get("requests", []))
    vetoed = set(failure.get("vetoed", []))
    recorded = [ex for ex in examples if ex.id in ids or ex.question in questions]
    recorded_ids = {ex.id for ex in recorded}
    must_ids = {ex.id for ex in recorded if ex.question in questions and ex.id not in vetoed}
    return recorded + [ex for ex in held if ex.id not in recorded_ids], must_ids


def failure_feedback(failing: list[Check]) -> str:
    """What the target is told of the checks a program failed, for its next generalization."""
    return "\n".join(
        f"- expected {c.expected}, got {c.error if c.error is not None else c.got} with "
        f"variables {c.variables}"
        for c in failing[:4]
    )
