"""The wire formats: request bodies in (OpenAI chat, native solve), chat.completion objects and SSE out.

A chat request's last user message is the question; the contents of the messages before it (system
messages often carry a table or a document) are the context. Cache controls may come from the body's
``minicache`` object, its ``metadata`` (``minicache_group``, ``minicache_no_cache``, ...) or the
``X-MiniCache-*`` headers, in that order of precedence.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..engine import SolveResult
from .errors import ApiError

FLAGS = ("no_cache", "no_store", "force_refresh")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


@dataclass(frozen=True)
class CacheControls:
    group: str | None = None
    no_cache: bool = False
    no_store: bool = False
    force_refresh: bool = False
    mode: str = "auto"  # auto | program | step (StepCache for structured outputs)

    def kwargs(self) -> dict[str, Any]:
        return {"group": self.group, "no_cache": self.no_cache, "no_store": self.no_store,
                "force_refresh": self.force_refresh, "mode": self.mode}


@dataclass(frozen=True)
class ChatRequest:
    question: str
    context: str | None
    model: str
    stream: bool
    include_usage: bool
    controls: CacheControls


def parse_json(raw: bytes) -> Any:
    if not raw.strip():
        raise ApiError(400, "The request body is empty; expected JSON.", code="invalid_json")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc}", code="invalid_json") from None


def _flag(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ApiError(400, f"{where} must be a boolean, not {value!r}"[:300], code="invalid_type", param=where)


def _mode(value: Any, where: str) -> str:
    if isinstance(value, str) and value.strip().lower() in ("auto", "program", "step"):
        return value.strip().lower()
    raise ApiError(400, f"{where} must be auto, program or step, not {value!r}"[:300], code="invalid_value", param=where)


def _group(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ApiError(400, f"{where} must be a non-empty string of at most 200 characters",
                       code="invalid_type", param=where)
    return value


def cache_controls(body: Mapping[str, Any], headers: Mapping[str, str], *, top_level: bool = False) -> CacheControls:
    """Controls from (highest first) the ``minicache`` object, ``metadata``, top-level fields (native
    API only) and ``X-MiniCache-*`` headers."""
    found: dict[str, Any] = {}

    def take(name: str, value: Any, where: str) -> None:
        if name in found or value is None:
            return
        found[name] = (_group(value, where) if name == "group" else _mode(value, where) if name == "mode"
                       else _flag(value, where))

    block = body.get("minicache")
    if block is not None:
        if not isinstance(block, dict):
            raise ApiError(400, "minicache must be an object", code="invalid_type", param="minicache")
        unknown = set(block) - {"group", "mode", *FLAGS}
        if unknown:
            raise ApiError(400, f"unknown minicache option(s): {', '.join(sorted(map(str, unknown)))}",
                           code="invalid_request", param="minicache")
        for name in ("group", "mode", *FLAGS):
            take(name, block.get(name), f"minicache.{name}")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise ApiError(400, "metadata must be an object", code="invalid_type", param="metadata")
        for name in ("group", "mode", *FLAGS):
            take(name, metadata.get(f"minicache_{name}"), f"metadata.minicache_{name}")
    if top_level:
        for name in ("group", "mode", *FLAGS):
            take(name, body.get(name), name)
    for name in ("group", "mode", *FLAGS):
        header = "x-minicache-" + name.replace("_", "-")
        if header in headers:
            take(name, headers[header], header)
    return CacheControls(**found)


def _content(message: dict[str, Any], i: int) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise ApiError(400, f"messages[{i}].content: only text parts are supported",
                               code="unsupported_content", param=f"messages[{i}].content")
        return "\n".join(parts)
    raise ApiError(400, f"messages[{i}].content must be a string or a list of text parts",
                   code="invalid_type", param=f"messages[{i}].content")


def parse_chat(body: Any, headers: Mapping[str, str], default_model: str) -> ChatRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_request")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", code="invalid_type", param="messages")
    texts: list[str] = []
    question_at = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(400, f"messages[{i}] must be an object with a role", code="invalid_type",
                           param=f"messages[{i}]")
        if message["role"] not in ROLES:
            raise ApiError(400, f"messages[{i}].role {message['role']!r} is not a chat role"[:200],
                           code="invalid_request", param=f"messages[{i}].role")
        texts.append(_content(message, i))
        if message["role"] == "user":
            question_at = i
    if question_at is None:
        raise ApiError(400, "messages must contain a user message (the question)", code="missing_user_message",
                       param="messages")
    context = "\n\n".join(t for t in texts[:question_at] if t.strip()) or None
    model = body.get("model", default_model)
    if not isinstance(model, str):
        raise ApiError(400, "model must be a string", code="invalid_type", param="model")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be a boolean", code="invalid_type", param="stream")
    n = body.get("n")
    if n is not None and n != 1:
        raise ApiError(400, "only n=1 is supported", code="unsupported_parameter", param="n")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object", code="invalid_type", param="stream_options")
    include_usage = _flag(options.get("include_usage", False), "stream_options.include_usage")
    return ChatRequest(question=texts[question_at], context=context, model=model or default_model, stream=stream,
                       include_usage=include_usage, controls=cache_controls(body, headers))


@dataclass(frozen=True)
class SolveRequest:
    question: Any
    context: Any
    controls: CacheControls


def parse_solve(body: Any, headers: Mapping[str, str]) -> SolveRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_request")
    unknown = set(body) - {"question", "context", "group", "minicache", "metadata", *FLAGS}
    if unknown:
        raise ApiError(400, f"unknown field(s): {', '.join(sorted(unknown))}"[:300], code="invalid_request")
    if "question" not in body:
        raise ApiError(400, "question is required", code="invalid_request", param="question")
    return SolveRequest(body["question"], body.get("context"), cache_controls(body, headers, top_level=True))


# -- responses ------------------------------------------------------------------------------------


def minicache_info(result: SolveResult) -> dict[str, Any]:
    return {"route": result.route, "group": result.group, "entry_id": result.entry_id,
            "timings": result.timings, "tokens": result.tokens, "variables": result.variables,
            "similarity": result.similarity, "extraction": result.extraction,
            "fallback_reason": result.fallback_reason,
            **({"steps": result.steps, "verified": result.verified, "solver_fallback": result.solver_fallback,
                "reused_from": result.reused_from} if result.route.startswith("step-") else {})}


def usage(result: SolveResult) -> dict[str, int]:
    """Model tokens this answer cost upstream (target + small; 0 for a rule-extracted hit). The engine
    reports them as totals per model, so they are all counted as prompt tokens."""
    spent = int(result.tokens.get("target", 0)) + int(result.tokens.get("small", 0))
    return {"prompt_tokens": spent, "completion_tokens": 0, "total_tokens": spent}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def chat_completion(result: SolveResult, model: str) -> dict[str, Any]:
    return {
        "id": completion_id(), "object": "chat.completion", "created": int(time.time()), "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer_text},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": usage(result),
        "minicache": minicache_info(result),
    }


def sse(data: Any) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False, allow_nan=False)}\n\n"


def chat_chunks(result: SolveResult, model: str, include_usage: bool = False, piece_chars: int = 64) -> Iterator[str]:
    """The answer as SSE events: role, content deltas, an empty delta with finish_reason "stop" (which
    carries the ``minicache`` object), the usage chunk if asked for, then ``[DONE]``."""
    base = {"id": completion_id(), "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "system_fingerprint": None}
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                    **extra, **more})

    yield chunk({"role": "assistant", "content": ""})
    text = result.answer_text
    for start in range(0, len(text), piece_chars):
        yield chunk({"content": text[start:start + piece_chars]})
    yield chunk({}, "stop", minicache=minicache_info(result))
    if include_usage:
        yield sse({**base, "choices": [], "usage": usage(result)})
    yield "data: [DONE]\n\n"
