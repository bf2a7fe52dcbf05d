"""Real clients against a real uvicorn server with fake models: the official ``openai`` client (sync,
async, streaming, retries) and LangChain's ``ChatOpenAI``. A calculation hits, a chat, a tool call
and a ``response_format`` pass through in the target's own words, and a streamed miss shows its
first token before its program runs. Streamed answers carry the ``X-MiniCache-*`` headers known when
the stream starts, and a streamed ``/v1/completions`` is the target's tokens as it generates them."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import openai
import pytest

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    GREETING,
    TOOLS,
    WEATHER_CALL,
    FakeOpenAIServer,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
)
from minicache import OpenAIBackend
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.models.fake import pieces
from minicache.models.forwarding import usage
from minicache.server import ServerConfig, create_app
from minicache.server.testing import BackgroundServer
from minicache.store import SQLiteStore


def target_reply(body: dict) -> str | dict:
    if body.get("tools"):
        return {"tool_calls": [WEATHER_CALL]}
    if body.get("response_format"):
        return '{"city": "Paris", "temperature": 21}'
    return GREETING


class GatedTarget(FakeTarget):
    """A target whose miss, once its text is out, waits for the test before its program runs."""

    def __init__(self, mode: str = "ok") -> None:
        super().__init__(mode)
        self.release = threading.Event()
        self.released_at = 0.0

    def complete(self, messages, options=None):
        out = super().complete(messages, options)
        if options is not None and options.on_text is not None:
            self.release.wait(10)
            self.released_at = time.perf_counter()
        return out


class CompletionStreamingTarget(FakeTarget):
    """A target that streams text completions word by word (``stream_completion``), and holds its
    last word until the test has seen the first."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.last_generated_at = 0.0

    def stream_completion(self, body):
        self.forwarded.append(body)
        words = pieces(GREETING)
        base = {"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": self.name}

        def chunk(text: str, finish: str | None = None) -> dict:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            return {**base, "choices": [choice]}

        for i, word in enumerate(words):
            if i == len(words) - 1:
                self.release.wait(10)
                self.last_generated_at = time.perf_counter()
            yield chunk(word)
        yield chunk("", "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**base, "choices": [], "usage": usage(len(body["prompt"].split()), len(words))}


@pytest.fixture
def serve(tmp_path, sandbox):
    """Factory: a live server over a MiniCache on fakes; yields (server url, engine, target)."""
    made = []

    def factory(target: FakeTarget | None = None):
        target = target or FakeTarget()
        target.forward = target_reply
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
        server = BackgroundServer(create_app(mc, ServerConfig(rate_per_s=0))).start()
        made.append((server, mc))
        return f"{server.url}/v1", mc, target

    yield factory
    for server, mc in made:
        server.stop()
        mc.close()


def client(url: str, **kwargs) -> openai.OpenAI:
    http = httpx.Client(trust_env=False, timeout=30)
    return openai.OpenAI(base_url=url, api_key="sk-test", http_client=http, **kwargs)


def ask(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


def test_openai_client_a_calculation_hits_and_a_chat_passes_through(serve):
    url, mc, target = serve()
    routes = []
    for values in CR_VALUES[:4]:
        raw = client(url).chat.completions.with_raw_response.create(
            model="m", messages=ask(CURRENT_RATIO.ask(*values))
        )
        completion = raw.parse()
        assert float(completion.choices[0].message.content) == pytest.approx(
            CURRENT_RATIO.answer(*values)
        )
        routes.append(raw.headers["x-minicache-route"])
    assert routes == ["miss", "miss", "miss", "hit"]
    assert raw.headers["x-minicache-group"] and raw.headers["x-minicache-entry"]
    misses = len(target.calls)
    chat = client(url).chat.completions.create(model="m", messages=ask("Hi there!"))
    assert chat.choices[0].message.content == GREETING
    assert chat.model_extra["minicache"]["route"] == "passthrough"
    assert len(target.calls) == misses and len(target.forwarded) == 1
    stats = mc.stats()
    assert (stats["errors"], stats["passthroughs"], stats["hits"]) == (0, 1, 1)


def test_openai_client_tool_calls_and_response_format_pass_through(serve):
    url, mc, target = serve()
    question = "What is the weather in Paris, in degrees?"
    completion = client(url).chat.completions.create(model="m", messages=ask(question), tools=TOOLS)
    call = completion.choices[0].message.tool_calls[0]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and call.function.arguments == '{"city": "Paris"}'
    structured = client(url).chat.completions.create(
        model="m",
        messages=ask(CURRENT_RATIO.ask(*CR_VALUES[0])),
        response_format={"type": "json_object"},
    )
    assert structured.choices[0].message.content == '{"city": "Paris", "temperature": 21}'
    assert len(target.forwarded) == 2 and target.calls == [] and mc.stats()["errors"] == 0


def test_openai_client_a_failing_program_is_answered_by_the_target_and_502s_are_not_retried(
    serve,
):
    url, mc, target = serve(FakeTarget("broken"))
    completion = client(url, max_retries=2).chat.completions.create(
        model="m", messages=ask(CURRENT_RATIO.ask(*CR_VALUES[0]))
    )
    assert completion.choices[0].message.content == GREETING
    assert len(target.calls) == 1 and len(target.forwarded) == 1
    # the native endpoint still fails; its 502 says a retry cannot help, and the client believes it
    with pytest.raises(openai.APIStatusError) as info:
        client(url, max_retries=2).post(
            "/solve", body={"question": CURRENT_RATIO.ask(*CR_VALUES[1])}, cast_to=object
        )
    assert info.value.status_code == 502 and len(target.calls) == 2  # one call, not three
    assert mc.stats()["errors"] == 1


def test_async_openai_client(serve):
    url, _, target = serve()

    async def run() -> list[str]:
        async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
            aclient = openai.AsyncOpenAI(base_url=url, api_key="sk-test", http_client=http)
            answers = await asyncio.gather(
                *(
                    aclient.chat.completions.create(model="m", messages=ask(q))
                    for q in (CURRENT_RATIO.ask(*CR_VALUES[0]), "Hi there!")
                )
            )
            return [a.choices[0].message.content for a in answers]

    assert asyncio.run(run()) == ["1.5", GREETING]


def test_a_streamed_miss_shows_its_first_token_before_its_program_runs(serve):
    url, _, target = serve(GatedTarget())
    stream = client(url).chat.completions.create(
        model="m", messages=ask(CURRENT_RATIO.ask(*CR_VALUES[0])), stream=True
    )
    pieces = []
    first_at = None
    for chunk in stream:
        content = chunk.choices[0].delta.content if chunk.choices else None
        if content:
            if first_at is None:
                first_at = time.perf_counter()
                target.release.set()  # only now may the target return and its program run
            pieces.append(content)
    assert first_at is not None and first_at < target.released_at
    assert "".join(pieces).startswith("Here is the program.")
    assert "".join(pieces).endswith("\n\n1.5")
    assert chunk.model_extra["minicache"]["route"] == "miss"


def test_a_streamed_pass_through_with_the_openai_client(serve):
    url, _, _ = serve()
    stream = client(url).chat.completions.create(
        model="m",
        messages=ask("Hi there!"),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == GREETING
    assert chunks[-1].usage.completion_tokens == 7


def test_langchain_chat_openai(serve):
    langchain_openai = pytest.importorskip("langchain_openai")
    url, mc, target = serve()
    llm = langchain_openai.ChatOpenAI(
        model="m",
        base_url=url,
        api_key="sk-test",
        max_retries=0,
        http_client=httpx.Client(trust_env=False, timeout=30),
    )
    answers = [llm.invoke(CURRENT_RATIO.ask(*values)).content for values in CR_VALUES[:4]]
    assert [float(a) for a in answers] == pytest.approx(
        [CURRENT_RATIO.answer(*v) for v in CR_VALUES[:4]]
    )
    assert mc.stats()["hits"] == 1
    assert llm.invoke("Hi there!").content == GREETING
    message = llm.bind_tools(TOOLS).invoke("What is the weather in Paris?")
    assert message.tool_calls[0]["name"] == "get_weather"
    assert message.tool_calls[0]["args"] == {"city": "Paris"}
    streamed = "".join(str(part.content) for part in llm.stream("Hi there!"))
    assert streamed == GREETING
    assert mc.stats()["errors"] == 0 and mc.stats()["passthroughs"] == 3


def test_a_streamed_miss_and_hit_carry_the_route_headers_known_when_they_start(serve):
    url, mc, _ = serve()
    routes = []
    for values in CR_VALUES[:4]:
        raw = client(url).chat.completions.with_raw_response.create(
            model="m", messages=ask(CURRENT_RATIO.ask(*values)), stream=True
        )
        last = list(raw.parse())[-1]
        routes.append((raw.headers["x-minicache-route"], last.model_extra["minicache"]["route"]))
        if last.model_extra["minicache"]["route"] == "miss":
            assert "x-minicache-entry" not in raw.headers  # a miss has no entry, as unstreamed
    assert routes == [("miss", "miss")] * 3 + [("hit", "hit")]
    info = last.model_extra["minicache"]
    assert raw.headers["x-minicache-group"] == info["group"]
    assert raw.headers["x-minicache-entry"] == info["entry_id"]
    assert mc.stats()["hits"] == 1


def test_a_streamed_miss_names_its_group_in_its_headers_before_its_program_runs(serve):
    url, _, target = serve(GatedTarget())
    raw = client(url).chat.completions.with_raw_response.create(
        model="m", messages=ask(CURRENT_RATIO.ask(*CR_VALUES[0])), stream=True
    )
    assert not target.release.is_set()  # the headers came while the target still held its program
    group = raw.headers["x-minicache-group"]
    target.release.set()
    last = list(raw.parse())[-1]
    assert raw.headers["x-minicache-route"] == "miss"
    assert last.model_extra["minicache"]["route"] == "miss"
    assert group == last.model_extra["minicache"]["group"]
    assert "x-minicache-entry" not in raw.headers


def test_a_streamed_fallback_says_fallback_and_its_group_in_its_headers(serve):
    url, mc, _ = serve()
    for values in CR_VALUES[:3]:  # three misses build the group's entry
        client(url).chat.completions.create(model="m", messages=ask(CURRENT_RATIO.ask(*values)))
    # assets were 9,000 to 120,000: a hit on 64 is refused, and the target answers it
    raw = client(url).chat.completions.with_raw_response.create(
        model="m", messages=ask(CURRENT_RATIO.ask(64, 16)), stream=True
    )
    last = list(raw.parse())[-1]
    assert raw.headers["x-minicache-route"] == "fallback"
    info = last.model_extra["minicache"]
    assert info["route"] == "fallback" and info["fallback_reason"].startswith("HitRefused")
    assert raw.headers["x-minicache-group"] == info["group"]
    assert mc.stats()["fallbacks"] == 1


def test_a_streamed_miss_whose_program_fails_ends_as_a_pass_through_in_its_last_chunk(serve):
    url, mc, target = serve(FakeTarget(mode="broken"))
    raw = client(url).chat.completions.with_raw_response.create(
        model="m", messages=ask(CURRENT_RATIO.ask(*CR_VALUES[0])), stream=True
    )
    chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.endswith(GREETING)  # the target's own answer followed its failed program
    info = chunks[-1].model_extra["minicache"]
    assert raw.headers["x-minicache-route"] == "miss"  # what was known when the stream began
    assert info["route"] == "passthrough" and raw.headers["x-minicache-group"] == info["group"]
    assert len(target.forwarded) == 1 and mc.stats()["errors"] == 0


def test_a_streamed_pass_through_carries_the_route_headers(serve):
    url, mc, target = serve()
    raw = client(url).chat.completions.with_raw_response.create(
        model="m", messages=ask("Hi there!"), stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices) == GREETING
    assert raw.headers["x-minicache-route"] == "passthrough"
    assert "x-minicache-group" not in raw.headers  # forwarded before the engine chose a group
    assert "x-minicache-entry" not in raw.headers
    # a request the engine leaves to the target once it chose a group says which
    group = mc.store.ensure_group("default", "label:cr", label="cr")
    group.status = "uncacheable"
    mc.store.update_group(group)
    raw = client(url).chat.completions.with_raw_response.create(
        model="m",
        messages=ask(CURRENT_RATIO.ask(*CR_VALUES[0])),
        stream=True,
        extra_body={"minicache": {"group": "cr"}},
    )
    assert "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices) == GREETING
    assert raw.headers["x-minicache-route"] == "passthrough"
    assert raw.headers["x-minicache-group"] == "label:cr"
    assert "x-minicache-entry" not in raw.headers
    assert len(target.forwarded) == 2 and mc.stats()["errors"] == 0


def test_a_streamed_text_completion_is_the_targets_tokens_as_they_are_generated(serve):
    url, mc, target = serve(CompletionStreamingTarget())
    raw = client(url).completions.with_raw_response.create(
        model="m",
        prompt="Once upon a time",
        stream=True,
        stream_options={"include_usage": True},
    )
    assert raw.headers["x-minicache-route"] == "passthrough"
    texts, first_at, chunks = [], None, []
    for chunk in raw.parse():
        chunks.append(chunk)
        if chunk.choices and chunk.choices[0].text:
            if first_at is None:
                first_at = time.perf_counter()
                target.release.set()  # only now may the target generate its last word
            texts.append(chunk.choices[0].text)
    assert len(texts) > 1 and "".join(texts) == GREETING
    assert first_at is not None and first_at < target.last_generated_at
    assert chunks[-1].usage.completion_tokens == len(texts)
    assert chunks[-1].usage.prompt_tokens == 4
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].model_extra["minicache"]["route"] == "passthrough"
    assert target.forwarded[0]["stream"] is True and target.forwarded[0]["model"] == "fake-target"
    assert mc.stats()["passthroughs"] == 1 and mc.stats()["errors"] == 0


@pytest.mark.allow_model_requests
def test_a_streamed_text_completion_through_an_openai_compatible_target_is_its_chunks(serve):
    with FakeOpenAIServer(gated=True) as upstream:
        url, mc, _ = serve(OpenAIBackend(upstream.url, "qwen", retries=0))
        stream = client(url).completions.create(
            model="m",
            prompt="Once upon a time",
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = []
        for chunk in stream:
            chunks.append(chunk)
            if chunk.choices and chunk.choices[0].text and not upstream.release.is_set():
                seen_at = time.perf_counter()
                upstream.release.set()  # only now does the target send its last word
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert len(texts) == len(GREETING.split()) and "".join(texts) == GREETING
    assert seen_at < upstream.last_sent_at
    assert chunks[-1].usage.prompt_tokens == 4 and chunks[-1].usage.completion_tokens == 7
    assert upstream.bodies[0]["stream"] is True and upstream.bodies[0]["model"] == "qwen"
    assert mc.stats()["passthroughs"] == 1 and mc.stats()["errors"] == 0
