"""The llama.cpp ``eval`` override, without a model: where a background call may step aside."""

from __future__ import annotations

from contextlib import ExitStack
from types import SimpleNamespace

import numpy as np
import pytest

from minicache.models.compute import CPU_LOCK
from minicache.models.llama_setup import import_llama, make_llama_class


class _Ctx:
    def __init__(self) -> None:
        self.decoded: list[list[int]] = []

    def kv_cache_seq_rm(self, seq: int, start: int, end: int) -> None:
        pass

    def decode(self, batch: SimpleNamespace) -> None:
        self.decoded.append(list(batch.tokens))


class _Batch:
    def __init__(self) -> None:
        self.batch = SimpleNamespace(logits=[False] * 8)
        self.tokens: list[int] = []

    def set_batch(self, batch: list[int], n_past: int, logits_all: bool) -> None:
        self.tokens = batch


def _llama(n_batch: int):
    llm = object.__new__(make_llama_class(import_llama()))  # no model: only eval's bookkeeping
    llm.n_batch, llm.n_tokens, llm.eval_log = n_batch, 0, []
    llm._ctx, llm._batch = _Ctx(), _Batch()
    llm._stack = ExitStack()  # what Llama.__del__ closes
    llm.input_ids = np.zeros(64, dtype=np.intc)
    return llm


@pytest.mark.parametrize("request_waits, steps_aside_at", [(True, [0, 4, 8]), (False, [])])
def test_a_long_prompt_can_step_aside_between_its_batches_not_only_before_the_call(
    monkeypatch, request_waits, steps_aside_at
):
    """A build's prompt of thousands of tokens is one eval call (a hit was seen waiting 31 s behind
    background work). With a request waiting, the call steps aside before each batch, where the state is whole
    (n_tokens at a batch boundary); with none, never."""
    llm = _llama(n_batch=4)
    at: list[int] = []
    llm.step_aside = lambda: at.append(llm.n_tokens)
    monkeypatch.setattr(CPU_LOCK, "should_yield", lambda: request_waits)
    llm.eval(list(range(10)))
    assert at == steps_aside_at
    assert llm._ctx.decoded == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(llm.input_ids[:10]) == list(range(10)) and llm.n_tokens == 10 and llm.evals == 1
