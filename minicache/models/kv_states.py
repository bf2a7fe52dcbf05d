"""The KV states a llama.cpp model keeps between calls, and how one is saved and restored.

Two kinds are kept per model. A system prompt's state (an entry's extraction template) is saved
after its first use and restored when that prompt returns after another one, so entries that
alternate on a busy cache do not pay the template's prefill again. A call that names a key
(``GenerationOptions.prefix_key``) keeps its whole state (prompt and output) under that key; the
next call with the key restores it, cut back to the tokens the two prompts share. A position's keys
and values depend only on the tokens up to it, so a state cut back to a shared prefix is that
prefix's state.

The same save and restore let a background call step aside for waiting requests between forward
passes (:meth:`KvStates.step_aside`) without its output changing.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any

from minicache.models.base import CPU_LOCK

PREFIX_STATES = 64  # system-prompt KV states kept per model (about 12 KB per token for the 0.5B)
# prefix_key states kept per model (about 28 KB per token for the 1.5B: 8 MB a miss) ...
KEPT_STATES = 32
KEPT_BYTES = 512 << 20  # ... and at most this much of them (a long context's state is 100 MB)
# A kept state is restored only if it saves this many tokens past the system prefix: a restored
# state is not bit-identical to fresh prefill, and restores of a few tokens were seen to turn a
# generated program wrong while saving almost nothing.
KEPT_MIN_GAIN = 32


def common_prefix(llm: Any, tokens: list[int], ids: Any = None) -> int:
    """How many of ``tokens`` begin ``ids`` (default: what the model's KV cache holds)."""
    held = llm.input_ids[: llm.n_tokens].tolist() if ids is None else ids
    pairs = enumerate(zip(held, tokens, strict=False))  # stops at the shorter
    return next((i for i, (a, b) in pairs if a != b), min(len(held), len(tokens)))


class KvStates:
    """The saved KV states of one model: system prefixes by their tokens, kept calls by key.

    Every method takes the model (a llama-cpp-python ``Llama``) and must run under the CPU lock."""

    def __init__(self, llama_cpp: Any) -> None:
        self._llama_cpp = llama_cpp
        self.prefixes: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self.kept: OrderedDict[str, tuple[list[int], bytes]] = (
            OrderedDict()
        )  # key -> (tokens, state)

    def save(self, llm: Any) -> bytes:
        """The KV cache of sequence 0 (what generation uses), as bytes; empty if llama.cpp wrote none."""
        ctx = llm._ctx.ctx
        size = self._llama_cpp.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = self._llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
        # string_at, because slicing the array makes a list of ints
        return ctypes.string_at(buf, written) if written else b""

    def load(self, llm: Any, state: bytes) -> bool:
        """Load a state from :meth:`save` into sequence 0; False if llama.cpp refused it."""
        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        return self._llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buf, len(state), 0) != 0

    def restore(self, llm: Any, state: bytes, ids: Any, n: int) -> bool:
        """Load a saved ``state`` whose tokens are ``ids`` and keep its first ``n`` of them; False,
        with an empty cache, if llama.cpp refused the state."""
        llm._ctx.kv_cache_seq_rm(0, 0, -1)
        if not self.load(llm, state):
            llm.n_tokens = 0
            return False
        llm._ctx.kv_cache_seq_rm(0, n, -1)
        llm.input_ids[:n] = ids[:n]
        llm.n_tokens = n
        return True

    def load_prefix(self, llm: Any, tokens: list[int], prefix: int) -> None:
        """Make the KV cache start with the prompt's system prefix, restoring it from a saved state
        when the last call had another one (entries' extraction prompts alternate on a busy cache)."""
        if prefix == 0 or common_prefix(llm, tokens) >= prefix:
            return
        key = tuple(tokens[:prefix])
        state = self.prefixes.get(key)
        if state is not None:
            if self.restore(llm, state, key, prefix):
                self.prefixes.move_to_end(key)
            return
        llm.n_tokens = common_prefix(llm, tokens)
        llm.eval(tokens[llm.n_tokens : prefix])
        saved = self.save(llm)
        if saved:
            self.prefixes[key] = saved
            while len(self.prefixes) > PREFIX_STATES:
                self.prefixes.popitem(last=False)

    def load_kept(self, llm: Any, key: str | None, tokens: list[int], prefix: int) -> bool:
        """Start the KV cache with what ``tokens`` share with the last call under ``key``, its state
        restored and cut back to the shared tokens. False where that saves under ``KEPT_MIN_GAIN``
        tokens (the cache untouched) or the state does not load (the cache emptied)."""
        if key is None or key not in self.kept:
            return False
        ids, state = self.kept[key]
        # Generation needs a token of its own.
        n = min(common_prefix(llm, tokens, ids), len(tokens) - 1)
        gain_from = max(prefix, common_prefix(llm, tokens))
        if n < gain_from + KEPT_MIN_GAIN or not self.restore(llm, state, ids, n):
            return False
        self.kept.move_to_end(key)
        return True

    def keep(self, llm: Any, key: str | None) -> None:
        """Keep the KV state of the call just made (prompt and output) under ``key``."""
        if key is None or not llm.n_tokens:
            return
        state = self.save(llm)
        if state:
            self.kept[key] = (llm.input_ids[: llm.n_tokens].tolist(), state)
            self.kept.move_to_end(key)
            while (
                len(self.kept) > KEPT_STATES
                or sum(len(v[1]) for v in self.kept.values()) > KEPT_BYTES
            ):
                self.kept.popitem(last=False)  # the newest alone may exceed KEPT_BYTES: it goes too

    def forget_request(self, llm: Any) -> None:
        """Cut the KV cache back to the longest saved system prefix it starts with."""
        cached = llm.input_ids[: llm.n_tokens].tolist()
        keep = max(
            (len(key) for key in self.prefixes if tuple(cached[: len(key)]) == key), default=0
        )
        llm.n_tokens = keep
        llm._ctx.kv_cache_seq_rm(-1, keep, -1)
        llm.evals += 1  # the cache changed: a background call that stepped aside restores its state

    def step_aside(self, llm: Any) -> None:
        """Hand the CPU lock to waiting requests between two forward passes of a background call:
        the model's state (KV cache, tokens, sampler, drafter) is saved first and restored after,
        recomputed if llama.cpp refuses the saved state, so the call's output does not change."""
        n = llm.n_tokens
        ids = llm.input_ids[:n].copy()
        saved = self.save(llm) if n else b""
        kept = (llm.draft_model, llm.spec_window, llm.eval_log, llm._sampler, llm.step_aside)
        passes = llm.evals
        CPU_LOCK.pause()
        if llm.evals == passes:
            return  # the requests used another model (or the embedder): nothing to restore
        llm.draft_model, llm.spec_window, llm.eval_log, llm._sampler, llm.step_aside = kept
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        llm.n_tokens = 0
        if saved and self.load(llm, saved):
            llm.input_ids[:n] = ids
            llm.n_tokens = n
        elif n:  # the saved state did not load: recompute it (slower, same result)
            llm.step_aside = None
            try:
                llm.eval(ids.tolist())
            finally:
                llm.step_aside = kept[4]
