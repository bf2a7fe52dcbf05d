"""One exception hierarchy: catch :class:`MiniCacheError` to catch everything MiniCache raises on purpose."""

from __future__ import annotations


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
