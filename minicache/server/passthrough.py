"""Which chat requests the cache leaves to the target, decided per request before the engine runs.

The cache serves computations: a question with numbers (or a context to read them from), answered
by a program. Anything else, a greeting, a translation, a tool call, a structured output, several
sampled choices, a continued conversation, is forwarded to the target as the client wrote it
(:func:`minicache.models.forwarding.forward_chat`), and the client gets the target's own answer.
The engine adds the cases it finds on the way (a group marked uncacheable, a failing program: see
:func:`minicache.answers.passed_through`). Each forwarded request records why, in its ``minicache``
object.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from enum import StrEnum
from typing import Any, TypeVar

from starlette.responses import Response, StreamingResponse

from minicache.answers import Route, SolveResult
from minicache.errors import InvalidRequest
from minicache.models.forwarding import (
    forward_chat,
    forward_completion,
    stream_chat,
    stream_completion,
)
from minicache.request import validate_request
from minicache.server.errors import ApiError
from minicache.server.openai_format import (
    Chunks,
    SafeJSONResponse,
    passthrough_info,
    route_headers,
)
from minicache.server.protocol import CacheControls, ChatCompletionRequest
from minicache.server.serving import ServerState, blocking, forward_error
from minicache.server.streaming import Feed, forwarded_chunks
from minicache.stepcache import step_request_of

T = TypeVar("T")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Reason(StrEnum):
    """Why the server forwarded a request without asking the engine."""

    TOOLS = "the request offers tools"
    RESPONSE_FORMAT = "the request asks for a response_format"
    CHOICES = "the request asks for n > 1 choices"
    LOGPROBS = "the request asks for logprobs"
    CONTENT = "the request has non-text content"
    CONVERSATION = "the request continues a conversation"
    NO_NUMBERS = "the request has no numbers to compute with"


_DIGIT = re.compile(r"\d")


def has_numbers(text: str) -> bool:
    """A digit: something a program could compute with. Number words are not enough ("the
    library opens at nine" is no computation): a request with none is forwarded at once, as a
    direct call costs, instead of after a program that answers in words."""
    return bool(_DIGIT.search(text))


def request_reason(body: ChatCompletionRequest, controls: CacheControls) -> Reason | None:
    """Why this request is not a computation for the cache, or None when the engine should try."""
    if body.tools or body.functions or body.tool_choice not in (None, "none"):
        return Reason.TOOLS
    if body.response_format and body.response_format.get("type") not in (None, "text"):
        return Reason.RESPONSE_FORMAT
    if body.n is not None and body.n > 1:
        return Reason.CHOICES
    if body.logprobs:
        return Reason.LOGPROBS
    if any(m.has_other_parts() for m in body.messages):
        return Reason.CONTENT
    last_user = max(i for i, m in enumerate(body.messages) if m.role == "user")
    if any(m.role in ("assistant", "tool", "function") for m in body.messages[:last_user]):
        return Reason.CONVERSATION
    if controls.group is None and controls.mode in (None, "auto"):
        # a client that names a group or a mode asks for the cache on purpose
        question, context = body.question_and_context()
        if not has_numbers(f"{question}\n{context or ''}") and not _step_request(question, context):
            return Reason.NO_NUMBERS
    return None


def check_question(
    server: ServerState,
    tenant: str,
    question: str,
    context: str | None,
    controls: CacheControls,
) -> None:
    """A 400 for a question the engine would refuse (empty, a NUL, too long), though it is
    forwarded: what was invalid before pass-through stays invalid."""
    config = server.engine.config
    try:
        validate_request(
            question,
            context,
            controls.group,
            tenant,
            "auto",
            max_question_chars=config.max_question_chars,
            max_context_chars=config.max_context_chars,
        )
    except InvalidRequest as exc:
        raise ApiError(400, str(exc), code="invalid_request") from None


def _step_request(question: str, context: str | None) -> bool:
    """A request StepCache serves (a JSON object with typed keys may hold no number)."""
    return step_request_of(question.strip(), context, "auto") is not None


def error_event(exc: Exception) -> dict[str, Any]:
    """A failure after a stream began, as the body an error response would have had."""
    return forward_error(exc).body()


class Forwarded:
    """One forwarded request: the client's body to the target, the target's answer back with the
    ``minicache`` object (why, and what the engine spent first) and the route headers.

    ``spent`` is the engine's ``passthrough`` result (or one made here for a request the engine
    never saw): its reason, group and the tokens of a failed program's call."""

    def __init__(
        self,
        server: ServerState,
        tenant: str,
        raw: dict[str, Any],
        no_store: bool,
        spent: SolveResult,
    ) -> None:
        self.server, self.tenant, self.raw, self.no_store, self.spent = (
            server,
            tenant,
            raw,
            no_store,
            spent,
        )
        self.reason = spent.passthrough_reason or "forwarded"
        self.headers = route_headers(Route.PASSTHROUGH, spent.group or None)

    def info(self) -> dict[str, Any]:
        return passthrough_info(self.reason, self.spent.group or None, self.spent.tokens)

    def _forward(self, endpoint: str, call: Callable[[], T]) -> T:
        return self.server.forward(
            endpoint,
            self.tenant,
            call,
            reason=self.reason,
            no_store=self.no_store,
            spent=self.spent,
        )

    async def answer(self, endpoint: str = "chat") -> dict[str, Any]:
        """The target's whole answer (``endpoint`` "chat" or "completion"), or its failure as an
        :class:`ApiError` (see :func:`forward_error`)."""
        target = self.server.engine.target
        forward = forward_chat if endpoint == "chat" else forward_completion
        try:
            data = await blocking(self._forward, endpoint, lambda: forward(target, self.raw))
        except Exception as exc:  # noqa: BLE001 - the client gets what the target's failure means
            raise forward_error(exc) from None
        return {**data, "minicache": self.info()}

    def chunks(self, endpoint: str = "chat") -> Feed[dict[str, Any], None]:
        """The target's chunks (``endpoint`` "chat" or "completion"), forwarded from a worker
        thread as they come."""
        target = self.server.engine.target
        stream = stream_chat if endpoint == "chat" else stream_completion

        def drain(emit: Callable[[dict[str, Any]], None]) -> None:
            for chunk in stream(target, self.raw):
                emit(chunk)

        return Feed(lambda emit: blocking(self._forward, endpoint, lambda: drain(emit)))

    def continue_into(self, into: Chunks | None) -> AsyncIterator[str]:
        """The target's chunks as SSE events (into a stream already begun, if ``into``)."""
        return forwarded_chunks(self.chunks(), self.info, error_event, into)

    async def response(self, endpoint: str = "chat") -> Response:
        """The target's answer (``endpoint`` "chat" or "completion"), streamed when the client
        asked: the status line and the route headers once its first chunk is there."""
        if not self.raw.get("stream"):
            return SafeJSONResponse(await self.answer(endpoint), headers=self.headers)
        feed = self.chunks(endpoint)
        try:
            feed.unread(await feed.next())  # a failure before the first chunk is still a status
        except Exception as exc:  # noqa: BLE001 - as in answer()
            raise forward_error(exc) from None
        return StreamingResponse(
            forwarded_chunks(feed, self.info, error_event),
            media_type="text/event-stream",
            headers={**SSE_HEADERS, **self.headers},
        )
