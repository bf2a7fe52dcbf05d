"""Enum-object decoding (minicache.models.choice) with a scripted "model": which tokens it is asked about."""

from __future__ import annotations

import json

import numpy as np

from minicache.models.choice import decode_enum_object, enum_fields

VOCAB = ['{"', "a", "b", '":', " ", "1", "2", "5", "0", ".", ",", " \"", "}", '"x"', '"y"']


def tokenize(text: str) -> list[int]:
    """Greedy longest-match over VOCAB (a stand-in for a BPE tokenizer)."""
    out, i = [], 0
    while i < len(text):
        match = max((t for t in VOCAB if text.startswith(t, i)), key=len)
        out.append(VOCAB.index(match))
        i += len(match)
    return out


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


def test_enum_fields_accepts_only_flat_required_enum_objects():
    good = {"type": "object", "properties": {"a": {"enum": [1, 2]}, "b": {"enum": ["x"]}},
            "required": ["a", "b"], "additionalProperties": False}
    assert enum_fields(good) == [("a", [1, 2]), ("b", ["x"])]
    assert enum_fields(dict(good, required=["a"])) is None
    assert enum_fields(dict(good, additionalProperties=True)) is None
    assert enum_fields(dict(good, properties={"a": {"type": "number"}})) is None
    assert enum_fields(dict(good, properties={"a": {"enum": [True]}}, required=["a"])) is None


def test_forced_tokens_are_batched_and_the_model_is_asked_only_where_values_branch():
    # a: 12 | 15 | 2 -> branches after "{\"a\": " (1 vs 2) and after "1" (2 vs 5); b: only "x" -> forced.
    model = Scripted(prefer=["1", "5"])
    out = decode_enum_object([("a", [12, 15, 2]), ("b", ["x"])], tokenize, model, pending=[4])
    assert out.values == {"a": 15, "b": "x"} and json.loads(out.text) == {"a": 15, "b": "x"}
    assert out.evals == 2
    first, second = model.batches
    assert first == [4] + tokenize('{"a": ')  # the prompt's last token and the forced key, in one batch
    assert second == tokenize("1")
    # {"a": | 1 5 | , | "b": | "x" | }
    assert out.completion_tokens == len(tokenize('{"a": ')) + 2 + 1 + len(tokenize(' "b": ')) + 1 + 1


def test_a_value_that_is_a_prefix_of_another_is_decided_by_the_end_token():
    model = Scripted(prefer=["}"])  # "1" is forced; then "}" rather than "2": the value 1, not 12
    out = decode_enum_object([("a", [1, 12])], tokenize, model, pending=[4])
    assert out.values == {"a": 1} and out.evals == 1
    assert model.batches == [[4] + tokenize('{"a": 1')]
