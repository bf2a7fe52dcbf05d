"""A streamed ``/v1/completions``: the target's own ``text_completion`` chunks as it generates them.

A backend that streams text completions (``stream_completion(body)``, the counterpart of
``stream_chat``: :class:`CompletionStreaming`) is sent the client's body with ``stream: true`` and
its chunks are forwarded as they come, its usage chunk too when the client asked for
``stream_options.include_usage``. A backend without it is asked for its whole answer, from its own
``/completions``: only that endpoint answers the prompt as written (a chat call would wrap it in a
chat template), so its text is sent as one chunk, its usage after it when asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from minicache.models.forwarding import forward_completion, target_body


@runtime_checkable
class CompletionStreaming(Protocol):
    """A backend that streams a ``/v1/completions`` body's ``text_completion`` chunks."""

    def stream_completion(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]: ...


def stream_completion(backend: Any, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The target's ``text_completion`` chunks for the client's body (blocking: run it in a worker
    thread), as they are generated when the backend can stream them."""
    if isinstance(backend, CompletionStreaming):
        model = str(getattr(backend, "model", None) or getattr(backend, "name", ""))
        yield from backend.stream_completion({**target_body(body, model), "stream": True})
        return
    whole = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    yield from whole_completion_chunks(
        forward_completion(backend, whole), include_usage=wants_usage(body)
    )


def wants_usage(body: dict[str, Any]) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


def whole_completion_chunks(data: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
    """A whole ``text_completion`` as a stream: one chunk with its choices (text and finish), then
    its usage in a chunk without choices if asked for, as OpenAI sends them."""
    base: dict[str, Any] = {k: data[k] for k in ("id", "created", "model") if k in data}
    base["object"] = "text_completion"
    yield {**base, "choices": data.get("choices") or []}
    if include_usage and data.get("usage"):
        yield {**base, "choices": [], "usage": data["usage"]}
