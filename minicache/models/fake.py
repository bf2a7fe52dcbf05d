"""A scripted model for tests: a Python function (or a list of replies) plays the model.

Like pydantic-ai's ``FunctionModel``: logic tests get deterministic, inspectable "model" output and
never touch weights or the network. Every call is recorded in :attr:`FakeBackend.calls`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from minicache.errors import BackendError
from minicache.models.base import Completion, GenerationOptions, Message

Reply = str | dict[str, Any] | Exception
ReplyFunction = Callable[[list[Message], GenerationOptions], Reply]


@dataclass
class FakeCall:
    messages: list[Message]
    options: GenerationOptions


class FakeBackend:
    """``FakeBackend(fn)`` answers each call with ``fn(messages, options)``;
    ``FakeBackend.scripted([...])`` answers with the given replies in order.

    A reply may be a string, a dict (serialized as JSON, for schema-constrained calls) or an
    exception instance (raised, to test error paths). Token counts are whitespace word counts.
    """

    def __init__(self, fn: ReplyFunction, name: str = "fake") -> None:
        self.fn = fn
        self.name = name
        self.calls: list[FakeCall] = []
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
        return Completion(
            text=text,
            prompt_tokens=prompt_words,
            completion_tokens=len(text.split()),
            model=self.name,
        )

    def close(self) -> None:
        pass
