"""Decode speed of one llama-cpp-python build: prompt tokens/s and generated tokens/s.

Run it with the interpreter of the build to measure (each venv holds one build), e.g. the portable
build of `make setup` against a native build in another venv, alternating so drift hits both:

    .venv/bin/python scripts/decode_speed.py --label portable --rounds 1
    /tmp/venv-native/bin/python scripts/decode_speed.py --label native --rounds 1

Needs only llama_cpp (no minicache import), so a bare venv with one wheel is enough. The prompts
are fixed program-of-thought requests; decoding is greedy with a fixed token count, so both builds
do the same work. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

PROMPTS = [
    "Write a Python function solve() that returns the current ratio if current assets are $45,000 "
    "and current liabilities are $30,000.",
    "Write a Python function solve() that returns the simple interest on $12,000 at 5% per year for 3 years.",
    "Write a Python function solve() that returns the debt-to-equity ratio if total debt is $250,000 "
    "and shareholders' equity is $1,000,000.",
    "Write a Python function solve() that returns the gross margin in percent if revenue is $80,000 "
    "and cost of goods sold is $52,000.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="name of the build in the output")
    parser.add_argument("--model", default=None, help="GGUF path (default: the embedded target)")
    parser.add_argument("--tokens", type=int, default=96, help="tokens generated per prompt")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the prompts")
    args = parser.parse_args()

    import llama_cpp

    models = Path(os.environ.get("MINICACHE_MODELS_DIR", Path.home() / ".cache/minicache/models"))
    model = args.model or str(models / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    threads = len(os.sched_getaffinity(0))
    llm = llama_cpp.Llama(model_path=model, n_ctx=1024, n_threads=threads, verbose=False)
    prompt_tps, gen_tps = [], []
    for _ in range(args.rounds):
        for text in PROMPTS:
            tokens = llm.tokenize(text.encode())
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(tokens)
            t1 = time.perf_counter()
            prompt_tps.append(len(tokens) / (t1 - t0))
            n = 0
            t2 = time.perf_counter()
            for _tok in llm.generate(tokens, temp=0.0):  # the evaluated prompt is reused as a prefix
                n += 1
                if n >= args.tokens:
                    break
            gen_tps.append(n / (time.perf_counter() - t2))
    info = llama_cpp.llama_print_system_info()
    info = info.decode() if isinstance(info, bytes) else str(info)
    print(json.dumps({
        "label": args.label, "model": Path(model).name, "threads": threads,
        "prompt_tok_s_median": round(statistics.median(prompt_tps), 1),
        "gen_tok_s_median": round(statistics.median(gen_tps), 1),
        "samples": len(gen_tps), "load_avg": os.getloadavg(),
        "features": sorted(p.split("=")[0].strip() for p in info.replace("CPU :", "|").split("|")
                           if p.strip().endswith("= 1")),
    }))


if __name__ == "__main__":
    main()
