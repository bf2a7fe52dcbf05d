"""Lift a plain program-of-thought program into a parameterized one, without a model.

The miss path asks the target for the same plain PoT program the baseline gets (``def solve():``
with the request's numbers written into it), because that is what a small target writes best. To
reuse such a program for the next request of its group, the numbers that came from the request
must become inputs. :func:`lift` does that mechanically:

* every numeric literal of ``solve`` whose value is a number written in the request (after the
  group's shared boilerplate) becomes a keyword parameter whose default is that number;
* a literal equal to a written percentage divided by 100 (``0.08`` for "8%") becomes a parameter
  that takes the percentage as written (``8``) and is divided by 100 inside the function, so that
  the value to extract is always one that the request shows;
* a literal assigned to a name at the top of ``solve`` (``discount_rate = 0.08  # annual``) gives
  the parameter that name and its comment; a literal written inline gets a name and description
  from the words before the number in the request;
* other literals (the ``1`` of ``1 + r``, a ``12`` months-per-year) stay constants.

The result is a candidate entry like any other: the engine trusts it only after the real hit path
reproduces held examples. A lifted program of one example can also check another example without
any model: lifting that example's own program gives its values under the same names, and running
the candidate on them must give that example's answer (:func:`own_values`).
"""

from __future__ import annotations

import ast
import keyword
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from minicache.errors import ProgramShapeError
from minicache.programs.numbers import Candidate, find_candidates
from minicache.programs.signature import comments_by_line, parse_signature
from minicache.sandbox import SandboxViolation, check_program

# A string variable whose description says this was lifted from the request's own words (see
# this module); an extracted value for it must be made of the request's words too.
REQUEST_WORDS = "words taken from the request"

# Inline literals with these values are almost always structural (1 + r, x * 100, n - 0), not inputs.
_STRUCTURAL = {0, 1, -1, 100}
_UNITS = set(
    "years months days weeks quarters periods hours minutes shares units items people employees times "
    "installments payments".split()
)
# Descriptions end with the value in the request it was lifted from: "(in the example: '...')".
EXAMPLE_MARK = "(in the example: "
_PCT = re.compile(r"%|percent", re.I)
_WORD = re.compile(r"[a-z]+")
_STOP = set(
    "a an the and or of for is are was were be by at to in on with from as if its it this that what "
    "how much many per each given has have had will would which who year years".split()
)


@dataclass
class Lifted:
    """A parameterized program and the values it was lifted with (the request's own values)."""

    program: str
    defaults: dict[str, Any]


