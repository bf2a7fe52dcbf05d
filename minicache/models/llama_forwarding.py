"""Pass-through on the in-process llama.cpp model: the client's OpenAI body handed to llama-cpp-python's
``create_chat_completion`` (messages, tools, response_format, sampling) or ``create_completion`` (a
``/v1/completions`` prompt, streamed too), and streamed generation for a miss that shows its tokens
as they come.

What the model is asked is the client's request itself, under the same compute lock as every other
call, so a forwarded request costs what a direct call to the model costs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol

from minicache.errors import BackendError
from minicache.models.base import check_real_models_allowed
from minicache.models.forwarding import content_text, usage, wants_usage
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
    """llama-cpp-python's chunks as the model makes them, then a usage chunk when the client asked
    for one (llama-cpp-python sends none), with the counts a call without streaming reports
    (:func:`counted_chat`)."""
    check_real_models_allowed(f"{backend.name} (pass-through)")
    last: dict[str, Any] = {}
    with backend._lock, model_errors(backend):
        chunks, hooked = counted_chat(backend.llm, chat_kwargs(body))
        try:
            for chunk in chunks:
                last = {**chunk, "model": body.get("model", backend.name)}
                yield last
        finally:
            hooked.close()
    if last and hooked.stream is not None and wants_usage(body):
        yield {**last, "choices": [], "usage": hooked.usage}


def counted_chat(llm: Any, kwargs: dict[str, Any]) -> tuple[Iterator[dict[str, Any]], HookedLlama]:
    """The model's own streamed ``create_chat_completion`` with ``kwargs``, its chat handler handed
    the model with a hooked ``create_completion`` (:class:`HookedLlama`): the chat-templated
    prompt's completion streams through a :class:`CountedStream`, so the hooked model's ``usage``
    is the prompt as the template renders it and the tokens sampled, cut at the caller's stop
    sequences and the chat template's there. Close the hooked model to let the model go."""
    hooked = HookedLlama(llm)
    return type(llm).create_chat_completion(hooked, **kwargs, stream=True), hooked


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
    """A stopping criterion that stops where ``then`` does (a chat template's own criterion), or
    never: llama-cpp-python calls it once for each token it samples, with the tokens before that
    one, so the shortest of them is the prompt as the model read it and their number the tokens
    sampled (a streamed chunk is not a token: a character split over tokens comes in one chunk).
    Once generation has finished it is called once more, with the tokens evaluated: as many as
    were sampled before the last one, or more where a draft model evaluated ahead of it."""

    def __init__(self, then: Callable[[Any, Any], bool] | None = None) -> None:
        self.lengths: list[int] = []  # of each call's tokens, in the order of the calls
        self.then = then

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        self.lengths.append(len(input_ids))
        return bool(self.then(input_ids, logits)) if self.then is not None else False

    @property
    def prompt(self) -> int:
        return min(self.lengths, default=0)

    @property
    def sampled(self) -> int:
        """The tokens sampled while generation is under way (each call has one token more than the
        one before), or once it finished without a draft model (the last call repeats a length)."""
        return len(set(self.lengths))

    @property
    def sampled_when_finished(self) -> int:
        """The tokens sampled once generation has finished, with or without a draft model: every
        call but the last."""
        return max(0, len(self.lengths) - 1)


class Piece(NamedTuple):
    """A piece of a streamed completion: its text, its finish reason on the last piece, the chunk
    of llama-cpp-python's it came in, and whether a client's stop sequence ended it."""

    text: str
    finish_reason: str | None
    chunk: dict[str, Any]
    at_stop_sequence: bool = False


