"""The pass every StepCache request takes, and what each kind of task fills in.

:class:`StepTask` is one parsed request with the steps of the pass: ``adapt`` a cached output
(checked, no model), or ``generate`` one; ``patch`` what fails; ``fall_back`` when that is not
enough; then ``outcome``. :class:`Draft` is the output on its way through, with its checks'
verdicts and what it has cost. :class:`~minicache.stepcache.cache.StepCache` runs the pass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from minicache.answers import Route, SolveResult
from minicache.config.engine import StepConfig
from minicache.errors import BackendError, SolveError
from minicache.models.base import GenerationOptions, Message, ModelBackend
from minicache.store.base import StepRecord


@dataclass
class StepOutcome:
    """What StepCache did; the engine turns it into a :class:`~minicache.answers.SolveResult`."""

    route: Route  # step-reuse | step-patch | step-skip (full: check_or_fallback)
    task: str
    output: str
    steps: list[str]
    answer: Any
    verified: bool
    reused_from: str | None = None
    reason: str = ""  # why reuse was skipped, or what was patched
    patched: int = 0  # steps (JSON: keys) the target regenerated
    solver_fallback: bool = False
    tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def to_result(self) -> SolveResult:
        """The engine's answer for it: StepCache's routes, its stitched output and steps."""
        return SolveResult(
            answer=self.answer,
            route=self.route,
            group=f"step:{self.task}",
            timings=dict(self.timings),
            tokens={"target": self.tokens, "small": 0},
            fallback_reason=self.reason or None,
            answer_text=self.output,
            output=self.output,
            steps=self.steps,
            verified=self.verified,
            solver_fallback=self.solver_fallback,
            reused_from=self.reused_from,
        )


class StepModel:
    """The target as the pass calls it: a system prompt and one user prompt, the text back with the
    tokens it cost; a backend failure is the request's :class:`~minicache.errors.SolveError`."""

    def __init__(self, target: ModelBackend, config: StepConfig) -> None:
        self.target, self.config = target, config

    def complete(
        self,
        system: str,
        prompt: str,
        max_tokens: int,
        schema: dict[str, Any] | None = None,
        stop: tuple[str, ...] = (),
    ) -> tuple[str, int]:
        try:
            out = self.target.complete(
                [Message("system", system), Message("user", prompt)],
                GenerationOptions(max_tokens=max_tokens, json_schema=schema, stop=stop),
            )
        except BackendError as exc:
            raise SolveError(f"target model failed: {exc}") from exc
        return out.text, out.prompt_tokens + out.completion_tokens


@dataclass
class Draft:
    """An output on its way through the pass: its steps (JSON: the object), each part's verdict
    (None = verified), and what it has cost so far."""

    steps: list[str]  # linear: the worked steps; JSON: unused
    obj: dict[str, Any] | None  # JSON: the object; None for linear
    verdicts: Any  # linear: one per step; JSON: one per key ("*" for the object as a whole)
    tokens: int = 0
    patched: int = 0
    reason: str = ""  # why reuse was skipped, and what the fallback did
    solver: bool = False
    reused_from: str | None = None
    # what the fallback says failed, when it comes to that (the patch may say more)
    failure: str = "the target's steps failed their checks"

    @property
    def failing(self) -> int:
        verdicts = self.verdicts.values() if isinstance(self.verdicts, dict) else self.verdicts
        return sum(1 for v in verdicts if v)


class StepTask(ABC):
    """One parsed request of a kind StepCache verifies, with the pass's steps for that kind."""

    kind: str  # the name its records are stored under: "linear" | "json"
    request: Any

    @property
    def frame(self) -> str:
        """The request with its constants, names and output schema masked: same frame, same
        computation."""
        return str(self.request.frame)

    @abstractmethod
    def schema_score(self, old: Any) -> float:
        """How much of the output schema a cached same-frame request shares (higher: closer)."""

    @abstractmethod
    def difference(self, old: Any) -> str:
        """Why a close cached request is not the same computation (the skip reason)."""

    @abstractmethod
    def adapt(self, record: StepRecord, old: Any) -> Draft:
        """``record``'s output re-instantiated for this request and checked (no model)."""

    @abstractmethod
    def generate(self, model: StepModel, reason: str) -> Draft:
        """The whole output from the target, checked (reuse skipped for ``reason``)."""

    @abstractmethod
    def read(self, text: str) -> Draft:
        """A whole output written elsewhere, checked."""

    @abstractmethod
    def patch(self, draft: Draft, model: StepModel, *, regenerate: bool = True) -> Draft:
        """Only the failing parts regenerated by the target, conditioned on the verified ones."""

    @abstractmethod
    def fall_back(self, draft: Draft, model: StepModel) -> Draft:
        """What answers when patching was not enough."""

    @abstractmethod
    def outcome(self, draft: Draft, route: Route) -> StepOutcome:
        """The draft as rendered output, with its final checks."""
