"""The backends' pass-through seam (minicache.models.forwarding): the client's body to the target as
it came (model name replaced, MiniCache's own fields removed), the target's own answer back, one
call; and a miss's text given to ``on_text`` as it is generated."""

from __future__ import annotations

import json

import httpx
import pytest

from minicache import BackendResponseError, OpenAIBackend
from minicache.models import FakeBackend, GenerationOptions, user
from minicache.models.base import Completion, Message
from minicache.models.forwarding import (
    forward_chat,
    forward_completion,
    stream_chat,
    target_body,
)
from minicache.models.llama_forwarding import chat_kwargs

pytestmark = pytest.mark.allow_model_requests

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
BODY = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Hi there!"}],
    "tools": TOOLS,
    "minicache": {"no_store": True},
    "metadata": {"minicache_group": "g", "app": "demo"},
}


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_the_target_gets_the_clients_body_with_its_model_name_and_no_minicache_fields():
    assert target_body(BODY, "qwen") == {
        "model": "qwen",
        "messages": BODY["messages"],
        "tools": TOOLS,
        "metadata": {"app": "demo"},
    }


def test_openai_backend_posts_the_body_once_and_returns_the_targets_json():
    sent: list[dict] = []
    answer = {"id": "x", "object": "chat.completion", "choices": [{"message": {"tool_calls": []}}]}

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append({"url": str(request.url), **json.loads(request.content)})
        return httpx.Response(200, json=answer)

    backend = OpenAIBackend("http://t.test", "qwen", transport=httpx.MockTransport(handler))
    assert forward_chat(backend, BODY) == answer
    assert len(sent) == 1 and sent[0]["url"] == "http://t.test/v1/chat/completions"
    assert sent[0]["model"] == "qwen" and sent[0]["tools"] == TOOLS and not sent[0]["stream"]
    assert "minicache" not in sent[0]
    forward_completion(backend, {"model": "m", "prompt": "Once"})
    assert sent[-1]["url"] == "http://t.test/v1/completions" and sent[-1]["prompt"] == "Once"


def test_openai_backend_streams_the_targets_chunks_and_passes_its_refusals_on():
    events = [
        chunk({"role": "assistant"}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk({}, "stop"),
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if calls[-1]["messages"][0]["content"] == "refuse":
            return httpx.Response(400, json={"error": {"message": "bad tools"}})
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    backend = OpenAIBackend("http://t.test", "qwen", transport=httpx.MockTransport(handler))
    assert list(stream_chat(backend, BODY)) == events
    assert calls[0]["stream"] is True
    with pytest.raises(BackendResponseError) as info:
        forward_chat(backend, {"messages": [{"role": "user", "content": "refuse"}]})
    assert info.value.status == 400 and "bad tools" in str(info.value)
    assert len(calls) == 2  # a refusal is not retried


def test_openai_backend_gives_a_misss_pieces_to_on_text_as_they_arrive():
    events = [chunk({"content": p}) for p in ("```python\n", "def solve():", " return 1\n```")]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    backend = OpenAIBackend(
        "http://t.test",
        "qwen",
        transport=httpx.MockTransport(
            lambda r: httpx.Response(
                200, content=body, headers={"content-type": "text/event-stream"}
            )
        ),
    )
    seen: list[str] = []
    out = backend.complete([user("q")], GenerationOptions(on_text=seen.append))
    assert seen == ["```python\n", "def solve():", " return 1\n```"] and out.text == "".join(seen)


def test_fake_backend_answers_forwarded_requests_and_counts_them():
    fake = FakeBackend(lambda m, o: "x", forward=lambda body: {"tool_calls": [{"id": "1"}]})
    out = forward_chat(fake, BODY)
    assert out["choices"][0]["finish_reason"] == "tool_calls" and fake.calls == []
    assert fake.forwarded == [target_body(BODY, "fake")]
    chunks = list(stream_chat(fake, {**BODY, "stream_options": {"include_usage": True}}))
    assert chunks[-1]["usage"] and chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    seen: list[str] = []
    FakeBackend(lambda m, o: "a b c").complete([user("q")], GenerationOptions(on_text=seen.append))
    assert seen == ["a ", "b ", "c"]


def test_a_backend_with_only_complete_is_forwarded_through_it():
    class Plain:
        name = "plain"

        def __init__(self) -> None:
            self.seen: list[list[Message]] = []

        def complete(self, messages, options=None):
            self.seen.append(messages)
            return Completion("Bonjour !", prompt_tokens=5, completion_tokens=2, model="plain")

        def close(self) -> None:
            pass

    plain = Plain()
    out = forward_chat(
        plain,
        {
            "messages": [
                {"role": "developer", "content": "Be nice."},
                {"role": "user", "content": "Hello in French?"},
            ]
        },
    )
    assert out["choices"][0]["message"]["content"] == "Bonjour !"
    assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    assert [m.role for m in plain.seen[0]] == ["system", "user"]


def test_llama_cpp_gets_the_fields_it_reads_with_text_content_and_a_schema_grammar():
    kwargs = chat_kwargs(
        {
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "max_completion_tokens": 8,
            "user": "u1",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"schema": {"type": "object"}},
            },
        }
    )
    assert kwargs["messages"] == [{"role": "user", "content": "Hi"}]
    assert kwargs["max_tokens"] == 8 and "user" not in kwargs and "model" not in kwargs
    assert kwargs["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
