"""What a program computes, up to the names it chose: one normalisation for every comparison of
programs by their computation.

Two programs are one computation when they are the same ``solve`` once names and form are set
aside: its parameters and local variables renamed canonically; defaults, annotations, comments,
docstring and unused imports dropped; a straight-line body's intermediate variables written into
the one expression it returns (``v = a / b; return v`` is ``return a / b``); and a rounding of the
returned value to decimals dropped (``round(a / b, 2)``: a request's "two decimal places" says how
the answer is written, not what is computed). The target's samples for one request often differ in
just these ways (one imports ``math`` it never uses, one names its intermediate result, one
rounds), and counted apart they never agree. What a parameter is renamed to is the one choice that
differs between callers, because they ask different questions (:class:`ParameterNaming`):

* **Self-consistency** (:mod:`minicache.build.consistency`) compares the target's samples for the
  requests of one group: did they compute the same thing *from the same quantities*? A sample
  that divides the debts by the assets where the others divide the assets by the debts is another
  computation, and swapped quantities are the mistakes that hide. So each parameter is named for
  the number of the request it holds (:attr:`ParameterNaming.BY_REQUEST_NUMBER`); a sample that
  wrote the request's numbers as literals is lifted against the request first.
* **Group merges** (:mod:`minicache.build.merge`) compare the entries of two groups whose requests
  are different stories: their numbers come in another order, under other names, so nothing ties a
  parameter of one to a parameter of the other but what the program does with it. So parameters
  are named by their order of first use (:attr:`ParameterNaming.BY_USE`), and the parameters of
  two programs of one shape pair up by position in :attr:`Computation.roles`.
"""

from __future__ import annotations

import ast
import copy
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

from minicache.errors import ProgramShapeError
from minicache.programs.lifting import lift
from minicache.programs.numbers import candidate_values
from minicache.programs.signature import parse_signature
from minicache.sandbox import SandboxViolation, check_program


class ParameterNaming(Enum):
    """What a parameter is renamed to in a program's :class:`Computation`."""

    BY_USE = "by_use"  # v<i>: its order of first use among all names in the body
    BY_REQUEST_NUMBER = "by_request_number"  # q<i>: the i-th number written in the request


@dataclass(frozen=True)
class Computation:
    """A program up to its names: ``shape`` is the program with parameters and locals renamed
    (:class:`ParameterNaming`) and defaults, annotations, comments and docstring dropped; ``roles``
    are the program's own parameter names in the order of their new names, so two programs of one
    shape map their parameters to each other by position in ``roles``."""

    shape: str
    roles: tuple[str, ...]


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.names.get(node.arg, node.arg)
        node.annotation = None
        return node


def _first_uses(body: list[ast.stmt], bound: set[str]) -> list[str]:
    """The ``bound`` names in the order ``body`` first uses them (depth first, in source order)."""
    order: dict[str, None] = {}

    class Uses(ast.NodeVisitor):
        def visit_Name(self, node: ast.Name) -> None:
            if node.id in bound:
                order.setdefault(node.id)

        def visit_arg(self, node: ast.arg) -> None:
            if node.arg in bound:
                order.setdefault(node.arg)

    for stmt in body:
        Uses().visit(stmt)
    return list(order)


