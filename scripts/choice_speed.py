"""Candidate-choice extraction on the embedded 0.5B: the grammar sampler against the enum decoder.

    .venv/bin/python scripts/choice_speed.py [--rounds 2]

For ten extraction requests (the real-model test's cases, ``minicache.models.extraction_probes``),
the same prompt and the same enum schema (each variable chooses among the numbers written in the
request) are decoded two ways: llama-cpp-python's grammar-constrained sampler, and MiniCache's enum decoder
(``minicache.models.choice``), which batches forced tokens. Each call follows a call with another
prompt (as entries alternate on a busy cache), so both decoders restore the template's saved KV
state and prefill the request. Prints per-call seconds, forward passes and whether both
gave the same object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from minicache.models import GenerationOptions, Message
from minicache.models.extraction_probes import EXTRACT_SYSTEM, EXTRACTION_CASES
from minicache.models.llamacpp import LlamaCppBackend
from minicache.numbers import candidate_values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    small = LlamaCppBackend.embedded("small")
    cases = []
    for question, props, _expected in EXTRACTION_CASES:
        enum = {k: {"enum": candidate_values(question)} for k in props}
        schema = {"type": "object", "properties": enum, "required": list(props), "additionalProperties": False}
        messages = [Message("system", EXTRACT_SYSTEM + " Variables: " + ", ".join(
            f"{k}: {v['description']}" for k, v in props.items())), Message("user", question)]
        cases.append((messages, schema))
    modes = {"grammar": lambda schema: GenerationOptions(max_tokens=120,
                                                         grammar=json_schema_to_gbnf(json.dumps(schema))),
             "enum decoder": lambda schema: GenerationOptions(max_tokens=120, json_schema=schema)}
    other = [Message("system", "Reply OK."), Message("user", "x")]
    for messages, schema in cases:  # warm-up: every template's KV state is saved once
        small.complete(messages, modes["enum decoder"](schema))
    rows: dict[str, list[tuple[float, int]]] = {name: [] for name in modes}
    outs: dict[str, list] = {name: [] for name in modes}
    for _ in range(args.rounds):
        for name, make in modes.items():
            for messages, schema in cases:
                small.complete(other, GenerationOptions(max_tokens=1))  # another prompt in between, as on a busy cache
                t = time.perf_counter()
                out = small.complete(messages, make(schema))
                rows[name].append((time.perf_counter() - t, out.draft.get("forward_passes", out.completion_tokens)))
                outs[name].append(json.loads(out.text))
    same = sum(a == b for a, b in zip(outs["grammar"], outs["enum decoder"], strict=True))  # same cases, same rounds
    n = len(rows["grammar"])
    print(f"{'decoder':14} {'calls':>5} {'mean s':>7} {'p50 s':>6} {'passes':>6}")
    for name, xs in rows.items():
        seconds = [x for x, _ in xs]
        print(f"{name:14} {len(xs):5} {statistics.mean(seconds):7.3f} {statistics.median(seconds):6.3f} "
              f"{statistics.mean(p for _, p in xs):6.1f}")
    print(f"same object from both: {same}/{n}")
    small.close()


if __name__ == "__main__":
    main()
