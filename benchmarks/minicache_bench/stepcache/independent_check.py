"""A second opinion on the StepCache micro-benchmark's outputs, sharing no code with the verifier.

StepCache verifies its own outputs with :mod:`.linear` and :mod:`.jsontask`. Scoring the benchmark
with those same functions would let one bug pass twice: a step the verifier misreads would be
served *and* counted correct. This module therefore imports nothing from MiniCache (a test pins
that) and reads every output its own way, against the generator's gold answers:

* **Linear equations.** The unknown and the requested final line are read from the question. Every
  step is tokenized; each maximal run of arithmetic tokens (numbers, the unknown, ``+ - * / ( )``
  and ``=``) that holds an ``=`` is an equation chain, and every side of it is evaluated exactly
  (``fractions.Fraction``) with the gold solution put in for the unknown: all sides must agree
  (within 1/100, steps may show rounded decimals). A side it cannot read fails the output. The last
  line must be the requested line with the gold value.
* **JSON.** The whole response must be one JSON object (a code fence around it is allowed) with
  exactly the gold keys, the types the question lists, and the gold values (strings exactly as in
  the record, numbers as exact decimals).
"""

from __future__ import annotations

import itertools
import json
import re
from fractions import Fraction
from typing import Any

TOLERANCE = Fraction(1, 100)
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([A-Za-z]+)|(\S))")
_OPERATORS = {
    "+": "+",
    "-": "-",
    "−": "-",
    "–": "-",
    "*": "*",
    "×": "*",
    "·": "*",
    "/": "/",
    "÷": "/",
    "(": "(",
    ")": ")",
    "=": "=",
}


def check(task: str, output: Any, question: str, gold: Any) -> tuple[bool, str]:
    """(correct, why not) for one benchmark output."""
    if not isinstance(output, str) or not output.strip():
        return False, "no output"
    if task == "linear":
        return _check_math(output, question, gold)
    return _check_json(output, question, gold)


# ------------------------------------------------------------------------------------------
# Linear equations


def _tokens(text: str, unknown: str) -> list[tuple[str, str]]:
    """(kind, value) per token: num, var, op, or brk (anything that ends an arithmetic run)."""
    out = []
    for number, word, other in _TOKEN.findall(text):
        if number:
            out.append(("num", number))
        elif word:
            out.append(("var", word) if word == unknown else ("brk", word))
        elif other in _OPERATORS:
            out.append(("op", _OPERATORS[other]))
        else:
            out.append(("brk", other))
    return out


def _chains(text: str, unknown: str) -> list[list[tuple[str, str]]]:
    """The arithmetic runs of a line that contain an '=' (prose and punctuation end a run)."""
    runs, current = [], []
    for tok in _tokens(text, unknown) + [("brk", "")]:
        if tok[0] != "brk":
            current.append(tok)
            continue
        if any(t == ("op", "=") for t in current):
            runs.append(_balance(current))
        current = []
    return runs


