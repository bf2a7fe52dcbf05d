"""Object decoding (minicache.models.choice) with a scripted "model": which tokens it is asked about."""

from __future__ import annotations

import json

import numpy as np

from fakes import VOCAB, tokenize
from minicache.models.choice import Field, decode_object, object_fields


class Scripted:
    """Logits that prefer the given tokens (by text); records every batch it is asked to evaluate."""

    def __init__(self, prefer: list[str]) -> None:
        self.prefer = list(prefer)
        self.batches: list[list[int]] = []

    def __call__(self, batch: list[int]) -> np.ndarray:
        self.batches.append(list(batch))
        logits = np.zeros(len(VOCAB))
        logits[VOCAB.index(self.prefer.pop(0))] = 5.0
        return logits


def test_object_fields_accepts_only_flat_required_enum_or_text_objects():
    good = {
        "type": "object",
        "properties": {
            "a": {"enum": [1, 2]},
            "b": {"enum": ["x"]},
            "k": {"type": "string", "maxLength": 50},
        },
        "required": ["a", "b", "k"],
        "additionalProperties": False,
    }
    assert object_fields(good) == [Field("a", [1, 2]), Field("b", ["x"]), Field("k", None, 50)]
    assert object_fields(dict(good, required=["a"])) is None
    assert object_fields(dict(good, additionalProperties=True)) is None
    assert object_fields(dict(good, properties={"a": {"type": "number"}}, required=["a"])) is None
    assert object_fields(dict(good, properties={"a": {"enum": [True]}}, required=["a"])) is None
    assert (
        object_fields(
            dict(good, properties={"a": {"type": "string", "pattern": "x+"}}, required=["a"])
        )
        is None
    )


def test_forced_tokens_are_batched_and_the_model_is_asked_only_where_values_branch():
    # a: 12 | 15 | 2 -> branches after "{\"a\": " (1 vs 2) and after "1" (2 vs 5); b: only "x" -> forced.
    model = Scripted(prefer=["1", "5"])
    out = decode_object([Field("a", [12, 15, 2]), Field("b", ["x"])], tokenize, model, pending=[4])
    assert out.values == {"a": 15, "b": "x"} and json.loads(out.text) == {"a": 15, "b": "x"}
    assert out.evals == 2
    first, second = model.batches
    assert first == [4] + tokenize(
        '{"a": '
    )  # the prompt's last token and the forced key, in one batch
    assert second == tokenize("1")
    # {"a": | 1 5 | , | "b": | "x" | }
    assert (
        out.completion_tokens == len(tokenize('{"a": ')) + 2 + 1 + len(tokenize(' "b": ')) + 1 + 1
    )


def test_a_value_that_is_a_prefix_of_another_is_decided_by_the_end_token():
    model = Scripted(prefer=["}"])  # "1" is forced; then "}" rather than "2": the value 1, not 12
    out = decode_object([Field("a", [1, 12])], tokenize, model, pending=[4])
    assert out.values == {"a": 1} and out.evals == 1
    assert model.batches == [[4] + tokenize('{"a": 1')]


class ScriptedText(Scripted):
    """Prefers, at each step, the first of its tokens that it is given (by text); others score 1..0."""

    def __call__(self, batch: list[int]) -> np.ndarray:
        self.batches.append(list(batch))
        logits = np.linspace(1, 0, len(VOCAB))
        for rank, text in enumerate(self.prefer.pop(0).split("|")):
            logits[VOCAB.index(text)] = 10.0 - rank
        return logits


def token_bytes(token: int) -> bytes:
    return VOCAB[token].replace("\\n", "\n").encode()


def test_a_text_value_is_decoded_token_by_token_until_a_token_with_a_quote():
    # "red", then a newline (cannot be in a JSON string: the next best, " shoes"), then '",' (ends it).
    model = ScriptedText(prefer=["red", "\\n| shoes", '",', "2"])
    out = decode_object(
        [Field("k", None), Field("a", [1, 2])],
        tokenize,
        model,
        pending=[4],
        token_bytes=token_bytes,
    )
    assert out.values == {"k": "red shoes", "a": 2}
    assert json.loads(out.text) == {"k": "red shoes", "a": 2}
    assert out.evals == 4  # three text tokens, one choice
    assert model.batches[0] == [4] + tokenize('{"k": "')


def test_a_text_value_stops_at_its_length_limit():
    model = ScriptedText(prefer=["red"] * 10)
    out = decode_object(
        [Field("k", None, max_chars=7)], tokenize, model, pending=[4], token_bytes=token_bytes
    )
    assert out.values == {"k": "redredr"} and out.evals == 3
