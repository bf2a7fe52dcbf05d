"""The routing embedder's packed forward pass (minicache.route.embedding) computes what the plain BERT
forward of all-MiniLM-L6-v2 computes: packing the weights is a speed change, not a model change."""

from __future__ import annotations

import numpy as np
import pytest

from minicache.route.embedding import (
    FILES,
    MiniLMEmbedder,
    embedder_dir,
    load_weights,
    reference_forward,
)

TEXTS = [
    "A waiter had 44 customers. If 12 left, how many are there now?",
    "What is the current ratio if current assets are $64,000 and current liabilities are $16,000?",
    "x",
]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    if not all((embedder_dir() / name).exists() for name in FILES):
        pytest.skip("the embedder's files are not fetched (`minicache models`)")
    return MiniLMEmbedder()


def test_the_packed_forward_equals_the_plain_bert_forward(embedder):
    weights = load_weights()
    vectors = embedder.embed(TEXTS)
    for text, vector in zip(TEXTS, vectors, strict=True):
        expected = reference_forward(weights, embedder.tokenizer.encode(text).ids)
        assert np.abs(vector - expected).max() < 1e-5
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
