"""Getting program text out of model output."""

from __future__ import annotations

import re

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str) -> str:
    """The Python code in a model reply: the first fenced block, else the whole reply."""
    blocks = _FENCE.findall(text)
    code = blocks[0] if blocks else text
    return code.strip() + "\n"
