"""Responses in OpenAI's formats: ``chat.completion`` objects, and ``chat.completion.chunk`` SSE events.

(Requests are :mod:`.protocol`'s models.) A streamed answer is complete before its first event is
sent; the events that could fail to render (those with the ``minicache`` object) are rendered first,
and the content is then sent piece by piece as the client reads, never held in memory as a whole.
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


def usage(result: SolveResult) -> dict[str, int]:
    """Model tokens this answer cost upstream (target + small; 0 for a rule-extracted hit). The engine
    reports them as totals per model, so they are all counted as prompt tokens."""
    spent = int(result.tokens.get("target", 0)) + int(result.tokens.get("small", 0))
    return {"prompt_tokens": spent, "completion_tokens": 0, "total_tokens": spent}


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


def chat_chunks(
    result: SolveResult, model: str, include_usage: bool = False, piece_chars: int = 64
) -> Iterator[str]:
    """The answer as SSE events: role, content deltas, an empty delta with finish_reason "stop" (which
    carries the ``minicache`` object), the usage chunk if asked for, then ``[DONE]``."""
    base = {
        "id": completion_id(),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        return sse(
            {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
                **extra,
                **more,
            }
        )

    head = chunk({"role": "assistant", "content": ""})
    tail = [chunk({}, "stop", minicache=minicache_info(result))]
    if include_usage:
        tail.append(sse({**base, "choices": [], "usage": usage(result)}))
    tail.append("data: [DONE]\n\n")

    def events() -> Iterator[str]:
        yield head
        text = result.answer_text
        for start in range(0, len(text), piece_chars):
            yield chunk({"content": text[start : start + piece_chars]})
        yield from tail

    return events()