class _Substitute(ast.NodeTransformer):
    def __init__(self, values: dict[str, ast.expr]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node


def _straight_line(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` as the one expression it returns, where it is straight-line: assignments of one
    name each, no name assigned twice, then a ``return``. Each name's use is replaced by what it was
    assigned (so a name no later statement reads is gone), and a rounding of the returned value is
    dropped where it keeps decimals (``round(x, 2)``; ``round(x)`` counts whole items). Any other body
    (a loop, a branch, a name assigned twice, a name bound inside an expression) is kept as written."""
    if not body or any(
        isinstance(n, (ast.Lambda, ast.NamedExpr, ast.comprehension))
        for stmt in body
        for n in ast.walk(stmt)
    ):
        return body  # a name bound inside an expression: substituting could capture it
    *steps, last = body
    if not isinstance(last, ast.Return) or last.value is None:
        return body
    targets: list[str] = []
    for step in steps:
        if not (
            isinstance(step, ast.Assign)
            and len(step.targets) == 1
            and isinstance(step.targets[0], ast.Name)
        ):
            return body
        targets.append(step.targets[0].id)
    if len(set(targets)) != len(targets):
        return body
    values: dict[str, ast.expr] = {}
    for step, name in zip(steps, targets, strict=True):
        assert isinstance(step, ast.Assign)
        values[name] = _Substitute(values).visit(copy.deepcopy(step.value))
    returned = _Substitute(values).visit(copy.deepcopy(last.value))
    if (
        isinstance(returned, ast.Call)
        and isinstance(returned.func, ast.Name)
        and returned.func.id == "round"
        and "round" not in targets
        and returned.args
        and _decimals(returned) >= 1
    ):
        returned = returned.args[0]  # decimals; round(x) to a whole number is a computation
    return [ast.Return(value=returned)]


def _decimals(call: ast.Call) -> int:
    """The decimals a ``round`` call keeps, written ``round(x, 2)`` or ``round(x, ndigits=2)``;
    0 for ``round(x)`` and for any other form (a computed or non-integer count)."""
    given = call.args[1:] + [k.value for k in call.keywords if k.arg == "ndigits"]
    others = [k for k in call.keywords if k.arg != "ndigits"]
    if len(call.args) > 2 or len(given) != 1 or others:
        return 0
    value = given[0]
    if isinstance(value, ast.Constant) and type(value.value) is int:
        return value.value
    return 0


def _unused_import(node: ast.stmt, used: set[str]) -> bool:
    """Whether ``node`` imports only names ``solve`` never reads (``import math`` for nothing)."""
    if not isinstance(node, (ast.Import, ast.ImportFrom)):
        return False
    bound = {(a.asname or a.name).split(".")[0] for a in node.names}
    return "*" not in bound and not bound & used


def _request_numbers(defaults: dict[str, Any], request: str) -> dict[str, str]:
    """Each parameter named for the request's number it holds, ``q<i>`` for the i-th number written
    in ``request`` (``q-<name>`` where its value is not written there). Why not the program's order:
    a program that swaps two of the request's quantities (``debts / assets``) would otherwise read
    as the one that does not."""
    written = candidate_values(request)
    used: set[int] = set()
    names: dict[str, str] = {}
    for name, value in defaults.items():
        same = [
            i
            for i, w in enumerate(written)
            if isinstance(value, (int, float)) and math.isclose(value, w, rel_tol=1e-9)
        ]
        free = [i for i in same if i not in used]
        at = free[0] if free else same[0] if same else None
        if at is not None:
            used.add(at)
        names[name] = f"q{at}" if at is not None else f"q-{name}"
    return names


def parameterized(source: str, request: str) -> tuple[str, dict[str, Any]] | None:
    """``source`` with parameters and their defaults: as written, or lifted against ``request``
    (None where nothing of it could be lifted). A program written for a request gets its
    computation through here under either naming; self-consistency also runs one example's
    program on another's defaults to compare them by answer."""
    try:
        return source, parse_signature(source).defaults
    except ProgramShapeError:
        lifted = lift(source, request)
        return None if lifted is None else (lifted.program, lifted.defaults)


def computation_of(
    program: str,
    naming: ParameterNaming = ParameterNaming.BY_USE,
    request: str | None = None,
) -> Computation | None:
    """``program``'s :class:`Computation`, its parameters renamed as ``naming`` says.

    ``BY_REQUEST_NUMBER`` needs the ``request`` the program was written for; a program without
    parameters is lifted against it (its literals that are the request's values become parameters).
    None where there is no single plain ``solve`` of keyword parameters, where nothing of the request
    could be lifted (a constant is no computation), or, ``BY_USE``, where a parameter is never used
    (its role could not be told from its use)."""
    if naming is ParameterNaming.BY_REQUEST_NUMBER:
        if request is None:
            raise ValueError("naming parameters by the request's numbers needs the request")
        found = parameterized(program, request)
        if found is None:
            return None
        program, defaults = found
    try:
        tree = check_program(program)
    except SandboxViolation:
        return None
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "solve"]
    if len(fns) != 1:
        return None
    fn = fns[0]
    a = fn.args
    if a.vararg or a.kwarg or a.posonlyargs or fn.decorator_list:
        return None
    params = [p.arg for p in a.args + a.kwonlyargs]
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring says nothing about the computation
    body = _straight_line(body)
    if not body:
        return None
    bound = set(params) | {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    bound |= {n.arg for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.arg)}
    order = _first_uses(body, bound)
    if naming is ParameterNaming.BY_USE:
        if any(p not in order for p in params):
            return None
        names = {name: f"v{i}" for i, name in enumerate(order)}
    else:
        names = _request_numbers(defaults, request or "")
        local = [n for n in order if n not in names]
        names |= {name: f"v{i}" for i, name in enumerate(local)}
    roles = tuple(sorted(params, key=lambda p: (len(names[p]), names[p])))
    canonical = copy.deepcopy(fn)
    canonical.decorator_list, canonical.returns = [], None
    canonical.args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(names[p]) for p in roles],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    canonical.body = [_Rename(names).visit(stmt) for stmt in copy.deepcopy(body)]
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}  # a helper's imports too
    rest = [n for n in tree.body if n is not fn and not _unused_import(n, used)]
    module = ast.Module(body=[*rest, canonical], type_ignores=[])
    return Computation(ast.unparse(ast.fix_missing_locations(module)), roles)
