"""Segment a response into ordered steps and render steps back into a response.

Worked math: one step per numbered line ("Step 2: ...", "2. ...", "2) ...") or per non-empty line
or paragraph when nothing is numbered; the labels are dropped, so that cached steps can be
renumbered when stitched. A JSON response is one step (the object).
"""

from __future__ import annotations

import re

_LABEL = re.compile(r"^\s*(?:\*\*)?(?:step\s*(\d+)\s*[:.)-]|(\d+)\s*[.):])(?:\*\*)?\s*", re.I)


def segment(text: str, kind: str = "math") -> list[str]:
    """The response's steps, in order, without their labels."""
    text = text.strip()
    if not text:
        return []
    if kind == "json":
        return [text]
    text = re.sub(r"```[a-z]*\n?|```", "", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    steps: list[str] = []
    numbered = any(_LABEL.match(ln) for ln in lines)
    for i, line in enumerate(lines):
        label = _LABEL.match(line)
        body = line[label.end() :].strip() if label else line
        last = i == len(lines) - 1
        if numbered and not label and steps and not last and not _looks_final(line):
            steps[-1] = f"{steps[-1]} {body}"  # a wrapped continuation of the previous step
        elif body:
            steps.append(body)
    return steps


def _looks_final(line: str) -> bool:
    return bool(re.match(r"^\s*(answer|final answer|the solution|\{|[A-Za-z]\s*=)", line, re.I))


def render(steps: list[str], kind: str = "math") -> str:
    """Steps as a response: numbered lines, the last (answer) line unnumbered."""
    if kind == "json":
        return steps[0] if steps else ""
    body = [f"Step {i + 1}: {s}" for i, s in enumerate(steps[:-1])]
    return "\n".join(body + steps[-1:])


def integrity(steps: list[str], text: str, kind: str = "math") -> str | None:
    """The stitched-output check: the rendered response reads back as the same steps."""
    if not steps:
        return "no steps"
    if segment(text, kind) != steps:
        return "the stitched response does not read back as its steps"
    return None
