"""MiniCache: parameterized program caching for LLM requests that share a computation.

The public API is small; everything else lives in private-by-convention modules.
"""

from minicache.config.models import Settings, build_backends, load_settings
from minicache.engine import EngineConfig, InvalidRequest, MiniCache, SolveError, SolveResult
from minicache.errors import (
    AnswerError,
    BackendError,
    BackendResponseError,
    BackendTimeout,
    BackendUnavailable,
    ConfigError,
    ExtractionError,
    HitRefused,
    MiniCacheError,
    ModelFetchError,
    ModelFileError,
    ModelRequestsBlocked,
    NotAStepTask,
    ProgramError,
    SandboxError,
    SandboxUnavailable,
    SandboxViolation,
    StoreBusy,
    StoreError,
)
from minicache.models import (
    Completion,
    FakeBackend,
    GenerationOptions,
    Message,
    ModelBackend,
    OpenAIBackend,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "MiniCache",
    "EngineConfig",
    "SolveResult",
    "InvalidRequest",
    "SolveError",
    "Settings",
    "load_settings",
    "build_backends",
    "ModelBackend",
    "Completion",
    "GenerationOptions",
    "Message",
    "FakeBackend",
    "OpenAIBackend",
    "LlamaCppBackend",
    "MiniCacheError",
    "ConfigError",
    "ModelFileError",
    "ModelFetchError",
    "BackendError",
    "BackendUnavailable",
    "BackendTimeout",
    "BackendResponseError",
    "ModelRequestsBlocked",
    # every one of them a MiniCacheError (minicache/errors.py)
    "ExtractionError",
    "HitRefused",
    "ProgramError",
    "SandboxViolation",
    "SandboxError",
    "SandboxUnavailable",
    "AnswerError",
    "NotAStepTask",
    "StoreError",
    "StoreBusy",
]


def __getattr__(name: str):
    if name == "LlamaCppBackend":
        from minicache.models.llamacpp import LlamaCppBackend

        return LlamaCppBackend
    raise AttributeError(name)
