"""The one seam between MiniCache and any language model.

Every backend (in-process llama.cpp, an OpenAI-compatible server, the scripted fake) implements
:class:`ModelBackend.complete` and returns a :class:`Completion` that carries the text *and* what it
cost (tokens, prefill and decode seconds), because the cache's whole point is measured savings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from minicache.errors import ModelRequestsBlocked

# In-process compute (llama.cpp models, the NumPy embedder) takes one process-wide lock, requests
# ahead of background builds (compute.py). Re-entrant: the target holds it while its drafter drafts.
from minicache.models.compute import CPU_LOCK  # noqa: F401 - re-exported

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


DraftKind = Literal["none", "small", "lookup"]


@dataclass(frozen=True)
class GenerationOptions:
    """Per-call knobs. ``json_schema`` asks for schema-constrained JSON output.

    ``draft`` selects speculative decoding on backends that support it: ``"small"`` (the small model
    drafts), ``"lookup"`` (n-gram lookup in ``draft_text``, e.g. a cached program), ``"none"``.
    ``None`` means the backend's configured default.

    ``prefix_key`` names calls whose prompts tend to begin alike (the miss path passes the request's
    group: a template's boilerplate). A backend that keeps KV states keeps the last such call's, and
    the next call with the key prefills only what its prompt does not share with it; others ignore
    it. Only the prefill changes; the output is the same greedy decoding, though not always the
    same text (llama.cpp's batched evaluation is not bit-identical across batch shapes).
    """

    max_tokens: int = 512
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    grammar: str | None = (
        None  # a GBNF grammar; only backends with supports_grammar = True accept it
    )
    draft: DraftKind | None = None
    draft_text: str | None = None
    seed: int | None = None
    prefix_key: str | None = None
    # Given each piece of text as it is generated, so that a streamed request shows the target's
    # tokens as they come; a backend that cannot stream gives it the whole text once.
    on_text: Callable[[str], None] | None = None


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    finish_reason: str = "stop"
    model: str = ""
    # Speculative decoding statistics, when drafting was used.
    draft: dict[str, Any] = field(default_factory=dict)
    # Choice decoding (models/choice.py): per field, the log-probability margin of the chosen value.
    choice_margins: dict[str, float] = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_s


@runtime_checkable
class ModelBackend(Protocol):
    """What MiniCache needs from a model: chat messages in, a costed :class:`Completion` out.

    A backend may also set ``supports_grammar = True`` to accept ``GenerationOptions.grammar``.
    """

    name: str

    def complete(
        self, messages: list[Message], options: GenerationOptions | None = None
    ) -> Completion: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------------------------
# The guard that keeps unit tests off real models (pydantic-ai's ALLOW_MODEL_REQUESTS idea).

_allow_lock = threading.Lock()
_allow_real_models = True


def set_real_models_allowed(allowed: bool) -> bool:
    """Switch real-model access on or off process-wide; returns the previous value."""
    global _allow_real_models
    with _allow_lock:
        previous, _allow_real_models = _allow_real_models, allowed
    return previous


def check_real_models_allowed(what: str) -> None:
    """Raise :class:`ModelRequestsBlocked` if real models are switched off (the test suite does this)."""
    if not _allow_real_models:
        raise ModelRequestsBlocked(
            f"refusing to use a real model ({what}): real-model access is switched off. "
            "Unit tests must use minicache.models.FakeBackend; tests that need a real model are "
            "marked @pytest.mark.real_model."
        )


def user(content: str) -> Message:
    return Message("user", content)


def system(content: str) -> Message:
    return Message("system", content)
