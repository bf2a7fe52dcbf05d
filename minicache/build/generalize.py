"""The target's generalization: asked to turn a group's worked examples into one parameterized
program, when none of the group's own programs makes a trusted entry."""

from __future__ import annotations

from minicache.models.base import GenerationOptions, Message, ModelBackend
from minicache.programs.text import extract_code
from minicache.store.base import Example

BUILD_SYSTEM = """You turn worked examples into one reusable Python function.
All examples ask for the same computation with different values. Write `def solve(...)` whose keyword
parameters are the inputs that change between requests: the defaults are the FIRST example's values, and each
parameter has a comment on its line saying exactly what it is, its unit and its convention
(e.g. "annual rate, percent as written: 5% -> 5"). Return the final number. Use only the math module.
Reply with one ```python block."""


def build_messages(examples: list[Example], feedback: str | None = None) -> list[Message]:
    parts = []
    for i, ex in enumerate(examples, 1):
        context = f"Context: {ex.context[:1500]}\n" if ex.context else ""
        parts.append(
            f"Example {i}:\nRequest: {ex.question}\n"
            + context
            + f"Program that answered it:\n```python\n{ex.program.strip()}\n```\nAnswer: {ex.answer}"
        )
    body = "\n\n".join(parts)
    if feedback:
        body += f"\n\nYour previous attempt failed validation:\n{feedback}\nFix it."
    return [Message("system", BUILD_SYSTEM), Message("user", body)]


def generalize(
    target: ModelBackend, examples: list[Example], feedback: str | None = None
) -> tuple[str, int]:
    """Ask ``target`` for a generalized program; returns (source, target tokens used)."""
    out = target.complete(build_messages(examples, feedback), GenerationOptions(max_tokens=600))
    return extract_code(out.text), out.prompt_tokens + out.completion_tokens
