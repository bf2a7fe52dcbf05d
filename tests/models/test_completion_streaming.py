"""A streamed ``/v1/completions`` on each backend (minicache.models.forwarding.stream_completion):
the OpenAI-compatible backend passes a real HTTP target's ``text_completion`` chunks on as they
arrive, the fake streams word by word, a backend that cannot stream answers whole, and the embedded
llama.cpp model's stream is cut at the client's stop sequences and counted in tokens."""

from __future__ import annotations

import threading
import time

import pytest

from fakes import GREETING, FakeOpenAIServer
from minicache import BackendResponseError, OpenAIBackend
from minicache.models import FakeBackend
from minicache.models.forwarding import CompletionStreaming, forward_completion, stream_completion
from minicache.models.llama_forwarding import cut_at_stops
from minicache.models.llama_forwarding import stream_completion as llama_stream_completion

pytestmark = pytest.mark.allow_model_requests

BODY = {
    "model": "gpt-3.5-turbo-instruct",
    "prompt": "Once upon a time",
    "max_tokens": 8,
    "stream": True,
    "stream_options": {"include_usage": True},
    "minicache": {"no_store": True},
}


def texts(chunks: list[dict]) -> list[str]:
    return [c["choices"][0]["text"] for c in chunks if c["choices"] and c["choices"][0]["text"]]


def test_openai_backend_passes_the_targets_chunks_on_as_they_arrive():
    with FakeOpenAIServer(gated=True) as target:
        backend = OpenAIBackend(target.url, "qwen", retries=0)
        assert isinstance(backend, CompletionStreaming)
        stream = stream_completion(backend, BODY)
        first = next(stream)
        assert first["choices"][0]["text"] == "Hello! "
        seen_at = time.perf_counter()
        target.release.set()  # only now does the target send its last word
        chunks = [first, *stream]
        backend.close()
    assert seen_at < target.last_sent_at
    assert "".join(texts(chunks)) == GREETING and len(texts(chunks)) == len(GREETING.split())
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 7
    sent = target.bodies[0]
    assert sent["stream"] is True and sent["model"] == "qwen" and "minicache" not in sent
    assert sent["stream_options"] == {"include_usage": True} and sent["prompt"] == BODY["prompt"]


def test_openai_backend_streams_and_answers_whole_the_same_text():
    with FakeOpenAIServer() as target:
        backend = OpenAIBackend(target.url, "qwen", retries=0)
        whole = forward_completion(backend, {**BODY, "stream": False})
        streamed = list(stream_completion(backend, BODY))
        backend.close()
    assert "".join(texts(streamed)) == whole["choices"][0]["text"]
    assert streamed[-1]["usage"] == whole["usage"]


def test_openai_backend_passes_a_targets_refusal_of_a_streamed_completion_on():
    with FakeOpenAIServer() as target:
        backend = OpenAIBackend(f"{target.url}/engines/none", "qwen", retries=0)
        with pytest.raises(BackendResponseError) as info:
            list(stream_completion(backend, BODY))
        backend.close()
    assert info.value.status == 404 and len(target.bodies) == 1  # a refusal is not retried


