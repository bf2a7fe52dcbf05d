"""Pass-through on the in-process llama.cpp model: the client's OpenAI body handed to llama-cpp-python's
``create_chat_completion`` (messages, tools, response_format, sampling) or ``create_completion`` (a
``/v1/completions`` prompt, streamed too), and streamed generation for a miss that shows its tokens
as they come.

What the model is asked is the client's request itself, under the same compute lock as every other
call, so a forwarded request costs what a direct call to the model costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol

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


class SampledTokens:
    """A stopping criterion that never stops: llama-cpp-python calls it once for each token it
    samples, with the tokens before that one, so the shortest of them is the prompt as the model
    read it and their number the tokens sampled (a streamed chunk is not a token: a character
    split over tokens comes in one chunk)."""

    def __init__(self) -> None:
        self.lengths: set[int] = set()

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        self.lengths.add(len(input_ids))  # once more after the last token, with the same length
        return False

    @property
    def prompt(self) -> int:
        return min(self.lengths, default=0)

    @property
    def sampled(self) -> int:
        return len(self.lengths)


class Piece(NamedTuple):
    """A piece of a streamed completion: its text, its finish reason on the last piece, the chunk
    of llama-cpp-python's it came in, and whether a client's stop sequence ended it."""

    text: str
    finish_reason: str | None
    chunk: dict[str, Any]
    at_stop_sequence: bool = False


def stream_completion(backend: LlamaCppBackend, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """llama-cpp-python's ``text_completion`` chunks as the model makes them, then a usage chunk
    with the counts a call without streaming reports when the client asked for one (llama-cpp-python
    sends none). The client's stop sequences are applied here (:func:`cut_at_stops`): a stream that
    llama-cpp-python cut at one would end as one ended by the end-of-generation token, which is no
    completion token while the token that holds a stop sequence is one."""
    check_real_models_allowed(f"{backend.name} (pass-through)")
    kwargs = {k: body[k] for k in COMPLETION_FIELDS if k != "stop" and body.get(k) is not None}
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else [str(s) for s in stop or () if s]
    counted = SampledTokens()
    base: dict[str, Any] = {}
    completion_tokens = 0
    with backend._lock:
        # a generator: the model runs (and a prompt too long for it fails) as it is read
        stream = backend.llm.create_completion(**kwargs, stream=True, stopping_criteria=counted)
        try:
            for piece in cut_at_stops(stream, stops):
                base = {k: piece.chunk[k] for k in ("id", "object", "created") if k in piece.chunk}
                base["model"] = body.get("model", backend.name)
                choice = {"index": 0, "text": piece.text, "logprobs": None}
                yield {**base, "choices": [{**choice, "finish_reason": piece.finish_reason}]}
                if piece.finish_reason is not None:
                    # the end-of-generation token was sampled and is no part of the completion
                    eog = piece.finish_reason == "stop" and not piece.at_stop_sequence
                    completion_tokens = counted.sampled - eog
        except ValueError as exc:  # a prompt longer than the context window
            raise BackendError(f"{backend.name}: {exc}") from exc
        finally:
            stream.close()  # cut at a stop sequence or left by the client: the model is let go here
    if base and (body.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": usage(counted.prompt, max(0, completion_tokens))}


def cut_at_stops(chunks: Iterable[dict[str, Any]], stops: list[str]) -> Iterator[Piece]:
    """The pieces of a stream generated without stop sequences, as a call with ``stops`` would
    stream them: text that may begin a stop sequence is held back until the next piece says
    whether it does, and the stream ends (``stop``) before the first of ``stops`` (in their order)
    that the text holds, where llama-cpp-python cuts a call without streaming."""
    held = ""
    for chunk in chunks:
        choice = chunk["choices"][0]
        text = held + str(choice.get("text") or "")
        found = [text.index(s) for s in stops if s in text]
        if found:
            if found[0]:
                yield Piece(text[: found[0]], None, chunk)
            yield Piece("", "stop", chunk, at_stop_sequence=True)
            return
        if choice.get("finish_reason"):
            if text:
                yield Piece(text, None, chunk)
            yield Piece("", str(choice["finish_reason"]), chunk)
            return
        keep = max((i for s in stops for i in range(1, len(s)) if text.endswith(s[:i])), default=0)
        held = text[len(text) - keep :]
        if text[: len(text) - keep]:
            yield Piece(text[: len(text) - keep], None, chunk)


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
