"""Would routing hide behind the target's call? Time the target writing SVAMP programs alone and with
the routing embedding of the same question running on another thread as the call starts.

usage: python scripts/overlap_timing.py [--limit N]

Each question: the target's plain-PoT call alone, then with the routing embedding's forward started
on a second thread at the same moment (the forward alone: ``MiniLMEmbedder.embed`` takes the CPU lock
that the target's call holds, so inside minicache the two cannot overlap today). The order alternates
per question, the KV cache is reset before each call, and greedy decoding writes the same tokens
both times. Prints the mean call time of each, the paired difference's standard error and the
embedding's time beside the call. A measurement for issue 18: routing is most of what a miss adds on
SVAMP.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from minicache.blas import one_blas_thread
from minicache.datasets import svamp
from minicache.embedding import MiniLMEmbedder
from minicache.models.base import GenerationOptions, set_real_models_allowed
from minicache.models.llamacpp import LlamaCppBackend
from minicache.prompts import plain_pot_messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20, help="questions (default 20)")
    args = parser.parse_args()
    set_real_models_allowed(True)
    target, embedder = LlamaCppBackend.embedded("target"), MiniLMEmbedder()
    options = GenerationOptions(max_tokens=640, temperature=0.0)
    questions = [r.question for r in svamp()][:args.limit]
    target.warm_up(plain_pot_messages("What is 2 + 3?"))
    alone: list[float] = []
    overlapped: list[float] = []
    embed_s: list[float] = []

    def call(question: str, with_embedding: bool) -> float:
        target.forget_request()  # no call finds the last one's prompt computed
        worker = None
        began = time.perf_counter()
        if with_embedding:
            def run() -> None:
                t = time.perf_counter()
                with one_blas_thread():  # embed() without its CPU_LOCK, which the target's call holds
                    embedder._forward(embedder.tokenizer.encode(question).ids)
                embed_s.append(time.perf_counter() - t)
            worker = threading.Thread(target=run)
            worker.start()
        target.complete(plain_pot_messages(question), options)
        if worker is not None:
            worker.join()
        return time.perf_counter() - began

    for i, q in enumerate(questions):
        for overlap in ((False, True) if i % 2 == 0 else (True, False)):
            (overlapped if overlap else alone).append(call(q, overlap))
    a, o, e = statistics.fmean(alone), statistics.fmean(overlapped), statistics.fmean(embed_s)
    paired = [y - x for x, y in zip(alone, overlapped, strict=True)]
    se = statistics.stdev(paired) / len(paired) ** 0.5 if len(paired) > 1 else float("nan")
    print(f"{len(questions)} SVAMP questions: target alone {a:.3f} s, with the embedding beside it {o:.3f} s "
          f"(+{(o - a) * 1000:.1f} ms, paired standard error {se * 1000:.1f} ms); the embedding on its "
          f"own thread took {e * 1000:.1f} ms")
    print("overlapping pays only if the call grows by less than the embedding costs on its own before the call "
          "(scripts/embed_timing.py)")
    target.close()


if __name__ == "__main__":
    main()
