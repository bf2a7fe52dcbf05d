"""Linear equations in one unknown: parse the request, check worked steps, solve deterministically.

Everything here is exact (``fractions.Fraction``) and runs in-process: it parses arithmetic with
its own small recursive-descent parser and never evaluates model text as code.

A request is recognised when it asks to *solve* one equation in one single-letter unknown, e.g.
``Solve for x: 3x + 5 = 20. ... end with the line 'x = <value>'.`` The quoted line containing
``<value>`` is the requested answer format (the output schema); without one, ``x = <value>``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from fractions import Fraction

from minicache.errors import StepParseError as ParseError  # re-exported under its old name
from minicache.stepcache.bounds import MAX_DIGITS, values_fit

TOLERANCE = Fraction(1, 100)  # answers and step values within 0.01 (steps may round, e.g. 3.33)

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_FORMAT = re.compile(r"""['"“‘]([^'"”’]*<value>[^'"”’]*)['"”’]|`([^`]*<value>[^`]*)`""")
_JSON_FORMAT = re.compile(r"(\{[^{}]*<value>[^{}]*\})")
_VARIABLE_WORDS = {"a", "i"}  # single letters that are English words: never treated as the unknown


@dataclass(frozen=True)
class Linear:
    """coef * v + const"""

    coef: Fraction
    const: Fraction

    def at(self, v: Fraction) -> Fraction:
        return self.coef * v + self.const


class _Parser:
    """expr := term (('+'|'-') term)* ; term := factor (('*'|'/'|implicit) factor)* ;
    factor := ('-'|'+') factor | number | variable | '(' expr ')'"""

    def __init__(self, text: str, variable: str) -> None:
        self.tokens = re.findall(r"\d+(?:\.\d+)?|[A-Za-z]+|[-+*/×÷()]", text.replace("−", "-"))
        if "".join(self.tokens) != re.sub(r"\s+", "", text.replace("−", "-")):
            raise ParseError(f"unexpected characters in {text!r}")
        self.variable = variable
        self.i = 0

    def parse(self) -> Linear:
        if not self.tokens:
            raise ParseError("empty expression")
        value = self.expr()
        if self.i != len(self.tokens):
            raise ParseError(f"unexpected {self.tokens[self.i]!r}")
        return value

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def expr(self) -> Linear:
        left = self.term()
        while self.peek() in ("+", "-"):
            op = self.tokens[self.i]
            self.i += 1
            right = self.term()
            sign = 1 if op == "+" else -1
            left = Linear(left.coef + sign * right.coef, left.const + sign * right.const)
        return left

    def term(self) -> Linear:
        left = self.factor()
        while True:
            tok = self.peek()
            if tok in ("*", "×", "/", "÷"):
                self.i += 1
                right = self.factor()
                left = _mul(left, right) if tok in ("*", "×") else _div(left, right)
            elif tok is not None and (tok == "(" or tok[0].isalnum()):  # implicit: 3x, 2(x+1), x(3)
                left = _mul(left, self.factor())
            else:
                return left

    def factor(self) -> Linear:
        tok = self.peek()
        if tok is None:
            raise ParseError("expression ends early")
        self.i += 1
        if tok in ("-", "+"):
            inner = self.factor()
            return inner if tok == "+" else Linear(-inner.coef, -inner.const)
        if tok == "(":
            inner = self.expr()
            if self.peek() != ")":
                raise ParseError("missing ')'")
            self.i += 1
            return inner
        if tok[0].isdigit():
            if len(tok) > MAX_DIGITS + 1:  # digits and a decimal point
                raise ParseError(f"a number longer than {MAX_DIGITS} digits")
            return Linear(Fraction(0), Fraction(tok))
        if tok == self.variable:
            return Linear(Fraction(1), Fraction(0))
        raise ParseError(f"unknown symbol {tok!r}")


def _bounded(value: Linear) -> Linear:
    """``value``, unless a product or quotient grew past what StepCache takes (:mod:`.bounds`)."""
    if not values_fit((value.coef, value.const)):
        raise ParseError(f"a value longer than {MAX_DIGITS} digits")
    return value


def _mul(a: Linear, b: Linear) -> Linear:
    if a.coef and b.coef:
        raise ParseError("not linear (the unknown times itself)")
    return _bounded(Linear(a.coef * b.const + b.coef * a.const, a.const * b.const))


def _div(a: Linear, b: Linear) -> Linear:
    if b.coef:
        raise ParseError("not linear (division by the unknown)")
    if b.const == 0:
        raise ParseError("division by zero")
    return _bounded(Linear(a.coef / b.const, a.const / b.const))


def parse_linear(text: str, variable: str) -> Linear:
    return _Parser(text, variable).parse()


# ------------------------------------------------------------------------------------------
# The request


@dataclass
class LinearRequest:
    text: str
    variable: str
    equation: str  # as written in the request
    lhs: Linear
    rhs: Linear
    answer_format: str  # e.g. "x = <value>", "Answer: <value>", '{"x": <value>}'
    constants: list[Fraction] = field(default_factory=list)  # the equation's numbers, in order
    frame: str = ""  # the request with numbers, the unknown and the answer format masked
    form: str = ""  # the equation with numbers and the unknown masked, e.g. "NV+N=N"

    @property
    def solution(self) -> Fraction:
        return solve(self)

    def holds(self, value: Fraction) -> bool:
        """Substitution check: does ``value`` satisfy the request's equation?"""
        scale = max(Fraction(1), abs(self.lhs.coef - self.rhs.coef))
        return abs(self.lhs.at(value) - self.rhs.at(value)) <= TOLERANCE * scale


def _format_mask(fmt: str, variable: str) -> str:
    return re.sub(rf"(?<![A-Za-z]){re.escape(variable)}(?![A-Za-z])", "V", fmt)


def _answer_format(text: str) -> tuple[str | None, str]:
    """The requested answer line (the quoted text holding ``<value>``) and the request without it."""
    m = _JSON_FORMAT.search(text)
    if m:
        start, end = m.span(1)
        if start > 0 and end < len(text) and text[start - 1] in "'\"`‘“" and text[end] in "'\"`’”":
            start, end = start - 1, end + 1
        return m.group(1), text[:start] + " " + text[end:]
    m = _FORMAT.search(text)
    if m:
        return next(g for g in m.groups() if g), text[: m.start()] + " " + text[m.end() :]
    return None, text


def parse_request(text: str) -> LinearRequest | None:
    """A :class:`LinearRequest` if ``text`` asks to solve one linear equation in one unknown, else None."""
    if not re.search(r"\bsolve\b", text, re.I):
        return None
    fmt, body = _answer_format(text)
    candidates = []
    for variable in sorted(set(re.findall(r"(?<![A-Za-z])([A-Za-z])(?![A-Za-z])", body))):
        if variable.lower() in _VARIABLE_WORDS and not re.search(rf"\bfor {variable}\b", body):
            continue
        for m in re.finditer(_math_run(variable), body):
            eq = m.group(0).strip().rstrip(".").strip()
            if eq.count("=") != 1:
                continue
            left, right = (side.strip() for side in eq.split("="))
            if not left or not right:
                continue
            try:
                lhs, rhs = parse_linear(left, variable), parse_linear(right, variable)
            except ParseError:
                continue
            if lhs.coef == rhs.coef:
                continue  # not an equation with one solution in this unknown
            candidates.append((f"{left} = {right}", variable, lhs, rhs, m))
    if len(candidates) != 1:
        return None  # no equation, or several (a system): not this task
    equation, variable, lhs, rhs, m = candidates[0]
    fmt = fmt or f"{variable} = <value>"
    constants = [Fraction(n) for n in _NUMBER.findall(equation)]
    masked_eq = _NUMBER.sub("N", _format_mask(equation, variable)).replace(" ", "")
    frame = body[: m.start()] + " <EQ " + masked_eq + "> " + body[m.end() :]
    frame = _NUMBER.sub("N", _format_mask(frame, variable))
    frame = re.sub(r"\s+", " ", frame).strip()
    return LinearRequest(text, variable, equation, lhs, rhs, fmt, constants, frame, masked_eq)


def solve(req: LinearRequest) -> Fraction:
    """The deterministic solver: (a1 - a2) v = b2 - b1."""
    return (req.rhs.const - req.lhs.const) / (req.lhs.coef - req.rhs.coef)


def fmt_number(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    return f"{float(x):.4f}".rstrip("0").rstrip(".")


def answer_line(req: LinearRequest, value: Fraction) -> str:
    return req.answer_format.replace("<value>", fmt_number(value))


def solver_steps(req: LinearRequest) -> list[str]:
    """A worked solution from the deterministic solver, in steps the checks below accept."""
    v, a, b = req.variable, req.lhs.coef - req.rhs.coef, req.rhs.const - req.lhs.const
    s = solve(req)
    steps = [f"Start from the equation: {req.equation}"]
    steps.append(
        f"Collect the {v} terms on the left and the constants on the right: "
        f"{fmt_number(a)}{v} = {fmt_number(b)}"
    )
    if a != 1:
        steps.append(
            f"Divide both sides by {fmt_number(a)}: {v} = {fmt_number(b)}/{fmt_number(a)} = {fmt_number(s)}"
        )
    steps.append(answer_line(req, s))
    return steps


# ------------------------------------------------------------------------------------------
# Checks


def _math_run(variable: str) -> str:
    """A run of arithmetic characters and the unknown (prose words end it) holding at least one '='."""
    unit = rf"(?:[\d.+\-−*/×÷()\s]|(?<![A-Za-z]){re.escape(variable)}(?![A-Za-z]))"
    return rf"{unit}+(?:={unit}+)+"


def _chains(step: str, variable: str) -> list[str]:
    """The 'A = B = C' runs in a step (math characters and the unknown only; prose is ignored)."""
    out = []
    for m in re.finditer(_math_run(variable), step):
        # sentence full stops, and a bracket opened or closed by the prose around the equation
        text = re.sub(r"^[.\s)]+|[.\s(]+$", "", m.group(0))
        while text.count(")") > text.count("(") and text.endswith(")"):
            text = text[:-1].rstrip()
        while text.count("(") > text.count(")") and text.startswith("("):
            text = text[1:].lstrip()
        if all(part.strip() for part in text.split("=")):
            out.append(text)
    return out


def has_equation(step: str, variable: str) -> bool:
    return bool(_chains(step, variable))


def check_step(req: LinearRequest, step: str) -> str | None:
    """None if every equality in the step holds at the solution (for an equation in the unknown this
    means it is equivalent to the request's), else what is wrong."""
    s = solve(req)
    for chain in _chains(step, req.variable):
        parts = chain.split("=")
        try:
            values = [parse_linear(p, req.variable) for p in parts]
        except ParseError as exc:
            return f"cannot read {chain!r}: {exc}"
        for left, right in itertools.pairwise(values):
            if abs(left.at(s) - right.at(s)) > TOLERANCE * max(Fraction(1), abs(right.at(s))):
                return f"{chain!r} does not hold"
    return None


def read_answer(req: LinearRequest, line: str) -> Fraction | None:
    """The value in a line written in the requested answer format, or None if it is not in that format."""
    value = r"(-?\d+(?:\.\d+)?(?:/\d+)?)"
    pattern = re.escape(re.sub(r"\s+", " ", req.answer_format.strip())).replace(
        re.escape("<value>"), value
    )
    pattern = pattern.replace(r"\ ", r"\s*")
    m = re.fullmatch(rf"\s*{pattern}\s*\.?\s*", line.strip())
    if not m or len(m.group(1)) > 2 * MAX_DIGITS + 3:  # not a value StepCache takes
        return None
    num, _, den = m.group(1).partition("/")
    return Fraction(num) / Fraction(den) if den else Fraction(num)


def check_final(req: LinearRequest, line: str) -> str | None:
    value = read_answer(req, line)
    if value is None:
        return f"the last line is not in the requested format {req.answer_format!r}"
    if not req.holds(value):
        return f"{req.variable} = {fmt_number(value)} does not satisfy {req.equation}"
    return None


def check_steps(req: LinearRequest, steps: list[str]) -> list[str | None]:
    """One verdict per step (None = verified). The last step must be the answer line."""
    if not steps:
        return []
    verdicts = [check_step(req, s) for s in steps]
    verdicts[-1] = verdicts[-1] or check_final(req, steps[-1])
    return verdicts


# ------------------------------------------------------------------------------------------
# Reuse: cached steps re-instantiated for a request with the same frame


def _base_values(req: LinearRequest) -> list[Fraction]:
    """The values a worked solution's numbers are made of: the equation's constants, the collected
    coefficient and constant, both sides' parts and the solution."""
    a, b = req.lhs.coef - req.rhs.coef, req.rhs.const - req.lhs.const
    sides = [req.lhs.coef, req.lhs.const, req.rhs.coef, req.rhs.const]
    return [*req.constants, a, b, solve(req), *sides]


def _expressions(old: LinearRequest, new: LinearRequest) -> dict[Fraction, list[Fraction]]:
    """For each |value| derivable from ``old`` (base values and one operation on two of them), the
    corresponding values under ``new``, in order of preference (simplest first)."""
    ob, nb = _base_values(old), _base_values(new)
    table: dict[Fraction, list[Fraction]] = {}

    def add(o: Fraction, n: Fraction) -> None:
        key = abs(o)
        if abs(n) not in table.setdefault(key, []):
            table[key].append(abs(n))

    # same frame, same constants: the loops below index both alike
    for o, n in zip(ob, nb, strict=True):
        add(o, n)
    for i in range(len(ob)):
        for j in range(len(ob)):
            if i == j:
                continue
            add(ob[i] + ob[j], nb[i] + nb[j])
            add(ob[i] - ob[j], nb[i] - nb[j])
            add(ob[i] * ob[j], nb[i] * nb[j])
            if ob[j] and nb[j]:
                add(ob[i] / ob[j], nb[i] / nb[j])
    return table


def lift_steps(
    old: LinearRequest, steps: list[str], new: LinearRequest, max_choices: int = 64
) -> list[str]:
    """``steps`` (verified for ``old``) rewritten for ``new``: the unknown renamed, the final line
    written in ``new``'s answer format, and every number
    that is derivable from ``old``'s values replaced by the same derivation on ``new``'s. Where a
    number has several derivations, the first rendering that passes the step's check wins; numbers
    with none stay as written (the check then decides whether the step must be patched)."""
    if len(old.constants) != len(new.constants):
        return list(steps)
    table = _expressions(old, new)
    rename = re.compile(rf"(?<![A-Za-z]){re.escape(old.variable)}(?![A-Za-z])")
    out = []
    for k, step in enumerate(steps):
        renamed = rename.sub(new.variable, step) if old.variable != new.variable else step
        last = k == len(steps) - 1
        if last and (answer := read_answer(old, step)) is not None:
            # the final line is the old answer template with one value slot: the same slot in this
            # request's template (another output schema is a new template, not a new computation)
            renamed = answer_line(new, answer)
        pieces = _NUMBER.split(renamed)
        numbers = _NUMBER.findall(renamed)
        options = [
            table.get(Fraction(n), []) or [Fraction(n)] if len(n) <= MAX_DIGITS + 1 else [None]
            for n in numbers
        ]
        first = None
        for choice in itertools.islice(itertools.product(*options), max_choices):
            text = pieces[0] + "".join(
                (n if v is None else fmt_number(v)) + rest
                for v, n, rest in zip(choice, numbers, pieces[1:], strict=True)
            )
            first = first or text
            if check_step(new, text) is None and (not last or check_final(new, text) is None):
                break
        else:
            text = first if first is not None else renamed
        out.append(text)
    return out
