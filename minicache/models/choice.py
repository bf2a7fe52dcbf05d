"""Greedy decoding of a flat JSON object whose every value is one of a few allowed values.

Candidate-choice extraction asks the small model for ``{"a": <one of A>, "b": <one of B>}``. A
grammar sampler decodes that one token at a time, yet most of its tokens are forced: the keys, the
punctuation and, once a number's first digit is chosen, usually the rest of it. Here the forced
tokens are batched and the model is consulted only where the allowed values branch, taking the most
likely allowed token there. That is the same greedy, constrained choice in far fewer forward
passes (on two CPU cores each pass of the 0.5B costs about as much as a batch of several tokens).

The output is always written canonically: ``{"a": 1, "b": 2.5}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def enum_fields(schema: Any) -> list[tuple[str, list[Any]]] | None:
    """``[(key, allowed values)]`` if ``schema`` is an object whose properties are all required,
    in order, each an ``enum`` of numbers or strings, with no other keys allowed; else None."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, dict) or not props or schema.get("additionalProperties") is not False:
        return None
    if list(schema.get("required") or []) != list(props):
        return None
    fields = []
    for key, spec in props.items():
        values = spec.get("enum") if isinstance(spec, dict) else None
        if not values or set(spec) != {"enum"} or len(values) > 500:
            return None
        if not all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in values):
            return None
        fields.append((key, list(values)))
    return fields


@dataclass
class Decoded:
    text: str
    values: dict[str, Any]
    completion_tokens: int
    evals: int  # forward passes (batches) after the prompt
    first_eval_s: float  # the batch that carried the prompt's new tokens (prefill)
    total_s: float


def decode_enum_object(fields: list[tuple[str, list[Any]]], tokenize: Callable[[str], list[int]],
                       eval_tokens: Callable[[list[int]], np.ndarray], pending: Sequence[int]) -> Decoded:
    """Decode the object after ``pending`` (prompt tokens not yet evaluated; at least one).

    ``eval_tokens(batch)`` evaluates a batch and returns the logits after its last token.
    """
    began = time.perf_counter()
    queue = list(pending)
    out_tokens = 0
    evals = 0
    first_eval_s = 0.0
    values: dict[str, Any] = {}
    for i, (key, allowed) in enumerate(fields):
        head = tokenize(("{" if i == 0 else " ") + json.dumps(key) + ": ")
        end = tokenize("}" if i == len(fields) - 1 else ",")
        paths = [tokenize(json.dumps(v)) + end for v in allowed]
        queue += head
        out_tokens += len(head)
        chosen: list[int] = []
        live = list(range(len(paths)))
        while True:
            if len(live) == 1 or all(paths[j] == paths[live[0]] for j in live):
                rest = paths[live[0]][len(chosen):]
                queue += rest
                out_tokens += len(rest)
                break
            nexts = sorted({paths[j][len(chosen)] for j in live if len(paths[j]) > len(chosen)})
            if len(nexts) == 1:
                token = nexts[0]
            else:
                t = time.perf_counter()
                logits = eval_tokens(queue)
                if evals == 0:
                    first_eval_s = time.perf_counter() - t
                evals += 1
                queue = []
                token = nexts[int(np.argmax(logits[nexts]))]
            chosen.append(token)
            queue.append(token)
            out_tokens += 1
            live = [j for j in live if len(paths[j]) > len(chosen) - 1 and paths[j][len(chosen) - 1] == token]
        values[key] = allowed[live[0]]
    text = json.dumps(values)
    return Decoded(text, values, out_tokens, evals, first_eval_s, time.perf_counter() - began)
