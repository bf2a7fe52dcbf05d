"""A scripted model for tests: a Python function (or a list of replies) plays the model.

Like pydantic-ai's ``FunctionModel``: logic tests get deterministic, inspectable "model" output and
never touch weights or the network. Every call is recorded in :attr:`FakeBackend.calls`.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from minicache.errors import BackendError
from minicache.models.base import Completion, GenerationOptions, Message
from minicache.models.forwarding import (
    chat_chunks,
    chat_response,
    completion_chunks,
    completion_response,
    content_text,
    wants_usage,
)

Reply = str | dict[str, Any] | Exception
ReplyFunction = Callable[[list[Message], GenerationOptions], Reply]
# A forwarded request's answer: its text, a message (``{"tool_calls": [...]}``) or an exception.
ForwardFunction = Callable[[dict[str, Any]], Reply]


def pieces(text: str) -> list[str]:
    """Text as a model streams it: word by word, each with the space after it."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _words(body: dict[str, Any]) -> int:
    texts = [content_text(m.get("content")) for m in body.get("messages") or []]
    return sum(len(t.split()) for t in texts) + len(str(body.get("prompt") or "").split())


@dataclass
class FakeCall:
    messages: list[Message]
    options: GenerationOptions


class FakeBackend:
    """``FakeBackend(fn)`` answers each call with ``fn(messages, options)``;
    ``FakeBackend.scripted([...])`` answers with the given replies in order.

    A reply may be a string, a dict (serialized as JSON, for schema-constrained calls) or an
    exception instance (raised, to test error paths). Token counts are whitespace word counts.
    A forwarded request (pass-through) is answered by ``forward(body)`` and recorded in
    :attr:`forwarded`; by default the fake says it is a fake and repeats the last message.
    """

    def __init__(
        self, fn: ReplyFunction, name: str = "fake", forward: ForwardFunction | None = None
    ) -> None:
        self.fn = fn
        self.name = name
        self.forward = forward or _echo
        self.calls: list[FakeCall] = []
        self.forwarded: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @classmethod
    def scripted(cls, replies: Iterable[Reply], name: str = "fake") -> FakeBackend:
        queue = list(replies)

        def next_reply(messages: list[Message], options: GenerationOptions) -> Reply:
            if not queue:
                raise BackendError(f"{name}: scripted replies exhausted")
            return queue.pop(0)

        return cls(next_reply, name=name)

    def complete(
        self, messages: list[Message], options: GenerationOptions | None = None
    ) -> Completion:
        opts = options or GenerationOptions()
        with self._lock:
            self.calls.append(FakeCall(list(messages), opts))
        reply = self.fn(list(messages), opts)
        if isinstance(reply, Exception):
            raise reply
        text = json.dumps(reply) if isinstance(reply, dict) else str(reply)
        prompt_words = sum(len(m.content.split()) for m in messages)
        if opts.on_text is not None:
            for piece in pieces(text):
                opts.on_text(piece)
        return Completion(
            text=text,
            prompt_tokens=prompt_words,
            completion_tokens=len(text.split()),
            model=self.name,
        )

    # -- pass-through (minicache.models.forwarding.Forwarding) ------------------------------------
    def _forwarded(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.forwarded.append(body)
        reply = self.forward(body)
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, dict) else {"content": str(reply)}

    def forward_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        message = self._forwarded(body)
        used = len(str(message.get("content") or "").split()) + len(message.get("tool_calls") or [])
        return chat_response(message, self.name, _words(body), used)

    def stream_chat(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        message = self._forwarded(body)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        tools = message.get("tool_calls") or []
        calls = {"tool_calls": [{"index": i, **c} for i, c in enumerate(tools)]} if tools else None
        text = str(message.get("content") or "")
        yield from chat_chunks(pieces(text), self.name, _words(body), include_usage, calls)

    def forward_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        text = str(self._forwarded(body).get("content") or "")
        return completion_response(text, self.name, _words(body), len(text.split()))

    def stream_completion(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The forwarded answer's text word by word (:func:`pieces`), then the finish, then the
        usage if asked for (a word is a token)."""
        text = str(self._forwarded(body).get("content") or "")
        yield from completion_chunks(pieces(text), self.name, _words(body), wants_usage(body))

    def close(self) -> None:
        pass


def _echo(body: dict[str, Any]) -> str:
    messages = body.get("messages") or [{"content": body.get("prompt")}]
    return f"(fake target) You said: {content_text(messages[-1].get('content'))}"
