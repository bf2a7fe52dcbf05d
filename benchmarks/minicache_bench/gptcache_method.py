"""``gptcache``: the real GPTCache library (``gptcache==0.1.44``) in front of pot, beside our
re-implementation ``gptcache-like``, so that a user choosing between the two sees the library itself.

It is GPTCache as its quick start sets it up: ``init_similar_cache`` with its SQLite cache base and
faiss vector base, its default similarity evaluation (``SearchDistanceEvaluation``) and threshold
(``Config().similarity_threshold``, 0.8), and its ``put``/``get`` API (its OpenAI adapter is written
for openai<1). Only the embedder is ours: the MiniLM sentence embedding the other caches use, since
GPTCache's default ONNX model downloads its weights from a hub at run time. Every package GPTCache
would pip-install on first use (SQLAlchemy, faiss-cpu) is pinned in the benchmark's dependencies.

A miss asks pot and puts the prompt and its answer; a hit is whatever ``get`` returns.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from minicache.route.router import Embedder
from minicache_bench.baselines import Outcome, PoT, _prompt_text
from minicache_bench.data import BenchRequest


def _embedding(embedder: Embedder) -> Any:
    """``embedder`` as a GPTCache ``BaseEmbedding`` (one text in, one vector out)."""
    from gptcache.embedding.base import BaseEmbedding  # type: ignore[import-untyped]

    class Embedding(BaseEmbedding):
        def __init__(self) -> None:
            self.size = int(embedder.embed(["dimension"]).shape[1])

        def to_embeddings(self, data: str, **_: Any) -> np.ndarray:
            return np.asarray(embedder.embed([data])[0], dtype=np.float32)

        @property
        def dimension(self) -> int:
            return self.size

    return Embedding()


class GPTCache:
    """pot behind GPTCache's own similar cache (SQLite + faiss, its evaluation and threshold).

    ``data_dir`` holds GPTCache's files; it starts empty, as every method's cache does (a chunked
    run's earlier chunks are put again by ``resume``, as ``gptcache-like`` refills its own)."""

    name = "gptcache"

    def __init__(self, pot: PoT, embedder: Embedder, data_dir: str | None = None) -> None:
        from gptcache import Cache  # type: ignore[import-untyped]
        from gptcache.adapter import api  # type: ignore[import-untyped]

        self.pot = pot
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="gptcache-"))
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        self.cache = Cache()
        self.api = api  # put and get
        api.init_similar_cache(
            data_dir=str(self.data_dir), cache_obj=self.cache, embedding=_embedding(embedder)
        )
        self.library = f"gptcache=={version('gptcache')}"
        self._lock = threading.Lock()  # GPTCache's SQLite session and faiss index are shared

    def _put(self, r: BenchRequest, answer: Any) -> None:
        with self._lock:
            self.api.put(
                _prompt_text(r)[-2000:], json.dumps(answer, default=str), cache_obj=self.cache
            )

    def resume(
        self, done: list[tuple[BenchRequest, dict[str, Any]]], tail: dict[str, Any] | None = None
    ) -> None:
        """Put again every answered miss of an earlier chunk's rows (hits put nothing)."""
        for r, row in done:
            if row.get("route") == "miss" and row.get("answer") is not None:
                self._put(r, row["answer"])

    def solve(self, r: BenchRequest) -> Outcome:
        with self._lock:
            cached = self.api.get(_prompt_text(r)[-2000:], cache_obj=self.cache)
        if cached is not None:
            return Outcome(json.loads(cached), "hit", detail={"library": self.library})
        out = self.pot.solve(r)
        if out.answer is not None:
            self._put(r, out.answer)
        out.detail["library"] = self.library
        return out
