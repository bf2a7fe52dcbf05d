"""The embedded llama.cpp model streams a chat token by token, with the text and the token counts
of a call without streaming: the chat-templated prompt's tokens and the tokens sampled, whether
the model ends, runs into ``max_tokens`` or meets a stop sequence."""

from __future__ import annotations

import pytest

from minicache.models.forwarding import forward_chat, stream_chat

pytestmark = pytest.mark.real_model


@pytest.mark.parametrize("stop", [None, [" ", "\n"]])
def test_a_streamed_chat_is_the_whole_calls_text_with_its_usage(small_model, stop):
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "Write a haiku about autumn leaves."}],
        "max_tokens": 8,
        "temperature": 0,
        "stop": stop,
    }
    # each call prefills the prompt from scratch: a prompt found in the KV cache is not bit-identical
    # to a fresh prefill, and at temperature 0 that can be enough to change the words
    small_model.forget_request()
    whole = forward_chat(small_model, body)
    small_model.forget_request()
    chunks = list(
        stream_chat(
            small_model, {**body, "stream": True, "stream_options": {"include_usage": True}}
        )
    )
    pieces = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert "".join(pieces) == whole["choices"][0]["message"]["content"]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == whole["choices"][0]["finish_reason"]
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["prompt_tokens"] > 0
    assert 0 < usage["completion_tokens"] <= 8
    assert usage == whole["usage"]
