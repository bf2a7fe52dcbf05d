"""Any OpenAI-compatible ``/v1/chat/completions`` server as a backend (vLLM, SGLang, llama.cpp, Ollama).

The wire format is shared; what differs between servers is kept in a :class:`ServerProfile`
(how structured output is requested, whether usage is reported in a stream) instead of ``if``
chains. Requests stream so that time-to-first-token can be reported as the prefill time; for a
remote server it also includes network and queueing time.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from minicache.errors import BackendError, BackendResponseError, BackendTimeout, BackendUnavailable
from minicache.models.base import Completion, GenerationOptions, Message, check_real_models_allowed


@dataclass(frozen=True)
class ServerProfile:
    """What one server family expects on top of the common OpenAI chat format."""

    name: str
    structured_output: Callable[[dict[str, Any]], dict[str, Any]]
    stream_usage: bool = True  # accepts stream_options.include_usage
    extra_body: tuple[tuple[str, Any], ...] = ()


def _json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "minicache_output", "schema": schema},
        }
    }


def _json_object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"response_format": {"type": "json_object", "schema": schema}}


def _ollama_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"format": schema}


PROFILES: dict[str, ServerProfile] = {
    p.name: p
    for p in (
        ServerProfile("openai", _json_schema_format),
        ServerProfile("vllm", _json_schema_format),
        ServerProfile("sglang", _json_schema_format),
        ServerProfile("llama-server", _json_schema_format),  # llama.cpp's C++ server
        # llama-cpp-python 0.3.36's server rejects json_schema and ignores stream_options.
        ServerProfile("llama-cpp-python", _json_object_schema, stream_usage=False),
        ServerProfile("ollama", _ollama_format),
    )
}

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """Chat completions over HTTP with timeouts, retries with exponential backoff and clear errors."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        profile: str = "openai",
        timeout_s: float = 120.0,
        connect_timeout_s: float = 5.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        transport: httpx.BaseTransport | None = None,
        name: str | None = None,
    ) -> None:
        if profile not in PROFILES:
            raise BackendError(
                f"unknown server profile {profile!r}; choose one of {', '.join(sorted(PROFILES))}"
            )
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.model = model
        self.profile = PROFILES[profile]
        self.retries = retries
        self.backoff_s = backoff_s
        self.name = name or f"{profile}:{model}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
        )

    def _body(self, messages: list[Message], opts: GenerationOptions) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.as_dict() for m in messages],
            "max_tokens": opts.max_tokens,
            "temperature": opts.temperature,
            "stream": True,
        }
        if opts.stop:
            body["stop"] = list(opts.stop)
        if opts.seed is not None:
            body["seed"] = opts.seed
        if self.profile.stream_usage:
            body["stream_options"] = {"include_usage": True}
        if opts.json_schema is not None:
            body.update(self.profile.structured_output(opts.json_schema))
        body.update(dict(self.profile.extra_body))
        return body

    def complete(
        self, messages: list[Message], options: GenerationOptions | None = None
    ) -> Completion:
        check_real_models_allowed(f"OpenAIBackend({self.base_url})")
        opts = options or GenerationOptions()
        body = self._body(messages, opts)
        url = f"{self.base_url}/chat/completions"
        last: BackendError | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)) * (1 + random.random() * 0.1))
            try:
                return self._stream(url, body, opts.on_text)
            except BackendTimeout:
                raise
            except BackendUnavailable as exc:
                last = exc
            except BackendResponseError as exc:
                if exc.status not in RETRY_STATUS:
                    raise
                last = exc
        assert last is not None
        raise type(last)(
            f"{last} (gave up after {self.retries + 1} attempts)",
            **({"status": last.status} if isinstance(last, BackendResponseError) else {}),
        )

    def _events(self, url: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The server's stream events for ``body``, as they arrive."""
        with self._errors(url), self._client.stream("POST", url, json=body) as response:
            _raise_for_status(url, response)
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    event = json.loads(data)
                except json.JSONDecodeError as exc:
                    raise BackendResponseError(
                        f"{url} sent a malformed stream event: {data[:200]!r}"
                    ) from exc
                if "error" in event:
                    raise BackendResponseError(
                        f"{url} reported an error mid-stream: {event['error']}"
                    )
                yield event

    @contextmanager
    def _errors(self, url: str) -> Iterator[None]:
        """httpx's failures as the backend errors the cache tells apart."""
        try:
            yield
        except httpx.TimeoutException as exc:
            raise BackendTimeout(
                f"{url} did not answer within the timeout ({exc.__class__.__name__})"
            ) from exc
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise BackendUnavailable(f"cannot reach {url}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise BackendError(f"request to {url} failed: {exc}") from exc

    def _stream(
        self, url: str, body: dict[str, Any], on_text: Callable[[str], None] | None = None
    ) -> Completion:
        began = time.perf_counter()
        first: float | None = None
        parts: list[str] = []
        chunks = 0
        usage: dict[str, Any] = {}
        finish = "stop"
        for event in self._events(url, body):
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    if first is None:
                        first = time.perf_counter()
                    parts.append(piece)
                    chunks += 1
                    if on_text is not None:
                        on_text(piece)
                finish = choice.get("finish_reason") or finish
        end = time.perf_counter()
        first = first or end
        return Completion(
            text="".join(parts),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", chunks)),
            prefill_s=first - began,
            decode_s=end - first,
            finish_reason=finish,
            model=self.model,
        )

    # -- pass-through (minicache.models.forwarding.Forwarding): one attempt, as a direct call ------
    def forward_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._post("/chat/completions", {**body, "stream": False})

    def stream_chat(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        check_real_models_allowed(f"OpenAIBackend({self.base_url})")
        yield from self._events(f"{self.base_url}/chat/completions", {**body, "stream": True})

    def forward_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._post("/completions", {**body, "stream": False})

    # -- minicache.models.forwarding.CompletionStreaming: the target's text_completion chunks -----
    def stream_completion(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        check_real_models_allowed(f"OpenAIBackend({self.base_url})")
        yield from self._events(f"{self.base_url}/completions", {**body, "stream": True})

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        check_real_models_allowed(f"OpenAIBackend({self.base_url})")
        url = self.base_url + path
        with self._errors(url):
            response = self._client.post(url, json=body)
        _raise_for_status(url, response)
        try:
            data = response.json()
        except ValueError as exc:
            raise BackendResponseError(
                f"{url} answered with no JSON: {response.text[:200]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise BackendResponseError(f"{url} answered {type(data).__name__}, not an object")
        return data

    def close(self) -> None:
        self._client.close()


def _raise_for_status(url: str, response: httpx.Response) -> None:
    if response.status_code >= 400:
        response.read()
        raise BackendResponseError(
            f"{url} answered HTTP {response.status_code}: {_error_text(response)}",
            status=response.status_code,
        )


def _error_text(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict):
        return str(err.get("message") or err.get("detail") or err)[:300]
    return str(err)[:300]