def _number(node: ast.AST) -> float | int | None:
    """The value of a numeric literal (``5``, ``-0.08``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value
    return None


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _match(value: float, cands: list[Candidate], used: set[int]) -> tuple[Candidate, bool] | None:
    """The written number ``value`` comes from: (candidate, is_percent_over_100). Exact values first;
    among equal values ("5%" and "5 years"), the first one not yet given to a parameter."""
    exact = [(c, False) for c in cands if _same(value, c.value)]
    pct = [(c, True) for c in cands if _PCT.search(c.text) and _same(value, c.value / 100)]
    for options in (exact, pct):
        if options:
            return next((o for o in options if o[0].start not in used), options[0])
    return None


def _words_for(text: str, cand: Candidate, n: int = 3) -> list[str]:
    """Words that name the value: a unit right after it ("4 years"), else the last few content
    words before it ("annual cash inflows of $6,000")."""
    after = re.match(r"\s*([a-z]+)", text[cand.end : cand.end + 20].lower())
    if after and after.group(1) in _UNITS:
        return [after.group(1)]
    window = text[max(0, cand.start - 60) : cand.start].lower()
    words = _WORD.findall(window)
    if cand.start > 60 and words and re.match(r"[a-z]", window):  # the window cut its first word
        words = words[1:]
    return [w for w in words if w not in _STOP][-n:]


def _identifier(words: list[str], taken: set[str]) -> str:
    base = "_".join(words) or "value"
    if not base.isidentifier() or keyword.iskeyword(base):
        base = f"value_{base}" if base.isidentifier() else "value"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _snippet(text: str, cand: Candidate) -> str:
    """A few words around the value in the request, as written ("cash inflows of $6,000 for 4")."""
    start = cand.start
    for _ in range(5):  # back over five words
        prev = text.rfind(" ", 0, max(0, start - 1))
        if prev < 0 or cand.start - prev > 40:
            break
        start = prev + 1
    end = cand.end
    for _ in range(2):  # on over two
        nxt = text.find(" ", end + 1)
        if nxt < 0 or nxt - cand.end > 20:
            break
        end = nxt
    return " ".join(text[start:end].split())


class _Lifter:
    """The state of one lift: the request's numbers and words, and the parameters made so far."""

    def __init__(self, text: str, comments: dict[int, str], taken: set[str]) -> None:
        self.text, self.comments, self.taken = text, comments, taken
        self.cands = find_candidates(text)
        self.words = set(_WORD.findall(text.lower()))
        self.params: list[tuple[str, Any, str]] = []  # (name, default, description)
        self.by_source: dict[
            Any, str
        ] = {}  # (candidate start, percent form) or the string -> parameter

    def _name(self, hint: str | None, words: list[str], pct: bool) -> str:
        if hint and not pct and all(hint != p[0] for p in self.params):
            self.taken.add(hint)
            return hint
        return _identifier(words + (["pct"] if pct else []), self.taken)

    def number(self, value: float, hint: str | None, line: int) -> ast.expr | None:
        """The expression that replaces the literal ``value`` (a parameter, or parameter / 100)."""
        found = _match(value, self.cands, {k[0] for k in self.by_source if isinstance(k, tuple)})
        if found is None:
            return None
        cand, pct = found
        key = (cand.start, pct)
        if key not in self.by_source:
            words = hint.split("_") if hint else _words_for(self.text, cand)
            name = self._name(hint, words, pct)
            what = self.comments.get(line) or " ".join(words) or "value"
            if pct:
                what += ", percent as written (8% -> 8)"
            self.params.append(
                (name, cand.value, f"{what} {EXAMPLE_MARK}'{_snippet(self.text, cand)}')")
            )
            self.by_source[key] = name
        expr: ast.expr = ast.Name(self.by_source[key], ast.Load())
        return ast.BinOp(expr, ast.Div(), ast.Constant(100)) if pct else expr

    def string(self, value: str, hint: str | None, line: int) -> ast.expr | None:
        """A string literal made of the request's own words (search keywords, a name) becomes a
        string parameter; any other string stays. (The extracted value is checked the same way:
        :func:`minicache.hit.extraction.check_grounded`.)"""
        words = _WORD.findall(value.lower())
        if not any(len(w) >= 3 for w in words) or not all(w in self.words for w in words):
            return None
        if value not in self.by_source:
            name = self._name(hint, [hint or "text"], False)
            what = self.comments.get(line) or (hint or "text").replace("_", " ")
            # No example value here: the small model copies it instead of reading the request.
            self.params.append((name, value, f"{what}, {REQUEST_WORDS}"))
            self.by_source[value] = name
        return ast.Name(self.by_source[value], ast.Load())

    def literal(self, node: ast.AST, hint: str | None, *, inline: bool) -> ast.expr | None:
        value = _number(node)
        line = getattr(node, "lineno", 0)
        if (
            value is None
            and hint
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
        ):
            try:  # {"max_price": "20.00"}: a number written as a string (answers read it as a number)
                value = float(node.value.replace(",", ""))
            except ValueError:
                pass
        if value is not None:
            return None if inline and value in _STRUCTURAL else self.number(value, hint, line)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (hint or not inline):
            return self.string(node.value, hint, line)
        if (
            hint
            and isinstance(node, ast.List)
            and node.elts
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
        ):
            # ["easy to carry", "toothbrush"]: one text parameter, split back into words
            text = self.string(" ".join(e.value for e in node.elts), hint, line)  # type: ignore[attr-defined]
            if text is not None:
                return ast.Call(ast.Attribute(text, "split", ast.Load()), [], [])
        return None


