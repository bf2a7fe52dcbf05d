"""Forwarding a client's own request to the target: what pass-through needs from a backend.

A request the cache cannot serve as a computation (a chat, a tool call, a ``response_format``) is
sent to the target as the client wrote it, and the client gets the target's own response. Backends
that can speak the OpenAI format natively implement :class:`Forwarding` (one call, the body as it
came, the target's response as it went); :func:`forward_chat` and the others dispatch to it, and
fall back to :meth:`~minicache.models.base.ModelBackend.complete` for a backend that has only that
(its text answer wrapped in OpenAI's objects), so any backend can be a pass-through target.
A backend that also streams text completions implements :class:`CompletionStreaming`; one without
it answers a streamed ``/v1/completions`` whole (:func:`stream_completion`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from minicache.models.base import Completion, GenerationOptions, Message

# The request fields MiniCache itself reads; a target is never sent them.
OWN_FIELDS = ("minicache",)
_ROLES = {"system": "system", "developer": "system", "assistant": "assistant"}


@runtime_checkable
class Forwarding(Protocol):
    """A backend that sends OpenAI-format bodies as they are: the dispatchers below have set
    ``model`` to the backend's and removed MiniCache's own fields (:func:`target_body`)."""

    def forward_chat(self, body: dict[str, Any]) -> dict[str, Any]: ...

    def stream_chat(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]: ...

    def forward_completion(self, body: dict[str, Any]) -> dict[str, Any]: ...


@runtime_checkable
class CompletionStreaming(Protocol):
    """A backend that streams a ``/v1/completions`` body's ``text_completion`` chunks as it
    generates them (the counterpart of :meth:`Forwarding.stream_chat`), its usage in a last chunk
    without choices when the body asks for ``stream_options.include_usage``."""

    def stream_completion(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]: ...


def target_body(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The client's body for the target: its model's name, without MiniCache's own fields and
    metadata (a target would refuse a parameter it does not know)."""
    out = {k: v for k, v in body.items() if k not in OWN_FIELDS}
    out["model"] = model
    metadata = {
        k: v for k, v in (out.get("metadata") or {}).items() if not k.startswith("minicache_")
    }
    if metadata:
        out["metadata"] = metadata
    else:
        out.pop("metadata", None)
    return out


def content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) if isinstance(p, dict) else str(p)
            for p in content
            if not isinstance(p, dict) or p.get("type") == "text"
        )
    return ""


def messages_of(body: dict[str, Any]) -> list[Message]:
    """A chat body's messages as text messages (tool results are read as user turns)."""
    return [
        Message(_ROLES.get(str(m.get("role")), "user"), content_text(m.get("content")))  # type: ignore[arg-type]
        for m in body.get("messages") or []
        if isinstance(m, dict)
    ]


def options_of(body: dict[str, Any]) -> GenerationOptions:
    stop = body.get("stop")
    return GenerationOptions(
        max_tokens=int(body.get("max_completion_tokens") or body.get("max_tokens") or 512),
        temperature=float(body.get("temperature") or 0.0),
        stop=(stop,) if isinstance(stop, str) else tuple(stop or ()),
        seed=body.get("seed"),
    )


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_response(
    message: dict[str, Any], model: str, prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    """A ``chat.completion`` with one choice (finish_reason ``tool_calls`` when it calls tools)."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, **message},
                "logprobs": None,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def chat_chunks(
    pieces: Iterable[str],
    model: str,
    prompt_tokens: int,
    include_usage: bool,
    extra_delta: dict[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """``chat.completion.chunk`` events for text generated piece by piece: the role, each piece,
    the finish, then the usage if asked for (completion tokens counted as pieces)."""
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    n = 0
    for piece in pieces:
        n += 1
        yield chunk({"content": piece})
    if extra_delta:
        yield chunk(extra_delta)
    yield chunk({}, "tool_calls" if extra_delta and extra_delta.get("tool_calls") else "stop")
    if include_usage:
        yield {**base, "choices": [], "usage": usage(prompt_tokens, n)}


def completion_response(
    text: str, model: str, prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    """A legacy ``text_completion`` (``/v1/completions``)."""
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
        "usage": usage(prompt_tokens, completion_tokens),
    }


def completion_chunks(
    pieces: Iterable[str], model: str, prompt_tokens: int, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """``text_completion`` chunks for text generated piece by piece: each piece, the finish, then
    the usage if asked for (completion tokens counted as pieces)."""
    base = {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(text: str, finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    n = 0
    for piece in pieces:
        n += 1
        yield chunk(piece)
    yield chunk("", "stop")
    if include_usage:
        yield {**base, "choices": [], "usage": usage(prompt_tokens, n)}


def _model_of(backend: Any, out: Completion | None = None) -> str:
    return str(getattr(backend, "model", None) or (out.model if out else "") or backend.name)


def forward_chat(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The target's ``chat.completion`` for the client's body: one target call."""
    if isinstance(backend, Forwarding):
        return backend.forward_chat(target_body(body, _model_of(backend)))
    out = backend.complete(messages_of(body), options_of(body))
    return chat_response(
        {"content": out.text}, _model_of(backend, out), out.prompt_tokens, out.completion_tokens
    )


def stream_chat(backend: Any, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The target's ``chat.completion.chunk`` events for the client's body, as they are generated
    (a backend that cannot forward sends its whole text as one piece)."""
    if isinstance(backend, Forwarding):
        yield from backend.stream_chat(target_body(body, _model_of(backend)))
        return
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    out = backend.complete(messages_of(body), options_of(body))
    yield from chat_chunks([out.text], _model_of(backend, out), out.prompt_tokens, include_usage)


def forward_completion(backend: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The target's ``text_completion`` for a ``/v1/completions`` body."""
    if isinstance(backend, Forwarding):
        return backend.forward_completion(target_body(body, _model_of(backend)))
    prompt = body.get("prompt")
    text = prompt if isinstance(prompt, str) else "\n".join(map(str, prompt or []))
    out = backend.complete([Message("user", text)], options_of(body))
    return completion_response(
        out.text, _model_of(backend, out), out.prompt_tokens, out.completion_tokens
    )


def stream_completion(backend: Any, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The target's ``text_completion`` chunks for a ``/v1/completions`` body, as they are
    generated when the backend streams them (blocking: run it in a worker thread). A backend that
    does not is asked for its whole answer from its own completions (only they answer the prompt
    as written; a chat call would wrap it in a chat template), without the stream options a
    target refuses on a request it does not stream, and its text sent as one chunk."""
    if isinstance(backend, CompletionStreaming):
        yield from backend.stream_completion(
            {**target_body(body, _model_of(backend)), "stream": True}
        )
        return
    whole = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    yield from whole_completion_chunks(
        forward_completion(backend, whole), include_usage=wants_usage(body)
    )


def wants_usage(body: dict[str, Any]) -> bool:
    """Whether a streamed body asks for a usage chunk (``stream_options.include_usage``)."""
    return bool((body.get("stream_options") or {}).get("include_usage"))


def whole_completion_chunks(data: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    """A whole ``text_completion`` as a stream: one chunk with its choices (text and finish), then
    its usage in a chunk without choices if asked for, as OpenAI sends them."""
    base: dict[str, Any] = {k: data[k] for k in ("id", "created", "model") if k in data}
    base["object"] = "text_completion"
    yield {**base, "choices": data.get("choices") or []}
    if include_usage and data.get("usage"):
        yield {**base, "choices": [], "usage": data["usage"]}
