"""One exception hierarchy: catch :class:`MiniCacheError` to catch everything MiniCache raises on purpose."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class MiniCacheError(Exception):
    """Base class of every error MiniCache raises deliberately."""


class ConfigError(MiniCacheError):
    """A setting (env var, config file, argument) is missing or invalid."""


class ModelFileError(MiniCacheError):
    """An embedded model file is missing, truncated, or fails its checksum."""


class ModelFetchError(ModelFileError):
    """Downloading or joining the parts of an embedded model failed."""


class BackendError(MiniCacheError):
    """A model backend failed to produce a completion."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached (server down, connection refused, DNS failure)."""


class BackendTimeout(BackendError):
    """The backend did not answer within the configured timeout."""


class BackendResponseError(BackendError):
    """The backend answered, but with an error status or a malformed body."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ModelRequestsBlocked(BackendError):
    """A real model was about to be used while real-model access is switched off (unit tests)."""


class InvalidRequest(MiniCacheError):
    """The input itself is unusable (a request, an import document); nothing was stored."""


class SolveError(MiniCacheError):
    """Neither the cache nor the target could produce an answer for this request.

    ``fallback_reason``: why the request's hit was not served before the miss path failed too
    (``"HitRefused: range: ..."``), None when no hit was attempted."""

    fallback_reason: str | None = None


class ExtractionError(MiniCacheError):
    """The template could not be filled for this request (the engine falls back to the miss path)."""


class HitRefused(ExtractionError):
    """The hit could not be shown to be right; the request goes to the miss path.

    ``check`` names the check that refused; ``shadow`` marks a refusal only because the entry is
    demoted, after which the engine audits the would-be hit against the miss answer. ``readings``
    are the values the refused hit had, by where they came from (``"rule"``, ``"align"``,
    ``"model"``, or ``"hit"`` for the values it would have served), ``variable`` the one a value
    or context check refused, ``cues`` the word stems around the value a context check refused, and
    ``answer`` the answer an answer check refused: with the miss answer they show whether the
    refusal was founded (:mod:`minicache.hit.refusals`). ``model_s``: the seconds of the extraction when
    the small model had chosen the refused values, else None (:mod:`minicache.hit.model_record`)."""

    def __init__(
        self,
        check: str,
        reason: str,
        *,
        shadow: bool = False,
        readings: dict[str, dict[str, Any]] | None = None,
        variable: str | None = None,
        cues: list[str] | None = None,
    ) -> None:
        super().__init__(f"{check}: {reason}")
        self.check, self.reason, self.shadow = check, reason, shadow
        self.readings, self.variable, self.cues = readings, variable, cues
        self.answer: Any = None
        self.model_s: float | None = None


class ProgramError(MiniCacheError):
    """A program gave no usable answer: refused by the sandbox's gate, failed while running, or
    returned something that is not an answer. The hit, miss and build paths catch this one class."""


class SandboxViolation(ProgramError):
    """The program uses something outside the sandbox's allow-list; it was not run."""


class SandboxError(ProgramError):
    """The program ran in the sandbox but failed: exception, timeout, resource limit, bad result."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        # "error" | "timeout" | "memory" | "crash" | "result" | "unavailable" | "busy"
        self.kind = kind


class SandboxUnavailable(SandboxError):
    """This machine cannot provide the sandbox's OS layer; no program is run without it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="unavailable")


class AnswerError(ProgramError):
    """A program ran, but its value is not an answer (None, a bool, NaN, an empty or huge object).

    Not a :class:`SandboxError`: the sandbox did its job; the value is the program's mistake."""


class ProgramShapeError(MiniCacheError, ValueError):
    """A program is not a ``solve(...)`` with keyword parameters and literal defaults.

    Also a ValueError, which callers caught before it joined this hierarchy."""


class NotAStepTask(MiniCacheError):
    """The request is not one StepCache can verify (a linear equation to solve, or JSON with typed keys)."""


class StepParseError(MiniCacheError, ValueError):
    """Text is not a linear expression in the unknown (``stepcache.linear.ParseError``; a ValueError too)."""


class SmokeReport(Protocol):
    """What :class:`SmokeCheckError` carries per model (``minicache.models.smoke.SmokeResult`` is one).

    Named by its shape so that this module, which every other imports, imports none of them."""

    ok: bool
    seconds: float
    model: str
    error: str

    def as_dict(self) -> dict[str, object]: ...


class SmokeCheckError(MiniCacheError):
    """The llama.cpp build could not load a model and decode one token on this machine."""

    def __init__(self, message: str, results: Mapping[str, SmokeReport]) -> None:
        super().__init__(message)
        self.results = results


class Denied(MiniCacheError):
    """The dashboard refuses a viewer: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class StoreError(MiniCacheError):
    """The store could not be opened, is from a newer MiniCache, or refused a write (nothing written)."""


class StoreBusy(StoreError):
    """Another writer held the database's write lock for longer than the busy timeout (retry later)."""
