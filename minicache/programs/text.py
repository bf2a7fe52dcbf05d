"""Getting program text out of model output."""

from __future__ import annotations

import re

from minicache.sandbox import parse_source

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
_STRING = re.compile(r"'''|\"\"\"|'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")
_OPEN, _CLOSE = "([{", ")]}"


def extract_code(text: str) -> str:
    """The Python code in a model reply: the first fenced block, else the whole reply, with a
    statement's stray indentation snapped back to its block (:func:`repair_indentation`)."""
    blocks = _FENCE.findall(text)
    code = blocks[0] if blocks else text
    return repair_indentation(code.strip() + "\n")


def repair_indentation(code: str) -> str:
    """``code`` with each statement that sits at no open block's indentation moved to the nearest
    one, when that is what keeps it from parsing; otherwise ``code`` unchanged.

    Why: the 1.5B target writes, now and then, one statement of a function body one space short
    (``"   EAR = (1 + r/n)**n - 1"`` under four-space lines), a tokenization slip, not a program
    error. On Formula it failed every Effective Annual Rate request for PoT and the cache alike. A
    program that parses, or that the snap does not make parse, is returned as it
    came, so the sandbox's gate reports the model's own text. Lines inside brackets, after a
    backslash or inside a triple-quoted string keep their indentation (it means nothing there)."""
    try:
        parse_source(
            code
        )  # one thread at a time, as the sandbox's gate parses (CPython 3.11's AST bug)
        return code
    except IndentationError:  # TabError included
        pass
    except (SyntaxError, ValueError):
        return code
    levels, out = [0], []
    depth, in_string, continued, opens_block = 0, "", False, False
    for line in code.split("\n"):
        body = line.lstrip(" \t")
        statement_start = not in_string and depth == 0 and not continued
        if statement_start and body and not body.startswith("#"):
            indent = len(line[: len(line) - len(body)].expandtabs(4))
            if opens_block and indent > levels[-1]:
                levels.append(indent)
            elif indent not in levels:
                indent = min(levels, key=lambda level: (abs(level - indent), -level))
            while levels[-1] > indent:
                levels.pop()
            line = " " * indent + body
        depth, in_string, continued, ends_colon = _scan(line, depth, in_string)
        if body and not body.startswith("#") and depth == 0 and not in_string and not continued:
            opens_block = (
                ends_colon  # where a logical line ends: a multi-line `def f(a,\n b):` opens one
            )
        out.append(line)
    repaired = "\n".join(out)
    try:
        parse_source(repaired)
    except (SyntaxError, ValueError):
        return code
    return repaired


def _scan(line: str, depth: int, in_string: str) -> tuple[int, str, bool, bool]:
    """Bracket depth, the open triple quote (if any), whether the line continues with a backslash,
    and whether it ends with ``:`` (outside strings and comments), after ``line``."""
    i, text = 0, line
    last = ""
    while i < len(text):
        if in_string:
            end = text.find(in_string, i)
            if end < 0:
                return depth, in_string, False, False
            i, in_string = end + 3, ""
            continue
        ch = text[i]
        if ch == "#":
            break
        m = _STRING.match(text, i)
        if m:
            if m.group() in ("'''", '"""'):
                in_string = m.group()
            i = m.end()
            last = "s"
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        if not ch.isspace():
            last = ch
        i += 1
    continued = text.rstrip().endswith("\\") and "#" not in text
    return depth, in_string, continued, last == ":"