def _balance(run: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop a bracket that belongs to the prose around the run: '(so 3x = 15)' reads as '3x = 15'."""

    def opens(r: list[tuple[str, str]]) -> int:
        return sum(t == ("op", "(") for t in r) - sum(t == ("op", ")") for t in r)

    while run and run[0] == ("op", "(") and opens(run) > 0:
        run = run[1:]
    while run and run[-1] == ("op", ")") and opens(run) < 0:
        run = run[:-1]
    return run


class _Unreadable(ValueError):
    """A side of an equation that is not arithmetic in the unknown. Control flow inside this module
    (``_holds`` turns it into a verdict); not in minicache.errors, since this module imports nothing
    of MiniCache by design (tests/bench/test_stepcache_bench.py pins that)."""


class _Evaluator:
    """sum := prod (('+'|'-') prod)* ; prod := unary (('*'|'/'|juxtaposition) unary)* ;
    unary := ('+'|'-') unary | number | unknown | '(' sum ')'   -- evaluated at one value."""

    def __init__(self, tokens: list[tuple[str, str]], value: Fraction) -> None:
        self.tokens, self.value, self.pos = tokens, value, 0

    def run(self) -> Fraction:
        if not self.tokens:
            raise _Unreadable("an empty side")
        result = self._sum()
        if self.pos != len(self.tokens):
            raise _Unreadable(f"unexpected {self.tokens[self.pos][1]!r}")
        return result

    def _next(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _sum(self) -> Fraction:
        total = self._prod()
        while self._next() in (("op", "+"), ("op", "-")):
            sign = self.tokens[self.pos][1]
            self.pos += 1
            term = self._prod()
            total = total + term if sign == "+" else total - term
        return total

    def _prod(self) -> Fraction:
        total = self._unary()
        while True:
            tok = self._next()
            if tok in (("op", "*"), ("op", "/")):
                self.pos += 1
                factor = self._unary()
                if tok[1] == "/" and factor == 0:
                    raise _Unreadable("division by zero")
                total = total * factor if tok[1] == "*" else total / factor
            elif tok is not None and (tok[0] in ("num", "var") or tok == ("op", "(")):
                total *= self._unary()  # 3x, 2(x + 1)
            else:
                return total

    def _unary(self) -> Fraction:
        tok = self._next()
        if tok is None:
            raise _Unreadable("the side ends early")
        self.pos += 1
        if tok in (("op", "+"), ("op", "-")):
            inner = self._unary()
            return inner if tok[1] == "+" else -inner
        if tok[0] == "num":
            return Fraction(tok[1])
        if tok[0] == "var":
            return self.value
        if tok == ("op", "("):
            inner = self._sum()
            if self._next() != ("op", ")"):
                raise _Unreadable("a '(' is not closed")
            self.pos += 1
            return inner
        raise _Unreadable(f"unexpected {tok[1]!r}")


def _sides(run: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    sides: list[list[tuple[str, str]]] = [[]]
    for tok in run:
        if tok == ("op", "="):
            sides.append([])
        else:
            sides[-1].append(tok)
    return sides


def _holds(line: str, unknown: str, value: Fraction) -> str | None:
    """None if every equation chain in ``line`` holds at ``value``, else what does not."""
    for run in _chains(line, unknown):
        sides = _sides(run)
        if not all(sides):
            continue  # 'x =' followed by prose: no equation to check
        try:
            values = [_Evaluator(side, value).run() for side in sides]
        except _Unreadable as exc:
            return f"cannot read an equation in {line!r}: {exc}"
        for left, right in itertools.pairwise(values):
            if abs(left - right) > TOLERANCE * max(Fraction(1), abs(right)):
                return f"an equation in {line!r} does not hold at the solution"
    return None


def _final_value(line: str, template: str) -> Fraction | None:
    """The value in ``line`` if it is exactly ``template`` with a number for <value>."""
    before, _, after = template.partition("<value>")
    pattern = (
        r"\s*"
        + r"\s*".join(map(re.escape, before.split()))
        + (r"\s*" if before.strip() else "")
        + r"(-?\d+(?:\.\d+)?(?:/\d+)?)"
        + r"\s*"
        + r"\s*".join(map(re.escape, after.split()))
        + r"\s*\.?\s*"
    )
    m = re.fullmatch(pattern, line)
    if not m:
        return None
    num, _, den = m.group(1).partition("/")
    return Fraction(num) / Fraction(den) if den else Fraction(num)


def _check_math(output: str, question: str, gold: Any) -> tuple[bool, str]:
    m = re.search(r"Solve for ([A-Za-z])\s*:\s*(.*?)\.\s+Show", question)
    fmt = re.search(r"'([^']*<value>[^']*)'", question)
    if not m or not fmt:
        return False, "the question is not a micro-benchmark equation"
    unknown, value = m.group(1), Fraction(str(gold))
    if _holds(m.group(2), unknown, value) is not None:
        return False, "the gold does not solve the question's equation"
    lines = [
        ln.strip() for ln in output.splitlines() if ln.strip() and not ln.strip().startswith("```")
    ]
    if not lines:
        return False, "no lines"
    for line in lines:
        why = _holds(line, unknown, value)
        if why:
            return False, why
    answer = _final_value(lines[-1], fmt.group(1))
    if answer is None:
        return False, f"the last line is not {fmt.group(1)!r}"
    if abs(answer - value) > TOLERANCE:
        return False, f"the final value {answer} is not the gold {value}"
    return True, ""


# ------------------------------------------------------------------------------------------
# JSON


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return kind == "number" or float(value).is_integer()


def _same_number(a: Any, b: Any) -> bool:
    try:
        return Fraction(str(a).strip()) == Fraction(str(b).strip())
    except (ValueError, ZeroDivisionError):
        return False


def _check_json(output: str, question: str, gold: Any) -> tuple[bool, str]:
    body = output.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.S)
    try:
        obj = json.loads(fenced.group(1) if fenced else body)
    except json.JSONDecodeError:
        return False, "not one JSON object"
    if not isinstance(obj, dict) or not isinstance(gold, dict):
        return False, "not a JSON object"
    if sorted(obj) != sorted(gold):
        return False, f"keys {sorted(obj)} are not {sorted(gold)}"
    types = dict(re.findall(r'"(\w+)" \((string|number|integer|boolean)\)', question))
    for key, want in gold.items():
        got = obj[key]
        if key not in types or not _type_ok(got, types[key]):
            return False, f"{key}: {got!r} is not of type {types.get(key, '?')}"
        if isinstance(want, str):
            ok = got.strip() == want.strip() or _same_number(got, want)
        else:
            ok = _same_number(got, want)
        if not ok:
            return False, f"{key}: {got!r} is not {want!r}"
    return True, ""
