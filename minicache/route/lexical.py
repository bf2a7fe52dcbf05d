"""The routing embedder: hashed word and word-pair counts of a request's skeleton, no model.

Routing compares *skeletons* (a request with its values masked, :func:`minicache.route.router.skeleton`)
to find the group of requests that need the same computation. Requests of one computation are
written from one template far more often than they are paraphrased, so the words a skeleton keeps,
and which word follows which, already say most of what routing needs. This embedder counts them:
each lower-cased word (a run of letters), digit run and punctuation mark, and each pair of adjacent
ones, is hashed (CRC-32: the same bucket in every process and on every platform, unlike ``hash()``)
into one of :data:`DIM` buckets with a sign taken from the hash (signed feature hashing: two features
sharing a bucket cancel as often as they add, so collisions do not pull unrelated requests
together), and the vector is scaled to unit length. Cosine similarity is then a word-and-pair
overlap score.

Why not the MiniLM sentence embedding that routed before it (still available as ``route_embedder =
"minilm"``, :mod:`minicache.route.embedding`)? It cost 20-50 ms of one core per request, most of
what a miss added to PoT's call. Replayed through routing (docs/routing.md), this one took about 0.1
ms and, at its threshold of 0.82, formed groups as pure as MiniLM's at 0.80 or purer on every stream
tried, in fewer groups on Formula (the 999 packaged requests: 44 groups against 53). What it gives
up is synonymy: two wordings of one computation that share few words land in different groups
(SVAMP: 165 groups against 95), each of which costs its own cold start, never a wrong answer by
itself.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

DIM = 1024  # not 384: a store's MiniLM rows (384 wide) are told apart by width (minicache.route.index)
_TOKEN = re.compile(r"[^\W\d_]+|\d+|[^\w\s]")


def features(text: str) -> list[str]:
    """The words (and digit runs, punctuation marks) of ``text``, lower-cased, then each adjacent pair."""
    words = _TOKEN.findall(text.lower())
    return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


class LexicalEmbedder:
    """``embed(texts) -> (n, DIM)`` unit float32 vectors of signed hashed word and word-pair counts.
    Stateless and thread-safe; an empty text embeds as one ``<empty>`` feature."""

    dim = DIM
    # Calibrated on replays through routing (docs/routing.md): on the 999 packaged
    # Formula requests (50 formulas) as pure as MiniLM at its 0.80, in fewer groups (44 against 53).
    route_threshold = 0.82

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for feature in features(text) or ["<empty>"]:
                h = zlib.crc32(feature.encode("utf-8"))
                out[i, h % DIM] += 1.0 if h & 0x80000000 else -1.0
            norm = float(np.linalg.norm(out[i]))
            if norm == 0.0:  # every feature cancelled against another in its bucket
                out[i, 0] = 1.0
            else:
                out[i] /= norm
        return out
