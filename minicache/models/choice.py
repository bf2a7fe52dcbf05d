"""Greedy decoding of a flat JSON object: each value one of a few allowed values, or a short text.

Candidate-choice extraction asks the small model for ``{"a": <one of A>, "b": <one of B>}``, and
an action for ``{"keywords": <text>, "max_price": <one of P>}``. A grammar sampler decodes that one
token at a time, yet most of its tokens are forced: the keys, the punctuation and, once a number's
first digit is chosen, usually the rest of it. Here the forced tokens are batched and the model is
consulted only where the allowed values branch (taking the most likely allowed token there) and
for each token of a text value (the most likely token that keeps the JSON string valid; a token
with a quote ends the text). That is the same greedy, constrained decoding in far fewer forward
passes: on two CPU cores one pass of the 0.5B costs about as much as a batch of several tokens.

The output is always written canonically: ``{"a": 1, "b": "red shoes"}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_TEXT_TOKENS = 64  # a text value longer than this is cut (extraction copies a few words)


@dataclass(frozen=True)
class Field:
    key: str
    allowed: list[Any] | None  # None: free text, a JSON string of at most max_chars characters
    max_chars: int = 200


def object_fields(schema: Any) -> list[Field] | None:
    """The fields if ``schema`` is an object whose properties are all required, in order, each an
    ``enum`` of numbers or strings or a plain ``string``, with no other keys allowed; else None."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, dict) or not props or schema.get("additionalProperties") is not False:
        return None
    if list(schema.get("required") or []) != list(props):
        return None
    fields = []
    for key, spec in props.items():
        if not isinstance(spec, dict):
            return None
        if spec.get("type") == "string" and set(spec) <= {"type", "maxLength"}:
            fields.append(Field(key, None, int(spec.get("maxLength", 200))))
            continue
        values = spec.get("enum")
        if not values or set(spec) != {"enum"} or len(values) > 500:
            return None
        if not all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in values):
            return None
        fields.append(Field(key, list(values)))
    return fields


@dataclass
class _Progress:
    """What one decode has done so far: tokens waiting for the next forward pass, and counts."""

    queue: list[int]
    evals: int = 0
    first: float = 0.0  # seconds of the first forward pass (it carries the prompt)
    out: int = 0  # tokens decoded


@dataclass
class Decoded:
    text: str
    values: dict[str, Any]
    completion_tokens: int
    evals: int  # forward passes (batches) after the prompt
    first_eval_s: float  # the batch that carried the prompt's new tokens (prefill)
    total_s: float
    # Per choice field, the smallest logit gap between the chosen token and the best other allowed
    # token at any point where the allowed values branched (the log-probability margin of the choice;
    # the same softmax normalizes both, so the logit gap is the log-probability gap). Fields whose
    # values never branched (one allowed value) are left out: nothing was chosen.
    margins: dict[str, float] = field(default_factory=dict)


def _text_piece(piece: bytes) -> tuple[bytes, bool] | None:
    """(bytes to keep, ends the string) for a token inside a JSON string, or None if it cannot be
    there: backslashes and control characters are never written (no escapes to get wrong)."""
    if not piece:
        return b"", True  # a special token (end of turn): the text is over
    quote = piece.find(b'"')
    kept = piece if quote < 0 else piece[:quote]
    if b"\\" in kept or any(b < 0x20 for b in kept):
        return None
    return kept, quote >= 0


def decode_object(
    fields: list[Field],
    tokenize: Callable[[str], list[int]],
    eval_tokens: Callable[[list[int]], np.ndarray],
    pending: Sequence[int],
    token_bytes: Callable[[int], bytes] | None = None,
) -> Decoded:
    """Decode the object after ``pending`` (prompt tokens not yet evaluated; at least one).

    ``eval_tokens(batch)`` evaluates a batch and returns the logits after its last token;
    ``token_bytes(id)`` is a token's text (needed only for text fields).
    """
    began = time.perf_counter()
    state = _Progress(list(pending))

    def logits() -> np.ndarray:
        t = time.perf_counter()
        result = eval_tokens(state.queue)
        if state.evals == 0:
            state.first = time.perf_counter() - t
        state.evals += 1
        state.queue = []
        return result

    def push(tokens: list[int]) -> None:
        state.queue += tokens
        state.out += len(tokens)

    values: dict[str, Any] = {}
    margins: dict[str, float] = {}
    for i, spec in enumerate(fields):
        opening = ("{" if i == 0 else " ") + json.dumps(spec.key) + ": "
        end = "}" if i == len(fields) - 1 else ","
        if spec.allowed is None:
            if token_bytes is None:
                raise ValueError("text fields need token_bytes")
            push(tokenize(opening + '"'))
            values[spec.key] = _decode_text(spec, logits, push, token_bytes, tokenize)
            push(tokenize('"' + end))
            continue
        push(tokenize(opening))
        paths = [tokenize(json.dumps(v)) + tokenize(end) for v in spec.allowed]
        index, margin = _decode_choice(paths, logits, push)
        values[spec.key] = spec.allowed[index]
        if margin is not None:
            margins[spec.key] = margin
    return Decoded(
        json.dumps(values),
        values,
        state.out,
        state.evals,
        state.first,
        time.perf_counter() - began,
        margins,
    )


def _decode_choice(
    paths: list[list[int]], logits: Callable[[], np.ndarray], push: Callable[[list[int]], None]
) -> tuple[int, float | None]:
    """The index of one of the allowed values' token ``paths`` and the choice's margin (None if the
    paths never branched): forced tokens are only queued; the model decides where the paths branch."""
    chosen: list[int] = []
    live = list(range(len(paths)))
    margin: float | None = None
    while True:
        if len(live) == 1 or all(paths[j] == paths[live[0]] for j in live):
            push(paths[live[0]][len(chosen) :])
            return live[0], margin
        nexts = sorted({paths[j][len(chosen)] for j in live if len(paths[j]) > len(chosen)})
        if len(nexts) == 1:
            token = nexts[0]
        else:
            scores = logits()[nexts]
            order = np.argsort(scores)[::-1]
            token = nexts[int(order[0])]
            gap = float(scores[order[0]] - scores[order[1]])
            margin = gap if margin is None else min(margin, gap)
        chosen.append(token)
        push([token])
        live = [
            j for j in live if len(paths[j]) >= len(chosen) and paths[j][len(chosen) - 1] == token
        ]


def _decode_text(
    field: Field,
    logits: Callable[[], np.ndarray],
    push: Callable[[list[int]], None],
    token_bytes: Callable[[int], bytes],
    tokenize: Callable[[str], list[int]],
) -> str:
    """Greedy text up to the model's closing quote (or the length limits)."""
    text = b""
    for _ in range(MAX_TEXT_TOKENS):
        scores = logits()
        for token in np.argsort(scores)[::-1][:32]:
            found = _text_piece(token_bytes(int(token)))
            if found is not None:
                break
        else:
            break  # nothing in the top 32 may appear in a JSON string: end it
        kept, ends = found
        if ends:
            if kept:
                text += kept
                push(tokenize(kept.decode("utf-8", errors="ignore")))
            break
        text += kept
        push([int(token)])
        if len(text.decode("utf-8", errors="ignore")) >= field.max_chars:
            break
    return text.decode("utf-8", errors="ignore")[: field.max_chars].strip()
