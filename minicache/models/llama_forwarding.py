"""Pass-through on the in-process llama.cpp model: the client's OpenAI body handed to llama-cpp-python's
``create_chat_completion`` (messages, tools, response_format, sampling), and streamed generation
for a miss that shows its tokens as they come.

What the model is asked is the client's request itself, under the same compute lock as every other
call, so a forwarded request costs what a direct call to the model costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from minicache.errors import BackendError
from minicache.models.base import check_real_models_allowed
from minicache.models.forwarding import content_text, usage
from minicache.models.llama_setup import fix_schema_patterns


class LlamaCppBackend(Protocol):
    """What forwarding needs of :class:`~minicache.models.llamacpp.LlamaCppBackend` (which calls
    this module, so it is not imported here)."""

    name: str
    llm: Any
    _lock: Any


# The request fields llama-cpp-python's create_chat_completion reads; others (user, metadata,
# store, stream_options, n) are the client's business or not supported by the model.
CHAT_FIELDS = (
    "messages",
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "response_format",
    "max_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
)
COMPLETION_FIELDS = ("prompt", "max_tokens", "temperature", "top_p", "stop", "seed", "echo")


def chat_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """The body as ``create_chat_completion``'s arguments: text content (the model's chat template
    renders strings), ``max_completion_tokens`` as ``max_tokens``, a JSON schema as the grammar
    llama-cpp-python builds from ``{"type": "json_object", "schema": ...}``."""
    kwargs = {k: body[k] for k in CHAT_FIELDS if body.get(k) is not None}
    if body.get("max_completion_tokens") and "max_tokens" not in kwargs:
        kwargs["max_tokens"] = body["max_completion_tokens"]
    kwargs["messages"] = [
        {**m, "content": content_text(m.get("content"))} if isinstance(m, dict) else m
        for m in body.get("messages") or []
    ]
    fmt = kwargs.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
        kwargs["response_format"] = {"type": "json_object", "schema": fix_schema_patterns(schema)}
    return kwargs


def forward_chat(backend: LlamaCppBackend, body: dict[str, Any]) -> dict[str, Any]:
    check_real_models_allowed(f"{backend.name} (pass-through)")
    with backend._lock:
        try:
            out = backend.llm.create_chat_completion(**chat_kwargs(body))
        except ValueError as exc:  # a prompt longer than the context window
            raise BackendError(f"{backend.name}: {exc}") from exc
    return {**out, "model": body.get("model", backend.name)}


def stream_chat(backend: LlamaCppBackend, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """llama-cpp-python's chunks as the model makes them; a usage chunk when the client asked for
    one (llama-cpp-python does not send it: the tokens are counted here)."""
    check_real_models_allowed(f"{backend.name} (pass-through)")
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    pieces = 0
    last: dict[str, Any] = {}
    with backend._lock:
        try:
            stream = backend.llm.create_chat_completion(**chat_kwargs(body), stream=True)
        except ValueError as exc:
            raise BackendError(f"{backend.name}: {exc}") from exc
        for chunk in stream:
            last = {**chunk, "model": body.get("model", backend.name)}
            pieces += sum(bool((c.get("delta") or {}).get("content")) for c in chunk["choices"])
            yield last
        in_context = int(backend.llm.n_tokens)
    if include_usage and last:
        yield {**last, "choices": [], "usage": usage(max(0, in_context - pieces), pieces)}


def forward_completion(backend: LlamaCppBackend, body: dict[str, Any]) -> dict[str, Any]:
    check_real_models_allowed(f"{backend.name} (pass-through)")
    kwargs = {k: body[k] for k in COMPLETION_FIELDS if body.get(k) is not None}
    with backend._lock:
        try:
            out = backend.llm.create_completion(**kwargs)
        except ValueError as exc:
            raise BackendError(f"{backend.name}: {exc}") from exc
    return {**out, "model": body.get("model", backend.name)}


def streamed(
    chunks: Iterator[dict[str, Any]], on_text: Callable[[str], None], prompt_tokens: int
) -> dict[str, Any]:
    """A streamed ``create_chat_completion``, each piece given to ``on_text`` as it is made, as
    the whole response a call without streaming returns (its usage counted from the pieces)."""
    parts: list[str] = []
    finish = "stop"
    for chunk in chunks:
        for choice in chunk["choices"]:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                parts.append(piece)
                on_text(piece)
            finish = choice.get("finish_reason") or finish
    return {
        "choices": [{"message": {"content": "".join(parts)}, "finish_reason": finish}],
        "usage": usage(prompt_tokens, len(parts)),
    }
