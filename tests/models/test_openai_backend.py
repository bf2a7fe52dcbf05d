"""OpenAIBackend: wire format per server profile, retries, and clear errors (loopback only)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from minicache import BackendResponseError, BackendTimeout, BackendUnavailable, OpenAIBackend
from minicache.errors import BackendError
from minicache.models import GenerationOptions, user

pytestmark = pytest.mark.allow_model_requests

SCHEMA = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}


def _sse(*pieces: str, usage: dict | None = None) -> bytes:
    events = [
        {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage:
        events.append({"choices": [], "usage": usage})
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


class Recorder:
    def __init__(self, responses):
        self.responses = list(responses)
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        status, content = self.responses.pop(0)
        return httpx.Response(
            status, content=content, headers={"content-type": "text/event-stream"}
        )


def _backend(recorder, profile="openai", **kw):
    return OpenAIBackend(
        "http://model.test",
        "m",
        profile=profile,
        transport=httpx.MockTransport(recorder),
        backoff_s=0.01,
        **kw,
    )


def test_streamed_text_and_usage_are_returned():
    rec = Recorder(
        [(200, _sse('{"x"', ": 4}", usage={"prompt_tokens": 12, "completion_tokens": 3}))]
    )
    out = _backend(rec).complete([user("hi")], GenerationOptions(json_schema=SCHEMA))
    assert out.text == '{"x": 4}'
    assert (out.prompt_tokens, out.completion_tokens) == (12, 3)
    assert out.prefill_s >= 0 and out.decode_s >= 0
    assert rec.bodies[0]["stream"] is True


JSON_SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "minicache_output", "schema": SCHEMA},
}


@pytest.mark.parametrize(
    "profile,key,expected",
    [
        ("vllm", "response_format", JSON_SCHEMA_FORMAT),
        ("openai", "response_format", JSON_SCHEMA_FORMAT),
        ("llama-cpp-python", "response_format", {"type": "json_object", "schema": SCHEMA}),
        ("ollama", "format", SCHEMA),
    ],
)
def test_each_profile_asks_for_structured_output_in_its_own_dialect(profile, key, expected):
    rec = Recorder([(200, _sse("{}"))])
    _backend(rec, profile=profile).complete([user("hi")], GenerationOptions(json_schema=SCHEMA))
    assert rec.bodies[0][key] == expected


def test_llama_cpp_python_profile_counts_chunks_when_no_usage_is_sent():
    rec = Recorder([(200, _sse("a", "b", "c"))])
    out = _backend(rec, profile="llama-cpp-python").complete([user("hi")])
    assert out.completion_tokens == 3
    assert "stream_options" not in rec.bodies[0]


def test_server_errors_are_retried_then_succeed():
    rec = Recorder([(503, b'{"error": {"message": "busy"}}'), (200, _sse("ok"))])
    assert _backend(rec, retries=2).complete([user("hi")]).text == "ok"
    assert len(rec.bodies) == 2


def test_client_errors_are_not_retried_and_quote_the_server():
    rec = Recorder([(400, b'{"error": {"message": "bad schema"}}'), (200, _sse("never"))])
    with pytest.raises(BackendResponseError, match="HTTP 400: bad schema") as info:
        _backend(rec, retries=3).complete([user("hi")])
    assert info.value.status == 400 and len(rec.bodies) == 1


def test_persistent_server_errors_give_up_after_the_retries():
    rec = Recorder([(500, b"oops")] * 3)
    with pytest.raises(BackendResponseError, match="gave up after 3 attempts"):
        _backend(rec, retries=2).complete([user("hi")])


def test_an_unknown_profile_is_a_clear_error():
    with pytest.raises(BackendError, match="unknown server profile 'tgi'"):
        OpenAIBackend("http://x", "m", profile="tgi")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_is_reported_as_unavailable():
    backend = OpenAIBackend(f"http://127.0.0.1:{_free_port()}", "m", retries=1, backoff_s=0.01)
    with pytest.raises(BackendUnavailable, match="cannot reach"):
        backend.complete([user("hi")])


def test_a_server_that_does_not_answer_in_time_is_a_timeout():
    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            time.sleep(2)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend(
            f"http://127.0.0.1:{server.server_port}", "m", timeout_s=0.3, retries=0
        )
        with pytest.raises(BackendTimeout, match="did not answer within"):
            backend.complete([user("hi")])
    finally:
        server.shutdown()
