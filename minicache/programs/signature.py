"""Program analysis shared by the stages: a program's signature, its defaults, and whether two
answers (or two words) match.

The miss path asks the target for a plain PoT program; :mod:`minicache.programs.lifting` turns such a
program into a parameterized one (the request's numbers become keyword parameters with comments),
and a program the target already wrote with parameters is used as it is. Either way the signature
``def solve(x=1.0,  # what x is, unit)`` gives the template (names, types, descriptions and units
from the comments), which the build turns into an entry and the hit path fills
(:mod:`minicache.build`, :mod:`minicache.hit`).
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from dataclasses import dataclass
from typing import Any

from minicache.errors import ProgramShapeError
from minicache.sandbox import SandboxViolation, check_program, parse_source
from minicache.store.base import Variable

_UNIT_HINT = re.compile(r",\s*([^,]{1,30})$")


@dataclass
class ProgramSignature:
    template: list[Variable]
    defaults: dict[str, Any]


def comments_by_line(source: str) -> dict[int, str]:
    comments: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError):
        pass
    return comments


# Calls whose arguments Python requires to be integers (a float raises TypeError): a name that flows
# into one of these is a count, index or precision, not a quantity.
_INT_CALLS = frozenset(
    {"range", "chr", "bin", "hex", "oct", "factorial", "comb", "perm", "isqrt", "gcd", "lcm"}
)


def integer_parameters(fn: ast.FunctionDef) -> set[str]:
    """Names in ``fn`` that must hold integers: passed to ``range`` and its kin, used as an index or
    slice bound, as ``round``'s digits, or to repeat a list or string; followed back through plain
    assignments (``n = years * 12; range(n)`` makes ``years`` one).

    A parameter's type is read from this, not from its default: a lifted program's default is the
    example's value, and a quantity that happened to be whole there (earnings per share of 5) is
    still a quantity; typed "integer", the next request's 7.5 was refused and paid for a miss
    (3 of 27 fallbacks in one Formula run)."""

    def names(node: ast.AST | None) -> set[str]:
        return (
            {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()
        )

    need: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if called in _INT_CALLS:
                for arg in node.args:
                    need |= names(arg)
            elif called == "round" and len(node.args) > 1:
                need |= names(node.args[1])
        elif isinstance(node, ast.Subscript):
            need |= names(node.slice)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for seq, count in ((node.left, node.right), (node.right, node.left)):
                if isinstance(seq, (ast.List, ast.Tuple, ast.ListComp)) or (
                    isinstance(seq, ast.Constant) and isinstance(seq.value, str)
                ):
                    need |= names(count)
    assigned = [
        (t.id, node.value)
        for node in ast.walk(fn)
        if isinstance(node, (ast.Assign, ast.AugAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    ]
    grown = True
    while grown:  # a fixpoint over assignments: what an integer name is computed from is one too
        grown = False
        for target, value in assigned:
            if target in need and not names(value) <= need:
                need |= names(value)
                grown = True
    return need


def parse_signature(
    source: str, function: str = "solve", *, require_defaults: bool = True
) -> ProgramSignature:
    """Template and defaults from ``def solve(x=1.0,  # what x is, unit ...)``.

    ``require_defaults=False`` accepts a parameter without a default (its default reads ``None``, its
    type number, or integer where the program needs one): the target, asked to generalize, often
    writes ``def solve(P, r_pct, t)`` although told to give the first example's values, and such a
    program is as reusable as one with defaults. A build validates it so and then writes the values
    it validated with into it (:func:`fill_defaults`), so a stored entry always has them."""
    try:
        tree = check_program(source)
    except SandboxViolation as exc:
        raise ProgramShapeError(str(exc)) from exc
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    if not funcs:
        raise ProgramShapeError(f"no function {function!r}")
    fn = funcs[0]
    args = fn.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ProgramShapeError("solve must take plain keyword parameters")
    params = args.args + args.kwonlyargs
    defaults = (
        [None] * (len(args.args) - len(args.defaults))
        + list(args.defaults)
        + list(args.kw_defaults)
    )
    comments = comments_by_line(source)
    whole = integer_parameters(fn)
    template: list[Variable] = []
    values: dict[str, Any] = {}
    for param, default in zip(params, defaults, strict=True):
        if default is None:
            if require_defaults:
                raise ProgramShapeError(f"parameter {param.arg!r} has no default value")
            comment = comments.get(param.lineno, "")
            template.append(
                Variable(
                    name=param.arg,
                    type="integer" if param.arg in whole else "number",
                    description=comment or param.arg.replace("_", " "),
                    unit=_unit(comment),
                )
            )
            values[param.arg] = None
            continue
        try:
            value = ast.literal_eval(default)
        except ValueError:
            raise ProgramShapeError(f"default of {param.arg!r} is not a literal") from None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ProgramShapeError(f"default of {param.arg!r} must be a number or string")
        comment = comments.get(param.lineno, "") or comments.get(
            getattr(default, "end_lineno", 0) or 0, ""
        )
        unit = _unit(comment)
        kind = (
            "string"
            if isinstance(value, str)
            else ("integer" if isinstance(value, int) and param.arg in whole else "number")
        )
        template.append(
            Variable(
                name=param.arg,
                type=kind,
                description=comment or param.arg.replace("_", " "),
                unit=unit,
                example=value,
            )
        )
        values[param.arg] = value
    if not template:
        raise ProgramShapeError("solve takes no parameters: nothing to reuse")
    return ProgramSignature(template, values)


def _unit(comment: str) -> str:
    m = _UNIT_HINT.search(comment.split(" (in the example: ")[0])  # see lifting.EXAMPLE_MARK
    return m.group(1).strip() if m else ""


def fill_defaults(source: str, values: dict[str, Any], function: str = "solve") -> str:
    """``source`` with ``values`` written in as the defaults of the parameters that have none; the
    rest of the text (the comments that describe each parameter) is kept as it is."""
    tree = parse_source(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    args = fn.args
    defaults = (
        [None] * (len(args.args) - len(args.defaults))
        + list(args.defaults)
        + list(args.kw_defaults)
    )
    lines = source.splitlines(keepends=True)
    missing = [p for p, d in zip(args.args + args.kwonlyargs, defaults, strict=True) if d is None]
    # Right to left, so that an insertion does not move the next one; ast counts columns in UTF-8 bytes.
    for param in sorted(
        missing, key=lambda p: (p.end_lineno or p.lineno, p.end_col_offset or 0), reverse=True
    ):
        if param.arg not in values:
            raise ProgramShapeError(f"no value for parameter {param.arg!r}")
        row = (param.end_lineno or param.lineno) - 1
        raw = lines[row].encode()
        at = param.end_col_offset or 0
        lines[row] = (raw[:at] + f"={values[param.arg]!r}".encode() + raw[at:]).decode()
    return "".join(lines)


def answers_match(a: Any, b: Any, rel_tol: float = 1e-3, abs_tol: float = 0.01) -> bool:
    """The one numeric tolerance used everywhere: ``math.isclose(a, b, rel_tol=1e-3, abs_tol=0.01)``.

    Non-numeric answers match when their normalized strings are equal. Objects (actions) match when
    they have the same keys and every value matches, a text value by its words: at least 60% of the
    shorter value's distinct words are in the other, since text taken from a request is written in
    more than one way ("red running shoes" / "running shoes, red, under 40 dollars").
    """
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and set(a) == set(b)
            and all(_values_match(a[k], b[k], rel_tol, abs_tol) for k in a)
        )
    try:
        fa, fb = float(a), float(b)
    except (TypeError, ValueError):
        return str(a).strip().lower() == str(b).strip().lower()
    if not (math.isfinite(fa) and math.isfinite(fb)):
        return False
    return math.isclose(fa, fb, rel_tol=rel_tol, abs_tol=abs_tol)


def words_match(a: str, b: str) -> bool:
    """Two texts taken from requests agree: at least 60% of the shorter one's distinct words are in
    the other (the rule answers and aligned text values are both compared by)."""
    wa, wb = set(re.findall(r"[a-z0-9]+", a.lower())), set(re.findall(r"[a-z0-9]+", b.lower()))
    return bool(wa and wb) and len(wa & wb) / min(len(wa), len(wb)) >= 0.6


def _values_match(a: Any, b: Any, rel_tol: float, abs_tol: float) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        try:
            float(a), float(b)
        except ValueError:
            return words_match(a, b)
    return answers_match(a, b, rel_tol, abs_tol)


# ---------------------------------------------------------------------------------------------
# Asking the target for a generalized program
