"""What the llama.cpp backend needs before it runs: the import with a clear error, the thread
count, a schema fix for llama-cpp-python's grammar converter, and the ``Llama`` subclass whose
``eval`` records its batches and yields to waiting requests (kept apart from
:mod:`.llamacpp` so that module stays about calls, caches and stepping aside)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from minicache.errors import BackendError
from minicache.models.base import CPU_LOCK


def import_llama():
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise BackendError(
            "llama-cpp-python is not installed: run `make setup` (it builds llama-cpp-python==0.3.36)."
        ) from exc
    return llama_cpp


def default_threads() -> int:
    env = os.environ.get("MINICACHE_THREADS")
    if env:
        return max(1, int(env))
    return max(
        1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )


def fix_schema_patterns(schema: Any) -> Any:
    """Rewrite ``\\.`` as ``[.]`` inside ``pattern`` strings.

    llama-cpp-python 0.3.36's schema-to-grammar converter mishandles an escaped dot in a regex
    pattern; a one-character class means the same thing and converts correctly.
    """
    if isinstance(schema, dict):
        return {
            k: (
                re.sub(r"\\\.", "[.]", v)
                if k == "pattern" and isinstance(v, str)
                else fix_schema_patterns(v)
            )
            for k, v in schema.items()
        }
    if isinstance(schema, list):
        return [fix_schema_patterns(v) for v in schema]
    return schema


def make_llama_class(llama_cpp: Any) -> type:
    class _TimedLlama(llama_cpp.Llama):
        """``Llama`` whose ``eval`` records its batches and asks for logits only where needed.

        Speculative verification needs logits at every drafted position, but asking for logits at
        *every* position (``logits_all``) would also pay for them across the whole prompt. Here only
        the last ``spec_window`` positions of each batch get logits: the draft plus the token before.
        """

        spec_window = 1
        step_aside: Callable[[], None] | None = None  # set while a background thread generates
        evals = 0

        def eval(self, tokens: Sequence[int]) -> None:
            self.evals += 1
            self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
            began = time.perf_counter()
            for start in range(0, len(tokens), self.n_batch):
                # Before every batch, not only every call: a build's prompt of a few thousand tokens
                # is one call, and a request behind it would wait for all of it (a hit was seen
                # waiting 31 s). Between batches the state is whole (n_tokens, input_ids and the KV
                # cache agree), so a request can use the model and the state is restored, as
                # between calls.
                if self.step_aside is not None and CPU_LOCK.should_yield():
                    self.step_aside()  # a request waits: let it compute, then carry on where we were
                chunk = list(tokens[start : start + self.n_batch])
                self._batch.set_batch(batch=chunk, n_past=self.n_tokens, logits_all=False)
                for i in range(max(0, len(chunk) - self.spec_window), len(chunk)):
                    self._batch.batch.logits[i] = True
                self._ctx.decode(self._batch)
                self.input_ids[self.n_tokens : self.n_tokens + len(chunk)] = chunk
                self.n_tokens += len(chunk)
                self._requires_eval = False
            self.eval_log.append((len(tokens), time.perf_counter() - began))

    return _TimedLlama
