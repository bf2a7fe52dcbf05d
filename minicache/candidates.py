"""A group's own programs as parameterized candidates for its entry, ranked by model-free agreement.

The build stage (:mod:`minicache.build`) validates them through the real hit path; this module only
turns each example's miss program into a ``solve(**variables)`` candidate (lifted without a model,
:mod:`minicache.lifting`) and checks it against the group's other examples by running it on their
values in the sandbox.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any, Literal

from .align import align, learn_exemplar
from .answers import check_answer
from .errors import ProgramError, ProgramShapeError
from .lifting import lift
from .request import request_text, strip_prefix
from .sandbox import SandboxPool, parse_source
from .store import Example
from .synthesis import answers_match, parse_signature

Source = Literal["lifted", "miss-program", "target-build"]


@dataclass
class Candidate:
    """A program a build may turn into an entry, and where its defaults (one request's values) came from."""

    kind: Source  # "lifted" (a plain miss program, lifted) | "miss-program" (already parameterized) | "target-build"
    source: str
    origin: Example
    score: int = 0  # model-free agreements minus disagreements with the group's other examples
    checked: int = 0  # examples (its own included) whose own program could be compared with it
    agreed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (request text, values) that agreed
    read: int = 0  # of the agreements, those on values read by cue words or in order (_reading)

    @property
    def backed(self) -> bool:
        """Whether another example backs it: compared with 2+ examples (its own included), a majority agreed."""
        return self.checked >= 2 and self.score > 0

    @property
    def vouched(self) -> bool:
        """Backed without the agreements on values read by cue words or in order, which stand on one
        example's wording or on two programs using their values alike: only this lets validation pass
        with ``validate_min`` of the held examples (minicache.build)."""
        return self.checked - self.read >= 2 and self.score - self.read > 0


def without_defaults(source: str) -> str:
    """``source`` without comments and with ``solve``'s defaults blanked. Candidates that differ only
    there compute the same on every example compared (each gets a value for every parameter), so a
    build runs one of them per example, not each of them: with each example's lifted program its own
    candidate, comparing all of them made a build quadratic in sandbox runs (tests/test_server_load.py)."""
    tree = parse_source(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "solve":
            node.args.defaults = [ast.Constant(None) for _ in node.args.defaults]
            node.args.kw_defaults = [None if d is None else ast.Constant(None) for d in node.args.kw_defaults]
    return ast.unparse(tree)


def own_candidates(examples: list[Example], prefix: str, sandbox: SandboxPool,
               limit: int) -> tuple[list[Candidate], bool]:
    """The group's own programs as parameterized candidates, best first.

    Each example's program is lifted against its own request (see :mod:`minicache.lifting`). A
    candidate is then checked against the other examples without any model: where an example's
    own program lifts to the same parameters (or, where it does not, where the example's request
    or its values' order reads unambiguously: ``_reading``), running the candidate on that
    example's values must give its answer. Only a candidate a majority of the examples it could be
    compared with agree with is kept (one example's mistake must not become every later
    request's), ranked by agreements minus disagreements (among equals, a backed one first, then
    the newest); the agreeing (request, values) pairs later help learn extraction rules. Also
    returns whether the programs were compared and none has a majority (the group's examples
    disagree: nothing to cache yet)."""
    texts = {ex.id: strip_prefix(request_text(ex.question, ex.context), prefix) for ex in examples}
    found: list[Candidate] = []
    # Each example's own values, lifted once here: lifting per (candidate, example) pair made a
    # build quadratic in lifts, and queued builds of busy groups took minutes (tests/test_server_load.py).
    inputs: dict[str, dict[str, Any]] = {}
    shapes: set[str] = set()
    for ex in reversed(examples):
        kind: Source
        try:
            inputs[ex.id] = parse_signature(ex.program).defaults
            kind, source = "miss-program", ex.program
        except ProgramShapeError:
            lifted = lift(ex.program, texts[ex.id])
            inputs[ex.id] = lifted.defaults if lifted else {}
            if lifted is None:
                continue
            kind, source = "lifted", lifted.program
        shape = without_defaults(source)
        if shape not in shapes:  # one candidate per function: the newest example's defaults
            shapes.add(shape)
            found.append(Candidate(kind, source, ex))
    for cand in found:
        signature = parse_signature(cand.source)
        defaults = signature.defaults
        exemplar = learn_exemplar(signature.template, texts[cand.origin.id], defaults)  # see _reading
        for ex in examples:
            own = inputs[ex.id]  # as lifting.own_values: only under the same parameter names
            values: dict[str, Any] | None
            if ex is cand.origin or (own and set(own) == set(defaults)):
                values = defaults if ex is cand.origin else own
                agrees = _gives(cand.source, values, ex.answer, sandbox)
            else:
                values, agrees = _reading(exemplar, texts[ex.id], own, defaults, cand.source, ex.answer, sandbox)
                if agrees and not (exemplar and "table" in exemplar):
                    cand.read += 1
            if values is None:
                continue
            cand.score += 1 if agrees else -1
            cand.checked += 1
            if agrees:
                cand.agreed.append((texts[ex.id], values))
    found.sort(key=lambda c: (-c.score, not c.backed))  # among equals, one another example backs
    # agreements = (score + checked) / 2 must be more than half of checked, i.e. score > 0
    kept = [c for c in found if c.score > 0]
    split = not kept and any(c.checked >= 2 for c in found)  # compared with each other, and no majority
    return kept[:limit], split


def _gives(source: str, values: dict[str, Any], answer: Any, sandbox: SandboxPool) -> bool:
    """Whether the program, run on ``values``, gives ``answer``."""
    try:
        return answers_match(check_answer(sandbox.run(source, values).value), answer)
    except ProgramError:
        return False


# Parameters up to which the orders of another example's values are tried (3! = 6 sandbox runs).
_ORDERS_UP_TO = 3


def _reading(exemplar: dict[str, Any] | None, text: str, own: dict[str, Any], defaults: dict[str, Any],
             source: str, answer: Any, sandbox: SandboxPool) -> tuple[dict[str, Any] | None, bool]:
    """Another example's values for a candidate whose program names its parameters otherwise than
    that example's own program does, and whether the candidate gives that example's answer on them;
    (None, False) where nothing reads them.

    Why: lifted programs name their parameters after the request's words (``market_value_share``
    in one example, ``manufacturing_company_priced`` in the next) or, over tables, after their rows
    (``deferred_revenue_2019``, ``net_sales_2019``), so two examples of one computation often share
    no parameter names: on formula-v12's store, 10 of 22 groups' first two examples did not, and
    none of those groups could be built early; no TAT-QA candidate was backed in tatqa-v2 to v6.

    * A table reading (row and column, minicache.tables) of the example's request, learned from
      the candidate's own example: it agrees or disagrees.
    * Otherwise, the example's request read by the cue words of the candidate's own example
      (:func:`minicache.align.align`), or the example's own values given to the candidate's
      parameters in order, when both programs have as many (lifting orders them as the program
      uses them) and no other order of them gives the example's answer too (``a * b`` backs
      nothing this way). Cue words learned from one example may misread another request, and two
      programs may use their values in other orders, so a disagreement there counts against the
      candidate only when no order of the example's values gives its answer: then the candidate
      cannot compute that example at all (``a - b`` where the example added), and a group that
      mixes two computations must not back either by leaving the other out."""
    if exemplar is not None:
        found = align(exemplar, text)
        if "table" in exemplar:
            return (found.values, _gives(source, found.values, answer, sandbox)) if found.complete else (None, False)
        if found.complete and _gives(source, found.values, answer, sandbox):
            return found.values, True
    if own and len(own) == len(defaults) <= _ORDERS_UP_TO:
        orders = [dict(zip(defaults, order, strict=True)) for order in permutations(own.values())]
        gives = [_gives(source, values, answer, sandbox) for values in orders]
        if gives[0] and sum(gives) == 1:
            return orders[0], True
        if not any(gives):
            return orders[0], False
    return None, False