class CountedStream:
    """One streamed ``create_completion`` of llama-cpp-python's (blocking, under the model's lock)
    whose ``usage`` is the one a call without streaming reports. Its stop sequences are applied
    here (:func:`cut_at_stops`), not by llama-cpp-python: a stream cut there would end as one ended
    by the end-of-generation token, which is no completion token, while the token that holds a stop
    sequence is one; its tokens are counted as they are sampled (:class:`SampledTokens`)."""

    def __init__(self, llm: Any, kwargs: dict[str, Any]) -> None:
        stop = kwargs.get("stop")
        self.stops = [stop] if isinstance(stop, str) else [str(s) for s in stop or () if s]
        self.counted = SampledTokens(then=kwargs.get("stopping_criteria"))
        self.completion_tokens = 0
        args = {k: v for k, v in kwargs.items() if k not in ("stop", "stopping_criteria", "stream")}
        # a generator: the model runs (and a prompt too long for it fails) as it is read
        self._stream = llm.create_completion(**args, stream=True, stopping_criteria=self.counted)
        self._chunks = self._cut()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._chunks

    def _cut(self) -> Generator[dict[str, Any], None, None]:
        """llama-cpp-python's ``text_completion`` chunks as a call with the stop sequences streams
        them, each piece's log probabilities kept where it is its chunk's text as it came."""
        for piece in cut_at_stops(self._stream, self.stops):
            came = piece.chunk["choices"][0]
            logprobs = came.get("logprobs") if piece.text == came.get("text") else None
            choice = {"index": 0, "text": piece.text, "logprobs": logprobs}
            if piece.finish_reason is not None:
                if piece.at_stop_sequence:  # cut here: generation is under way, or ended with
                    self.completion_tokens = self.counted.sampled  # held text (no draft model)
                else:
                    # the end-of-generation token (or the one a chat template's stopping
                    # criterion stopped at) was sampled and is no part of the completion
                    eog = piece.finish_reason == "stop"
                    self.completion_tokens = max(0, self.counted.sampled_when_finished - eog)
            yield {**piece.chunk, "choices": [{**choice, "finish_reason": piece.finish_reason}]}

    @property
    def usage(self) -> dict[str, int]:
        return usage(self.counted.prompt, self.completion_tokens)

    def close(self) -> None:
        """Let the model go (cut at a stop sequence, or left by the client)."""
        self._chunks.close()
        self._stream.close()


class HookedLlama:
    """The model as llama-cpp-python's chat handler is given it (``create_chat_completion`` hands
    it ``self``): the model itself, except that its streamed completion is a
    :class:`CountedStream`, kept as ``stream`` for its usage (the chat template's stop sequences
    and stopping criterion come to it with the client's; a handler that streams more than one
    completion is counted by its last)."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm
        self.stream: CountedStream | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def create_completion(self, **kwargs: Any) -> Any:
        if not kwargs.get("stream"):
            return self._llm.create_completion(**kwargs)
        self.stream = CountedStream(self._llm, kwargs)
        return iter(self.stream)

    @property
    def usage(self) -> dict[str, int]:
        """Its streamed completion's (nothing counted where it streamed none)."""
        return self.stream.usage if self.stream is not None else usage(0, 0)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


@contextmanager
def model_errors(backend: LlamaCppBackend) -> Iterator[None]:
    """A prompt longer than the model's context window (llama-cpp-python's ``ValueError``) as the
    backend's error."""
    try:
        yield
    except ValueError as exc:
        raise BackendError(f"{backend.name}: {exc}") from exc


def stream_completion(backend: LlamaCppBackend, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """llama-cpp-python's ``text_completion`` chunks as the model makes them (a
    :class:`CountedStream`), then a usage chunk with the counts a call without streaming reports
    when the client asked for one (llama-cpp-python sends none)."""
    check_real_models_allowed(f"{backend.name} (pass-through)")
    kwargs = {k: body[k] for k in COMPLETION_FIELDS if body.get(k) is not None}
    last: dict[str, Any] = {}
    with backend._lock, model_errors(backend):
        stream = CountedStream(backend.llm, kwargs)
        try:
            for chunk in stream:
                last = {**chunk, "model": body.get("model", backend.name)}
                yield last
        finally:
            stream.close()
    if last and wants_usage(body):
        yield {**last, "choices": [], "usage": stream.usage}


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


def streamed(llm: Any, kwargs: dict[str, Any], on_text: Callable[[str], None]) -> dict[str, Any]:
    """The model's ``create_chat_completion`` with ``kwargs``, streamed (:func:`counted_chat`),
    each piece given to ``on_text`` as it is made, as the whole response a call without streaming
    returns: its text, finish reason and usage (the tokens sampled, not the pieces)."""
    chunks, hooked = counted_chat(llm, kwargs)
    parts: list[str] = []
    finish = "stop"
    try:
        for chunk in chunks:
            for choice in chunk["choices"]:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    parts.append(piece)
                    on_text(piece)
                finish = choice.get("finish_reason") or finish
    finally:
        hooked.close()
    return {
        "choices": [{"message": {"content": "".join(parts)}, "finish_reason": finish}],
        "usage": hooked.usage,
    }