def test_fake_backend_streams_its_forwarded_text_word_by_word_with_its_usage():
    fake = FakeBackend(lambda m, o: "x", forward=lambda body: GREETING)
    chunks = list(stream_completion(fake, BODY))
    whole = forward_completion(fake, BODY)
    assert texts(chunks) == ["Hello! ", "How ", "can ", "I ", "help ", "you ", "today?"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole["usage"]
    assert fake.forwarded[0]["stream"] is True and fake.forwarded[0]["model"] == "fake"
    without_usage = list(stream_completion(fake, {**BODY, "stream_options": None}))
    assert all(c["choices"] for c in without_usage)


def test_a_backend_that_cannot_stream_a_completion_answers_whole_in_one_chunk():
    class Plain(FakeBackend):
        stream_completion = None  # type: ignore[assignment]

    plain = Plain(lambda m, o: "x", forward=lambda body: GREETING)
    chunks = list(stream_completion(plain, BODY))
    assert texts(chunks) == [GREETING] and chunks[1]["usage"]["completion_tokens"] == 7
    assert len(chunks) == 2
    assert "stream" not in plain.forwarded[0] and "stream_options" not in plain.forwarded[0]


def test_a_stream_is_cut_before_a_stop_sequence_and_text_that_only_began_one_is_released():
    def stream(*words: str, finish: str = "stop"):
        yield from ({"choices": [{"text": w, "finish_reason": None}]} for w in words)
        yield {"choices": [{"text": "", "finish_reason": finish}]}

    pieces = list(cut_at_stops(stream("Hi", " the", "re", "\n", "\nBye"), ["\n\n", "END"]))
    assert [(p.text, p.finish_reason, p.at_stop_sequence) for p in pieces] == [
        ("Hi", None, False),
        (" the", None, False),
        ("re", None, False),
        ("", "stop", True),
    ]
    pieces = list(cut_at_stops(stream("a E", "N", "d", finish="length"), ["END"]))
    assert [(p.text, p.finish_reason) for p in pieces] == [
        ("a ", None),
        ("ENd", None),
        ("", "length"),
    ]
    pieces = list(cut_at_stops(stream("x", "E"), ["END"]))  # a held prefix ends the stream
    assert [p.text for p in pieces] == ["x", "E", ""] and pieces[-1].finish_reason == "stop"


class FakeLlama:
    """llama-cpp-python's ``create_completion(stream=True)`` as this module relies on it: it calls
    the stopping criterion once per sampled token with the tokens before it (the prompt, then each
    evaluated token), sends a chunk per token, and ends at the end-of-generation token (not
    sent) or at ``max_tokens``, calling the criterion once more with what it evaluated."""

    def __init__(self, prompt_tokens: int, tokens: list[str]) -> None:
        self.prompt_tokens = prompt_tokens
        self.tokens = tokens  # what the model samples; None for the end-of-generation token
        self.kwargs: dict = {}

    def create_completion(self, stream, stopping_criteria, **kwargs):
        self.kwargs = kwargs
        evaluated = list(range(self.prompt_tokens))
        base = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "/m.gguf"}
        finish = "length"
        for n, token in enumerate(self.tokens):
            stopping_criteria(evaluated, None)
            if token is None:
                finish = "stop"
                break
            yield {**base, "choices": [{"text": token, "index": 0, "finish_reason": None}]}
            if n + 1 >= kwargs.get("max_tokens", 16):
                break
            evaluated.append(n)
        stopping_criteria(evaluated, None)
        yield {**base, "choices": [{"text": "", "index": 0, "finish_reason": finish}]}


class FakeLlamaBackend:
    name = "target"

    def __init__(self, llm: FakeLlama) -> None:
        self.llm = llm
        self._lock = threading.Lock()


@pytest.mark.parametrize(
    "tokens,stop,text,finish,completion_tokens",
    [
        (["Once", " more", None], None, "Once more", "stop", 2),  # the end token is not counted
        (["a", "b", "c", "d", "e", "f", "g", "h", "i"], None, "abcdefgh", "length", 8),
        (["Once", " more", ".\n", "Then"], "\n", "Once more.", "stop", 3),  # nor cut text's token
    ],
)
def test_the_embedded_models_stream_counts_the_tokens_a_whole_call_reports(
    tokens, stop, text, finish, completion_tokens
):
    llm = FakeLlama(5, tokens)
    chunks = list(llama_stream_completion(FakeLlamaBackend(llm), {**BODY, "stop": stop}))
    assert "".join(texts(chunks)) == text
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == finish
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": completion_tokens,
        "total_tokens": 5 + completion_tokens,
    }
    assert {c["model"] for c in chunks} == {BODY["model"]}
    assert "stop" not in llm.kwargs and llm.kwargs["max_tokens"] == 8  # stops are applied here
