"""Drafters for speculative decoding on the in-process llama.cpp backend.

llama-cpp-python's ``Llama.generate`` already verifies drafted tokens greedily: it evaluates the
last sampled token plus the draft in one batch, samples at each position and keeps the drafted
tokens up to the first disagreement. A drafter only has to propose tokens. We supply two:

* :class:`SmallModelDrafter` - the small model (same tokenizer) greedily continues the sequence.
* :class:`LookupDrafter` - n-gram lookup in a supplied reference text, such as the stored program
  of the same cache group ("cache-drafted" speculation), then in the prompt itself.

Both count what they proposed so that the backend can report the acceptance rate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from llama_cpp.llama_speculative import LlamaDraftModel

if TYPE_CHECKING:
    from llama_cpp import Llama


class _CountingDrafter(LlamaDraftModel):
    def __init__(self) -> None:
        self.calls = 0
        self.proposed = 0

    def _record(self, draft: npt.NDArray[np.intc]) -> npt.NDArray[np.intc]:
        self.calls += 1
        self.proposed += int(draft.shape[0])
        return draft


class SmallModelDrafter(_CountingDrafter):
    """Greedy k-token continuation from a small model that shares the target's tokenizer.

    ``Llama.generate`` reuses the small model's KV cache for the common prefix, so each call only
    evaluates the tokens the target accepted since the last call plus the ``k`` new draft tokens.
    """

    def __init__(self, small: Llama, k: int = 4) -> None:
        super().__init__()
        self.small = small
        self.k = k

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
        out: list[int] = []
        eos = self.small.token_eos()
        for token in self.small.generate(input_ids.tolist(), temp=0.0, top_k=1, reset=True):
            if token == eos:
                break
            out.append(token)
            if len(out) >= self.k:
                break
        return self._record(np.array(out, dtype=np.intc))


class LookupDrafter(_CountingDrafter):
    """Propose the continuation of the longest recent n-gram found in a reference token sequence.

    The reference (a cached program, say) is searched first, preferring matches at or after the
    previous match so that drafting walks through the reference in order; the already generated
    sequence (prompt and output) is the second source, as in prompt-lookup decoding.
    """

    def __init__(self, reference: list[int], max_ngram: int = 3, num_pred: int = 8) -> None:
        super().__init__()
        self.reference = np.array(reference, dtype=np.intc)
        self.max_ngram = max_ngram
        self.num_pred = num_pred
        self._cursor = 0

    @staticmethod
    def _matches(
        haystack: npt.NDArray[np.intc], needle: npt.NDArray[np.intc]
    ) -> npt.NDArray[np.intp]:
        n = needle.shape[0]
        if haystack.shape[0] <= n:
            return np.array([], dtype=np.intp)
        windows = np.lib.stride_tricks.sliding_window_view(haystack[:-1], n)
        return np.nonzero(np.all(windows == needle, axis=1))[0]

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
        for n in range(min(self.max_ngram, input_ids.shape[0]), 0, -1):
            needle = input_ids[-n:]
            hits = self._matches(self.reference, needle)
            if hits.size:
                later = hits[hits >= self._cursor]
                start = int((later if later.size else hits)[0]) + n
                self._cursor = start
                return self._record(self.reference[start : start + self.num_pred].copy())
            hits = self._matches(input_ids, needle)
            if hits.size and n >= 2:
                start = int(hits[-1]) + n
                return self._record(input_ids[start : start + self.num_pred].copy())
        return self._record(np.array([], dtype=np.intc))
