"""Time the routing embedding (the most of what minicache adds to a miss) on the SVAMP questions.

usage: python scripts/embed_timing.py [--limit N]

Embeds each question alone, as routing does, on one BLAS thread, with the packed forward that
routing uses (``MiniLMEmbedder``) and with the plain BERT forward it replaced
(``minicache.embedding.reference_forward``), interleaved question by question so that the machine's
drift affects both alike. Prints mean, p50 and p99 per forward.
"""

from __future__ import annotations

import argparse
import statistics
import time

from minicache.blas import one_blas_thread
from minicache.datasets import svamp
from minicache.embedding import MiniLMEmbedder, load_weights, reference_forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=300, help="questions to embed (default 300)")
    args = parser.parse_args()
    embedder, weights = MiniLMEmbedder(), load_weights()
    questions = [r.question for r in svamp()][:args.limit]
    ids = [embedder.tokenizer.encode(q).ids for q in questions]
    forwards = {"plain": lambda i: reference_forward(weights, i), "packed": embedder._forward}
    seconds: dict[str, list[float]] = {name: [] for name in forwards}
    with one_blas_thread():
        for tokens in ids[:5]:  # warm-up
            for forward in forwards.values():
                forward(tokens)
        for tokens in ids:
            for name, forward in forwards.items():
                start = time.perf_counter()
                forward(tokens)
                seconds[name].append(time.perf_counter() - start)
    print(f"{len(ids)} SVAMP questions, {statistics.mean(map(len, ids)):.0f} tokens on average, one at a time")
    for name, ts in seconds.items():
        ts.sort()
        print(f"{name:7s} mean {statistics.mean(ts) * 1000:.1f} ms  p50 {ts[len(ts) // 2] * 1000:.1f} ms  "
              f"p99 {ts[int(len(ts) * 0.99)] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
