"""The embedded llama.cpp model's generation for a streamed miss (``complete`` with ``on_text``)
shows its text as it is made and reports the text and the token counts of the same call without
streaming: the chat-templated prompt's tokens and the tokens sampled, whether the model runs into
``max_tokens`` or meets a stop sequence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from minicache.models.base import GenerationOptions, Message

pytestmark = pytest.mark.real_model

POT = [
    Message(
        "user",
        "Write a Python function solution() that returns the answer, in a ```python block.\n"
        "Question: A shop sells 12 apples a day. How many apples does it sell in 5 days?",
    )
]


@pytest.mark.parametrize("stop", [(), ("\n",)])
def test_a_streamed_miss_reports_the_token_counts_of_a_call_without_streaming(small_model, stop):
    options = GenerationOptions(max_tokens=16, temperature=0.0, stop=stop)
    small_model.forget_request()  # both calls prefill the whole prompt alike
    whole = small_model.complete(POT, options)
    pieces: list[str] = []
    small_model.forget_request()
    streamed = small_model.complete(POT, replace(options, on_text=pieces.append))
    assert len(pieces) > 1 and "".join(pieces) == streamed.text == whole.text
    assert streamed.finish_reason == whole.finish_reason
    assert streamed.prompt_tokens == whole.prompt_tokens > 0
    assert 0 < streamed.completion_tokens == whole.completion_tokens <= 16
