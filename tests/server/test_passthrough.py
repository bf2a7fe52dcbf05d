"""Pass-through, with fake models: what the cache cannot serve as a computation is forwarded to the
target as the client's own request (one target call, no error counted), with the target's own
answer; usage, the ``X-MiniCache-*`` headers, ``Cache-Control: no-store`` and ``x-should-retry``."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    GREETING,
    TOOLS,
    WEATHER_CALL,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
)
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.models.fake import pieces
from minicache.server import ServerConfig, create_app
from minicache.store import SQLiteStore


@pytest.fixture
def make(tmp_path, sandbox):
    made = []

    def factory(mode: str = "ok") -> tuple[TestClient, MiniCache, FakeTarget]:
        target = FakeTarget(mode)
        target.forward = lambda body: WEATHER_CALL_REPLY if body.get("tools") else GREETING
        mc = MiniCache(
            target,
            FakeSmall(),
            store=SQLiteStore(tmp_path / f"mc{len(made)}.db"),
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(
                background_builds=False,
                audit_rate=0.0,
                verify=VerifyConfig(probation=0),
                build_early=0,
            ),
        )
        client = TestClient(create_app(mc, ServerConfig(rate_per_s=0)))
        made.append((client, mc))
        return client, mc, target

    yield factory
    for client, mc in made:
        client.close()
        mc.close()


WEATHER_CALL_REPLY = {"tool_calls": [WEATHER_CALL]}


def ask(content: str | list, **extra) -> dict:
    return {"model": "gpt-test", "messages": [{"role": "user", "content": content}], **extra}


def counters(mc: MiniCache) -> dict:
    stats = mc.stats()
    return {k: stats[k] for k in ("requests", "passthroughs", "errors", "misses", "hits")}


def test_a_greeting_gets_the_targets_own_words_in_one_call_and_no_error(make):
    client, mc, target = make()
    r = client.post("/v1/chat/completions", json=ask("Hi there!"))
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["choices"][0]["message"]["content"] == GREETING
    assert data["minicache"]["route"] == "passthrough"
    assert "no numbers" in data["minicache"]["reason"]
    assert r.headers["X-MiniCache-Route"] == "passthrough"
    assert len(target.forwarded) == 1 and target.calls == []  # one call, no program written
    assert target.forwarded[0]["model"] == "fake-target"
    assert counters(mc) == {"requests": 1, "passthroughs": 1, "errors": 0, "misses": 0, "hits": 0}
    # the target's own usage: its prompt and its answer's words
    assert data["usage"]["prompt_tokens"] == 2 and data["usage"]["completion_tokens"] == 7


def test_a_tool_call_passes_through_with_the_clients_body(make):
    client, mc, target = make()
    body = ask(CURRENT_RATIO.ask(*CR_VALUES[0]), tools=TOOLS, tool_choice="auto")
    body["minicache"] = {"no_cache": False}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [WEATHER_CALL]
    sent = target.forwarded[0]
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto" and "minicache" not in sent
    assert target.calls == [] and mc.stats()["errors"] == 0


@pytest.mark.parametrize(
    "extra,content,reason",
    [
        ({"response_format": {"type": "json_object"}}, None, "response_format"),
        ({"n": 2}, None, "n > 1"),
        ({"logprobs": True}, None, "logprobs"),
        (
            {},
            [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
            "non-text",
        ),
    ],
    ids=["response_format", "n", "logprobs", "image"],
)
def test_what_asks_for_more_than_a_computed_answer_passes_through(make, extra, content, reason):
    client, mc, target = make()
    question = CURRENT_RATIO.ask(*CR_VALUES[0])
    if content is not None:
        content = [{"type": "text", "text": question}, *content]
    r = client.post("/v1/chat/completions", json=ask(content or question, **extra))
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == GREETING
    assert reason in r.json()["minicache"]["reason"]
    assert len(target.forwarded) == 1 and target.calls == []


def test_a_continued_conversation_passes_through(make):
    client, _, target = make()
    messages = [
        {"role": "user", "content": CURRENT_RATIO.ask(*CR_VALUES[0])},
        {"role": "assistant", "content": "1.5"},
        {"role": "user", "content": "And with 10 more in assets?"},
    ]
    r = client.post("/v1/chat/completions", json={"messages": messages})
    assert r.json()["minicache"]["reason"] == "the request continues a conversation"
    assert target.forwarded[0]["messages"] == messages


def test_a_program_that_fails_on_a_computation_is_answered_by_the_target_not_502(make):
    client, mc, target = make("broken")
    r = client.post("/v1/chat/completions", json=ask(CURRENT_RATIO.ask(*CR_VALUES[0])))
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["choices"][0]["message"]["content"] == GREETING
    assert data["minicache"]["reason"].startswith("the target's program failed")
    assert data["minicache"]["tokens"]["target"] > 0  # the failed program's call, told apart
    assert data["minicache"]["group"] and r.headers["X-MiniCache-Group"]
    assert len(target.calls) == 1 and len(target.forwarded) == 1
    assert counters(mc) == {"requests": 1, "passthroughs": 1, "errors": 0, "misses": 0, "hits": 0}
    assert mc.store.examples("default", data["minicache"]["group"]) == []  # nothing learned


def test_a_group_marked_uncacheable_passes_through_without_a_program(make):
    client, mc, target = make()
    question = CURRENT_RATIO.ask(*CR_VALUES[0])
    group = mc.store.ensure_group("default", "label:cr", label="cr")
    group.status = "uncacheable"
    mc.store.update_group(group)
    r = client.post("/v1/chat/completions", json=ask(question, minicache={"group": "cr"}))
    assert r.json()["minicache"]["reason"] == "its group is marked uncacheable"
    assert target.calls == [] and len(target.forwarded) == 1


def test_a_hit_carries_the_three_headers_and_usage_is_the_target_calls(make):
    client, mc, target = make()
    for values in CR_VALUES[:3]:
        r = client.post("/v1/chat/completions", json=ask(CURRENT_RATIO.ask(*values)))
        call = target.calls[-1]
        usage = r.json()["usage"]
        assert usage["prompt_tokens"] == sum(len(m.content.split()) for m in call.messages)
        reply = target.fn(call.messages, call.options)
        assert usage["completion_tokens"] == len(str(reply).split())
        assert usage["total_tokens"] == r.json()["minicache"]["tokens"]["target"]
        assert r.headers["X-MiniCache-Route"] == "miss" and "X-MiniCache-Entry" not in r.headers
    r = client.post("/v1/chat/completions", json=ask(CURRENT_RATIO.ask(*CR_VALUES[3])))
    data = r.json()
    assert data["minicache"]["route"] == "hit"
    assert r.headers["X-MiniCache-Route"] == "hit"
    assert r.headers["X-MiniCache-Group"] == data["minicache"]["group"]
    assert r.headers["X-MiniCache-Entry"] == data["minicache"]["entry_id"]
    assert data["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_cache_control_no_store_records_nothing(make):
    client, mc, _ = make()
    before = mc.store.counters("default")
    r = client.post(
        "/v1/chat/completions",
        json=ask(CURRENT_RATIO.ask(*CR_VALUES[0])),
        headers={"Cache-Control": "no-store"},
    )
    assert r.json()["minicache"]["route"] == "miss"
    client.post("/v1/chat/completions", json=ask("Hi!"), headers={"Cache-Control": "no-store"})
    assert mc.store.counters("default") == before


def test_answers_a_retry_cannot_change_say_so(make):
    client, _, _ = make("broken")
    r = client.post("/v1/solve", json={"question": CURRENT_RATIO.ask(*CR_VALUES[0])})
    assert r.status_code == 502 and r.headers["x-should-retry"] == "false"
    r = client.post("/v1/chat/completions", json=ask("   "))
    assert r.status_code == 400 and r.headers["x-should-retry"] == "false"
    client, _, _ = make("raise")  # a target that is down may answer the next time
    r = client.post("/v1/solve", json={"question": CURRENT_RATIO.ask(*CR_VALUES[0])})
    assert r.status_code == 502 and "x-should-retry" not in r.headers


def test_a_target_that_fails_a_forwarded_request_is_a_502_and_one_error(make):
    from minicache.errors import BackendUnavailable

    client, mc, target = make()
    target.forward = lambda body: BackendUnavailable("down")
    r = client.post("/v1/chat/completions", json=ask("Hi there!"))
    assert r.status_code == 502 and r.json()["error"]["code"] == "target_failed"
    assert counters(mc)["errors"] == 1 and counters(mc)["passthroughs"] == 0


def test_text_completions_are_forwarded(make):
    client, _, target = make()
    r = client.post("/v1/completions", json={"model": "m", "prompt": "Once upon a time"})
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["object"] == "text_completion" and data["choices"][0]["text"] == GREETING
    assert target.forwarded[0]["prompt"] == "Once upon a time"


def test_a_streamed_text_completion_from_a_target_that_cannot_stream_one_is_its_whole_answer(
    make, monkeypatch
):
    # a target that forwards a completion and cannot stream one: a protocol's method set to None
    monkeypatch.setattr(FakeTarget, "stream_completion", None)
    client, mc, target = make()
    body = {"prompt": "Once upon a time", "stream": True, "stream_options": {"include_usage": True}}
    r = client.post("/v1/completions", json={"model": "m", **body})
    assert r.status_code == 200 and r.headers["X-MiniCache-Route"] == "passthrough"
    events = sse(r.text)
    assert events[-1] == "[DONE]"
    text, usage = events[0], events[1]
    assert text["object"] == "text_completion" and text["choices"][0]["text"] == GREETING
    assert (
        text["choices"][0]["finish_reason"] == "stop"
        and text["minicache"]["route"] == "passthrough"
    )
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == len(GREETING.split())
    assert len(events) == 3
    # asked for its whole answer: no stream options a target refuses on a request it does not stream
    assert "stream" not in target.forwarded[0] and "stream_options" not in target.forwarded[0]
    assert counters(mc)["passthroughs"] == 1 and counters(mc)["errors"] == 0


def test_a_streamed_text_completion_is_the_targets_chunks_word_by_word(make):
    client, mc, target = make()
    body = {"prompt": "Once upon a time", "stream": True, "stream_options": {"include_usage": True}}
    r = client.post("/v1/completions", json={"model": "m", **body})
    assert r.status_code == 200 and r.headers["X-MiniCache-Route"] == "passthrough"
    events = sse(r.text)
    assert events[-1] == "[DONE]"
    texts = [e["choices"][0]["text"] for e in events[:-1] if e["choices"]]
    assert texts == [*pieces(GREETING), ""] and "".join(texts) == GREETING  # then the finish
    assert events[-2]["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11}
    finals = [e for e in events[:-1] if e["choices"] and e["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["minicache"]["route"] == "passthrough"
    assert target.forwarded[0]["stream"] is True
    assert counters(mc)["passthroughs"] == 1 and counters(mc)["errors"] == 0


def sse(text: str) -> list:
    return [
        block[6:] if block[6:] == "[DONE]" else json.loads(block[6:])
        for block in text.strip().split("\n\n")
    ]


def test_a_streamed_pass_through_is_the_targets_chunks(make):
    client, _, target = make()
    r = client.post(
        "/v1/chat/completions",
        json=ask("Hi there!", stream=True, stream_options={"include_usage": True}),
    )
    assert r.status_code == 200 and r.headers["X-MiniCache-Route"] == "passthrough"
    events = sse(r.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == GREETING and len(chunks) > 4  # word by word, as the target sent them
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["minicache"]["route"] == "passthrough"
    assert chunks[-1]["usage"]["completion_tokens"] == 7


def test_a_streamed_miss_whose_program_fails_goes_on_with_the_targets_answer(make):
    client, mc, target = make("broken")
    r = client.post("/v1/chat/completions", json=ask(CURRENT_RATIO.ask(*CR_VALUES[0]), stream=True))
    assert r.status_code == 200
    chunks = sse(r.text)[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text.startswith("```python") and text.endswith("\n\n" + GREETING)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[-1]["minicache"]["route"] == "passthrough"
    assert counters(mc)["passthroughs"] == 1 and counters(mc)["errors"] == 0


@pytest.mark.real_model
def test_with_the_embedded_models_chats_are_answered_by_the_target_in_its_own_words(
    tmp_path, sandbox, target_model, small_model
):
    from minicache.models.forwarding import forward_chat

    mc = MiniCache(
        target_model,
        small_model,
        store=SQLiteStore(tmp_path / "real.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    with TestClient(create_app(mc, ServerConfig(rate_per_s=0))) as client:
        for prompt in (
            "Write a haiku about autumn leaves.",
            "Hi there!",
            "Translate into French: good morning, my friend.",
        ):
            body = ask(prompt, max_tokens=16, temperature=0)
            target_model.forget_request()
            r = client.post("/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            text = r.json()["choices"][0]["message"]["content"]
            assert r.json()["minicache"]["route"] == "passthrough" and text.strip()
            target_model.forget_request()
            assert text == forward_chat(target_model, body)["choices"][0]["message"]["content"]
    mc.close()


def test_a_program_that_answers_in_words_passes_through(make):
    client, mc, target = make()
    target.fn = lambda messages, options: (
        "```python\ndef solve():\n    return {'fr': 'La bibliothèque ouvre à neuf heures.'}\n```"
    )
    question = "Translate into French: The library opens at 9 in the morning."
    r = client.post("/v1/chat/completions", json=ask(question))
    data = r.json()
    assert data["choices"][0]["message"]["content"] == GREETING
    assert "returned text" in data["minicache"]["reason"]
    assert counters(mc) == {"requests": 1, "passthroughs": 1, "errors": 0, "misses": 0, "hits": 0}
    assert mc.store.examples("default", data["minicache"]["group"]) == []
