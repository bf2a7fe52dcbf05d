"""A streamed ``/v1/completions`` on each backend (minicache.models.forwarding.stream_completion):
the OpenAI-compatible backend passes a real HTTP target's ``text_completion`` chunks on as they
arrive, the fake streams word by word, a backend that cannot stream answers whole, and the embedded
llama.cpp model's stream is cut at the client's stop sequences and counted in tokens; its streamed
chat (``stream_chat``) and a streamed miss's generation (``streamed``) are counted the same way."""

from __future__ import annotations

import threading
import time

import pytest

from fakes import GREETING, FakeOpenAIServer
from minicache import BackendResponseError, OpenAIBackend
from minicache.models import FakeBackend
from minicache.models.forwarding import CompletionStreaming, forward_completion, stream_completion
from minicache.models.llama_forwarding import SampledTokens, cut_at_stops, streamed
from minicache.models.llama_forwarding import stream_chat as llama_stream_chat
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
    evaluated token), sends a chunk per token that completes text (``""`` is a token that holds
    half a character: its text comes with the next one's), and ends at the end-of-generation token
    (not sent) or at ``max_tokens``, calling the criterion once more with what it evaluated (with
    a draft model, ``drafted`` tokens more than it sampled). Without streaming it returns the
    whole completion, cut at the first of its stop sequences that the text holds, its usage
    counting the tokens it kept. Its ``create_chat_completion`` is its chat handler's: the
    messages through a chat template (4 tokens a message), the template's stop sequence added to
    the client's, and the text completion of whatever it is called on (llama-cpp-python hands its
    handler ``self``) as chat chunks, or as a chat completion without streaming."""

    TEMPLATE_STOP = "<|im_end|>"

    def __init__(self, prompt_tokens: int, tokens: list[str | None], drafted: int = 0) -> None:
        self.prompt_tokens = prompt_tokens
        self.tokens = tokens  # what the model samples; None for the end-of-generation token
        self.drafted = drafted
        self.kwargs: dict = {}
        self.let_go = False

    def create_completion(self, stream=False, stopping_criteria=None, **kwargs):
        if not stream:
            return self.whole_completion(**kwargs)
        return self.streamed_completion(stopping_criteria, **kwargs)

    def whole_completion(self, prompt, stop=None, max_tokens=16, **kwargs):
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        kept: list[str] = []
        text, finish = "", "length"
        for token in self.tokens:
            if token is None:
                finish = "stop"
                break
            kept.append(token)
            text = "".join(kept)
            found = [s for s in stops if s in text]
            if found:
                text, finish = text[: text.index(found[0])], "stop"
                break
            if len(kept) >= max_tokens:
                break
        return {
            "choices": [{"text": text, "index": 0, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(kept),
                "total_tokens": len(prompt) + len(kept),
            },
        }

    def streamed_completion(self, stopping_criteria, **kwargs):
        self.kwargs = kwargs
        prompt = kwargs.get("prompt")
        evaluated = list(prompt if isinstance(prompt, list) else range(self.prompt_tokens))
        base = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "/m.gguf"}
        finish = "length"
        stopping_criteria = stopping_criteria or (lambda input_ids, logits: False)
        try:
            for n, token in enumerate(self.tokens):
                stopping_criteria(evaluated, None)
                if token is None:
                    finish = "stop"
                    break
                if token:
                    yield {**base, "choices": [{"text": token, "index": 0, "finish_reason": None}]}
                if n + 1 >= kwargs.get("max_tokens", 16):
                    break
                evaluated.append(n)
            stopping_criteria([*evaluated, *range(self.drafted)], None)
            yield {**base, "choices": [{"text": "", "index": 0, "finish_reason": finish}]}
        finally:
            self.let_go = True

    def create_chat_completion(self, messages, stream=False, stop=None, **kwargs):
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        if not stream:
            whole = self.create_completion(
                prompt=list(range(self.prompt_tokens + 4 * len(messages))),
                stop=[*stops, self.TEMPLATE_STOP],
                **kwargs,
            )
            came = whole["choices"][0]
            message = {"role": "assistant", "content": came["text"]}
            choice = {"index": 0, "message": message, "finish_reason": came["finish_reason"]}
            return {"id": "chat-1", "choices": [choice], "usage": whole["usage"]}
        # a generator of the class's own: ``self`` may be the model a chat handler is handed
        return FakeLlama.chat_chunks(self, messages, stops, stream, **kwargs)

    @staticmethod
    def chat_chunks(llama, messages, stops, stream, **kwargs):
        chunks = llama.create_completion(
            prompt=list(range(llama.prompt_tokens + 4 * len(messages))),
            stop=[*stops, FakeLlama.TEMPLATE_STOP],
            stream=stream,
            stopping_criteria=None,
            **kwargs,
        )
        for i, chunk in enumerate(chunks):
            base = {"id": "chat" + chunk["id"], "object": "chat.completion.chunk", "created": 1}
            came = chunk["choices"][0]
            delta = {"content": came["text"]} if came["finish_reason"] is None else {}
            if i == 0:
                yield {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}
                    ],
                }
            finish = came["finish_reason"]
            yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


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


CHAT = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Tell me a story."}],
    "max_tokens": 8,
    "stream": True,
    "stream_options": {"include_usage": True},
}


def content(chunks: list[dict]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


@pytest.mark.parametrize(
    "tokens,stop,text,finish,completion_tokens",
    [
        (["Once", " more", None], None, "Once more", "stop", 2),  # the end token is not counted
        (["Caf", "", "é!", None], None, "Café!", "stop", 3),  # two tokens in one chunk
        (["a", "b", "c", "d", "e", "f", "g", "h", "i"], None, "abcdefgh", "length", 8),
        (["Once", " more", ".\n", "Then"], ["\n"], "Once more.", "stop", 3),  # nor cut text's token
        (["Hi", "<|im_", "end|>", "x"], None, "Hi", "stop", 3),  # the chat template's stop too
    ],
)
def test_the_embedded_models_streamed_chat_counts_the_tokens_a_whole_call_reports(
    tokens, stop, text, finish, completion_tokens
):
    llm = FakeLlama(5, tokens)
    chunks = list(llama_stream_chat(FakeLlamaBackend(llm), {**CHAT, "stop": stop}))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert content(chunks) == text
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == finish
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 5 + 4,  # the prompt as the chat template renders it
        "completion_tokens": completion_tokens,
        "total_tokens": 5 + 4 + completion_tokens,
    }
    assert {c["model"] for c in chunks} == {CHAT["model"]}
    assert "stop" not in llm.kwargs and llm.kwargs["max_tokens"] == 8  # stops are applied here


def test_a_streamed_chat_without_include_usage_sends_no_usage_chunk():
    chunks = list(
        llama_stream_chat(
            FakeLlamaBackend(FakeLlama(5, ["Hi", None])), {**CHAT, "stream_options": None}
        )
    )
    assert content(chunks) == "Hi" and all(c["choices"] for c in chunks)


def test_a_streamed_chat_left_by_its_client_lets_the_model_go():
    llm = FakeLlama(5, ["Once", " upon", " a", " time", None])
    backend = FakeLlamaBackend(llm)
    stream = llama_stream_chat(backend, CHAT)
    assert content([next(stream), next(stream)]) == "Once"
    stream.close()
    assert llm.let_go and not backend._lock.locked()


def test_the_token_counter_stops_where_the_chat_templates_own_criterion_does():
    counted = SampledTokens(then=lambda input_ids, logits: input_ids[-1] == 0)
    assert counted([7, 3], None) is False and counted([7, 3, 0], None) is True
    assert (counted.prompt, counted.sampled) == (2, 2)


def test_the_token_counter_does_not_count_the_tokens_a_draft_model_evaluated_ahead():
    counted = SampledTokens()
    for length in (4, 5, 6):  # three tokens sampled after a prompt of 4
        counted(list(range(length)), None)
    assert counted.sampled == 3
    counted(list(range(8)), None)  # generation finished, two drafted tokens evaluated
    assert (counted.prompt, counted.sampled_when_finished) == (4, 3)


MISS = {
    "messages": [
        {"role": "system", "content": "Write a Python program that computes the answer."},
        {"role": "user", "content": "What is 2 + 3?"},
    ],
    "max_tokens": 8,
    "temperature": 0.0,
    "top_k": 1,
}


@pytest.mark.parametrize(
    "tokens,stop,drafted,text,finish,completion_tokens",
    [
        (["x = 2", " + 3", None], None, 0, "x = 2 + 3", "stop", 2),
        (["Caf", "", "é!", None], None, 0, "Café!", "stop", 3),  # two tokens in one chunk
        (["a", "b", "c", "d", "e", "f", "g", "h", "i"], None, 0, "abcdefgh", "length", 8),
        (["x = 5", "\n", "```", "\nprint"], ["```"], 0, "x = 5\n", "stop", 3),  # a stop cut
        (["Hi", "<|im_", "end|>", "x"], None, 0, "Hi", "stop", 3),  # the chat template's stop
        (["x = 2", " + 3", None], None, 3, "x = 2 + 3", "stop", 2),  # a draft model ran ahead
        (["a", "b", "c", "d", "e", "f", "g", "h", "i"], None, 1, "abcdefgh", "length", 8),
    ],
)
def test_a_streamed_miss_is_the_whole_calls_text_with_its_token_counts(
    tokens, stop, drafted, text, finish, completion_tokens
):
    pieces: list[str] = []
    out = streamed(FakeLlama(5, tokens, drafted), {**MISS, "stop": stop}, pieces.append)
    whole = FakeLlama(5, tokens).create_chat_completion(**MISS, stop=stop)
    assert "".join(pieces) == out["choices"][0]["message"]["content"] == text
    assert whole["choices"][0]["message"]["content"] == text
    assert out["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"] == finish
    assert out["usage"] == whole["usage"]
    assert out["usage"] == {
        "prompt_tokens": 5 + 2 * 4,  # the prompt as the chat template renders it
        "completion_tokens": completion_tokens,
        "total_tokens": 5 + 2 * 4 + completion_tokens,
    }


def test_a_streamed_miss_whose_reader_fails_lets_the_model_go():
    llm = FakeLlama(5, ["x", " = ", "2", None])

    def reader_gone(piece: str) -> None:
        raise ConnectionError("the client left")

    with pytest.raises(ConnectionError):
        streamed(llm, MISS, reader_gone)
    assert llm.let_go