class _Inline(ast.NodeTransformer):
    """Replaces the literals written inside expressions."""

    def __init__(self, lifter: _Lifter) -> None:
        self.lifter = lifter

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        return self.lifter.literal(node, None, inline=True) or self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return self.lifter.literal(node, None, inline=True) or node

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        # {"max_price": 40.0, "keywords": "red shoes"}: a value is named after its key; keys stay.
        for i, (key, value) in enumerate(zip(node.keys, node.values, strict=True)):
            hint = (
                key.value
                if isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and key.value.isidentifier()
                else None
            )
            replaced = self.lifter.literal(value, hint, inline=True) if hint else None
            node.values[i] = replaced or self.visit(value)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        # round(x, 2): the digits are presentation, never an input.
        if isinstance(node.func, ast.Name) and node.func.id == "round" and len(node.args) == 2:
            node.args[0] = self.visit(node.args[0])
            return node
        return self.generic_visit(node)


def lift(source: str, text: str) -> Lifted | None:
    """``source``'s plain ``solve()`` with the request's values as keyword parameters, or None if
    ``source`` is not a plain ``solve()`` or none of its literals is a value written in ``text``."""
    try:
        tree = check_program(source)
    except SandboxViolation:
        return None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "solve"]
    if not funcs:
        return None
    fn = funcs[0]
    a = fn.args
    if a.args or a.kwonlyargs or a.vararg or a.kwarg or a.posonlyargs:
        return None  # already takes parameters: nothing to lift (parse_signature reads it)
    lifter = _Lifter(
        text,
        comments_by_line(source),
        {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {"math"},
    )
    # 1. ``name = <literal>`` at the top of solve: the parameter takes the name (and its comment).
    body: list[ast.stmt] = []
    for stmt in fn.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            name = stmt.targets[0].id
            expr = lifter.literal(stmt.value, name, inline=False)
            if expr is not None:
                if not (isinstance(expr, ast.Name) and expr.id == name):  # name = name_pct / 100
                    body.append(ast.Assign([ast.Name(name, ast.Store())], expr, lineno=stmt.lineno))
                continue
        body.append(stmt)
    # 2. Literals written inline.
    fn.body = [_Inline(lifter).visit(s) for s in body] or [ast.Pass()]
    if not lifter.params:
        return None
    ast.fix_missing_locations(tree)
    header = (
        "def solve(\n"
        + "".join(
            f"    {name}={default!r},  # {' '.join(desc.split())}\n"
            for name, default, desc in lifter.params
        )
        + "):\n"
    )
    body_src = ast.unparse(ast.Module(fn.body, type_ignores=[]))
    function = header + "".join(f"    {line}\n" if line else "\n" for line in body_src.splitlines())
    before = [n for n in tree.body if n is not fn and n.lineno < fn.lineno]
    after = [n for n in tree.body if n is not fn and n.lineno > fn.lineno]
    parts = [ast.unparse(ast.Module(before, type_ignores=[]))] if before else []
    parts.append(function.rstrip("\n"))
    if after:
        parts.append(ast.unparse(ast.Module(after, type_ignores=[])))
    program = "\n\n".join(parts) + "\n"
    try:
        check_program(program)
    except SandboxViolation:
        return None
    return Lifted(program, {name: default for name, default, _ in lifter.params})


def program_inputs(source: str, text: str) -> dict[str, Any]:
    """The request's values a program uses: its parameters' defaults if it has parameters, else the
    values lifting finds in ``text`` ({} if none)."""
    try:
        return parse_signature(source).defaults
    except ProgramShapeError:
        lifted = lift(source, text)
        return lifted.defaults if lifted else {}


def own_values(names: Iterable[str], source: str, text: str) -> dict[str, Any] | None:
    """An example's values under a candidate's parameter ``names``, read off that example's own
    program (its defaults, or lifted against its own request), or None if the names differ."""
    values = program_inputs(source, text)
    return values if values and set(values) == set(names) else None
