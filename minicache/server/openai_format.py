"""Responses in OpenAI's formats: ``chat.completion`` objects, and ``chat.completion.chunk`` SSE events.

(Requests are :mod:`.protocol`'s models; streams that are sent while the engine works are put
together in :mod:`.streaming`.) For an answer that is complete before its first event is sent (a
hit), the events that could fail to render (those with the ``minicache`` object) are rendered
first, and the content is then sent piece by piece as the client reads.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

from starlette.responses import JSONResponse

from minicache.engine import SolveResult


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(data: Any) -> str:
    """Strict JSON for any response: non-finite numbers (a NaN that reached the store) become null,
    and a lone surrogate in stored text is escaped, so reading back what was stored never fails."""
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        text = json.dumps(_finite(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(_finite(data), ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text


class SafeJSONResponse(JSONResponse):
    """The app's JSON responses, rendered by :func:`dumps`."""

    def render(self, content: Any) -> bytes:
        return dumps(content).encode("utf-8")


# -- responses ------------------------------------------------------------------------------------


def minicache_info(result: SolveResult) -> dict[str, Any]:
    return {
        "route": result.route,
        "group": result.group,
        "entry_id": result.entry_id,
        "timings": result.timings,
        "tokens": result.tokens,
        "variables": result.variables,
        "similarity": result.similarity,
        "extraction": result.extraction,
        "pinned": result.pinned,
        "fallback_reason": result.fallback_reason,
        **(
            {
                "steps": result.steps,
                "verified": result.verified,
                "solver_fallback": result.solver_fallback,
                "reused_from": result.reused_from,
            }
            if result.route.startswith("step-")
            else {}
        ),
    }


def usage(result: SolveResult) -> dict[str, Any]:
    """The target call that served this answer, as a client is billed for it: its prompt and
    completion tokens (0 and 0 for a hit), with the prompt tokens it did not have to compute again
    as OpenAI's ``cached_tokens``. The small model's tokens are in the ``minicache`` object. An
    answer whose target tokens the engine counts only as a total reports them as prompt tokens."""
    tokens = result.tokens
    prompt = int(tokens.get("target_prompt", tokens.get("target", 0)))
    completion = int(tokens.get("target_completion", 0))
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if tokens.get("target_cached"):
        out["prompt_tokens_details"] = {"cached_tokens": int(tokens["target_cached"])}
    return out


def route_headers(route: str, group: str | None = None, entry: str | None = None) -> dict[str, str]:
    """``X-MiniCache-Route``, ``-Group`` and ``-Entry``: how the answer was made, for proxies and
    logs that never read bodies (a header is left out when there is no such thing)."""
    headers = {"X-MiniCache-Route": str(route)}
    if group:
        headers["X-MiniCache-Group"] = group
    if entry:
        headers["X-MiniCache-Entry"] = entry
    return headers


def result_headers(result: SolveResult) -> dict[str, str]:
    return route_headers(result.route, result.group, result.entry_id)


def passthrough_info(reason: str, group: str | None, tokens: dict[str, int]) -> dict[str, Any]:
    """The ``minicache`` object of a forwarded answer: why, and what the engine spent first (a
    failed program's target call)."""
    return {"route": "passthrough", "reason": reason, "group": group, "tokens": tokens}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def chat_completion(result: SolveResult, model: str) -> dict[str, Any]:
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.answer_text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage(result),
        "minicache": minicache_info(result),
    }


def sse(data: Any) -> str:
    return f"data: {dumps(data)}\n\n"


DONE = "data: [DONE]\n\n"


class Chunks:
    """The ``chat.completion.chunk`` events of one streamed answer (one id, one model)."""

    def __init__(self, model: str, include_usage: bool) -> None:
        self.include_usage = include_usage
        self.base = {
            "id": completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        return sse(
            {
                **self.base,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
                **({"usage": None} if self.include_usage else {}),
                **more,
            }
        )

    def head(self) -> str:
        return self.chunk({"role": "assistant", "content": ""})

    def tail(self, result: SolveResult) -> list[str]:
        """An empty delta with finish_reason "stop" that carries the ``minicache`` object, the
        usage chunk if asked for, then ``[DONE]``."""
        out = [self.chunk({}, "stop", minicache=minicache_info(result))]
        if self.include_usage:
            out.append(sse({**self.base, "choices": [], "usage": usage(result)}))
        return out + [DONE]


def chat_chunks(
    result: SolveResult, model: str, include_usage: bool = False, piece_chars: int = 64
) -> Iterator[str]:
    """A complete answer as SSE events: role, content deltas, then :meth:`Chunks.tail`."""
    chunks = Chunks(model, include_usage)
    head, tail = chunks.head(), chunks.tail(result)
    chunk = chunks.chunk

    def events() -> Iterator[str]:
        yield head
        text = result.answer_text
        for start in range(0, len(text), piece_chars):
            yield chunk({"content": text[start : start + piece_chars]})
        yield from tail

    return events()
