"""The embedded llama.cpp model streams a ``/v1/completions`` prompt token by token, with the text
and the token counts of a call without streaming."""

from __future__ import annotations

import pytest

from minicache.models.forwarding import forward_completion, stream_completion

pytestmark = pytest.mark.real_model


def test_a_streamed_completion_is_the_whole_calls_text_in_several_chunks_with_its_usage(
    small_model,
):
    body = {"model": "m", "prompt": "def fibonacci(n):", "max_tokens": 8, "temperature": 0}
    whole = forward_completion(small_model, body)
    chunks = list(
        stream_completion(
            small_model, {**body, "stream": True, "stream_options": {"include_usage": True}}
        )
    )
    texts = [c["choices"][0]["text"] for c in chunks if c["choices"] and c["choices"][0]["text"]]
    assert len(texts) > 1
    assert "".join(texts) == whole["choices"][0]["text"]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == whole["choices"][0]["finish_reason"]
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["prompt_tokens"] > 0
    assert 0 < usage["completion_tokens"] <= 8
    assert usage == whole["usage"]
