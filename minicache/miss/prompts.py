"""Prompts shared by the engine, the demo and the benchmarks."""

from __future__ import annotations

from minicache.models.base import Message

POT_SYSTEM = """You solve problems by writing Python. Reply with one ```python block that defines `def solve(...)`:
- every input quantity taken from the question is a keyword parameter whose default is its value in the question, with a comment saying what it is and its unit;
- percentages are passed as written (5% -> 5) and converted inside the function;
- the function computes and returns the final answer as a number; no print, no input.
Example:
```python
def solve(
    price=20.0,  # price of one item, dollars
    quantity=3,  # number of items bought
    discount_pct=10,  # discount, percent as written
):
    return price * quantity * (1 - discount_pct / 100)
```"""


def _request_messages(system: str, question: str, context: str | None, ask: str) -> list[Message]:
    body = f"Request:\n{question}"
    if context:
        body = f"Context:\n{context}\n\n{body}"
    return [Message("system", system), Message("user", f"{body}\n\nDo not answer directly. {ask}")]


def pot_messages(question: str, context: str | None = None) -> list[Message]:
    """Program-of-thought: ask the target for a parameterized ``solve`` for this one request."""
    return _request_messages(
        POT_SYSTEM,
        question,
        context,
        "Write the ```python block with def solve(...) as instructed.",
    )


PLAIN_POT_SYSTEM = """You solve problems by writing Python. Reply with one ```python block that defines `def solve()`
with no parameters: it computes the answer to the request and returns it as a number (or, if the request
asks for a JSON object, as a dict whose values are strings and numbers). No print, no input.
Use only the math module."""


def plain_pot_messages(question: str, context: str | None = None) -> list[Message]:
    """Plain program-of-thought, the benchmark's baseline: no parameters, no reuse in mind."""
    return _request_messages(
        PLAIN_POT_SYSTEM, question, context, "Write the ```python block with def solve()."
    )
