"""Model backends: one :class:`ModelBackend` contract, three implementations, plus the embedded files."""

from minicache.models.base import (
    Completion,
    GenerationOptions,
    Message,
    ModelBackend,
    check_real_models_allowed,
    set_real_models_allowed,
    system,
    user,
)
from minicache.models.fake import FakeBackend
from minicache.models.openai import PROFILES, OpenAIBackend, ServerProfile

__all__ = [
    "Completion",
    "GenerationOptions",
    "Message",
    "ModelBackend",
    "FakeBackend",
    "OpenAIBackend",
    "ServerProfile",
    "PROFILES",
    "LlamaCppBackend",
    "check_real_models_allowed",
    "set_real_models_allowed",
    "system",
    "user",
]


def __getattr__(name: str):
    # llama-cpp-python is imported only when the in-process backend is actually asked for.
    if name == "LlamaCppBackend":
        from minicache.models.llamacpp import LlamaCppBackend

        return LlamaCppBackend
    raise AttributeError(name)
