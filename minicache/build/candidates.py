"""A group's own programs as parameterized candidates for its entry, ranked by model-free agreement.

The build stage (:mod:`minicache.build.builder`) validates them through the real hit path; this module only
turns each example's miss program into a ``solve(**variables)`` candidate (lifted without a model,
:mod:`minicache.programs.lifting`) and checks it against the group's other examples by running it on their
values in the sandbox.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from minicache.answers import check_answer
from minicache.build.validation import AttemptSource, Validation
from minicache.errors import ProgramError, ProgramShapeError
from minicache.hit.tables import align_table, learn_table_exemplar
from minicache.programs.lifting import lift
from minicache.programs.signature import answers_match, fill_defaults, parse_signature
from minicache.request import request_text, strip_prefix
from minicache.sandbox import SandboxPool, parse_source
from minicache.store import Example


@dataclass
class Candidate:
    """A program a build may turn into an entry, and where its defaults (one request's values) came from."""

    kind: AttemptSource  # where its program came from: an own miss program, or the target
    source: str
    origin: Example
    score: int = 0  # model-free agreements minus disagreements with the group's other examples
    checked: int = 0  # examples (its own included) whose own program could be compared with it
    # (request text, values) that agreed
    agreed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def backed(self) -> bool:
        """Whether another example backs it: compared with 2+ examples (its own included), a majority agreed."""
        return self.checked >= 2 and self.score > 0

    def fill_defaults(self, record: Validation) -> None:
        """The target wrote parameters without defaults: write in the values the first example
        passed with, so that a stored entry's program is a whole signature (export, rules)."""
        if not (record.ok and None in record.defaults.values()):
            return
        if record.validated:
            self.source = fill_defaults(self.source, record.validated[0][1])
            record.template = parse_signature(self.source).template
        else:
            record.ok, record.error = False, "no validated example to take its defaults from"


def without_defaults(source: str) -> str:
    """``source`` without comments and with ``solve``'s defaults blanked. Candidates that differ only
    there compute the same on every example compared (each gets a value for every parameter), so a
    build runs one of them per example, not each of them: with each example's lifted program its own
    candidate, comparing all of them made a build quadratic in sandbox runs (tests/server/test_server_load.py)."""
    tree = parse_source(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "solve":
            node.args.defaults = [ast.Constant(None) for _ in node.args.defaults]
            node.args.kw_defaults = [
                None if d is None else ast.Constant(None) for d in node.args.kw_defaults
            ]
    return ast.unparse(tree)


def own_candidates(
    examples: list[Example], prefix: str, sandbox: SandboxPool, limit: int
) -> tuple[list[Candidate], bool]:
    """The group's own programs as parameterized candidates, best first.

    Each example's program is lifted against its own request (see :mod:`minicache.programs.lifting`). A
    candidate is then checked against the other examples without any model: where an example's
    own program lifts to the same parameters (or, for a candidate whose values are cells of its
    request's table, where the same table reading reads the example: ``_table_values``), running
    the candidate on that example's values must give its answer. Only a candidate a majority of the
    examples it could be compared with agree with is kept (one example's mistake must not become
    every later request's), ranked by agreements minus disagreements (among equals, a backed one
    first, then the newest); the agreeing (request,
    values) pairs later help learn extraction rules. Also returns whether the programs were
    compared and none has a majority (the group's examples disagree: nothing to cache yet)."""
    texts = {ex.id: strip_prefix(request_text(ex.question, ex.context), prefix) for ex in examples}
    found: list[Candidate] = []
    # Each example's own values, lifted once here: lifting per (candidate, example) pair made a
    # build quadratic in lifts, and queued builds of busy groups took minutes (tests/server/test_server_load.py).
    inputs: dict[str, dict[str, Any]] = {}
    shapes: set[str] = set()
    for ex in reversed(examples):
        kind: AttemptSource
        try:
            inputs[ex.id] = parse_signature(ex.program).defaults
            kind, source = AttemptSource.MISS_PROGRAM, ex.program
        except ProgramShapeError:
            lifted = lift(ex.program, texts[ex.id])
            inputs[ex.id] = lifted.defaults if lifted else {}
            if lifted is None:
                continue
            kind, source = AttemptSource.LIFTED, lifted.program
        shape = without_defaults(source)
        if shape not in shapes:  # one candidate per function: the newest example's defaults
            shapes.add(shape)
            found.append(Candidate(kind, source, ex))
    for cand in found:
        signature = parse_signature(cand.source)
        defaults = signature.defaults
        table = learn_table_exemplar(
            signature.template, texts[cand.origin.id], defaults
        )  # see _table_values
        for ex in examples:
            own = inputs[ex.id]  # as lifting.own_values: only under the same parameter names
            values = (
                defaults
                if ex is cand.origin
                else own
                if own and set(own) == set(defaults)
                else _table_values(table, texts[ex.id])
            )
            if values is None:
                continue
            try:
                agrees = answers_match(
                    check_answer(sandbox.run(cand.source, values).value), ex.answer
                )
            except ProgramError:
                agrees = False
            cand.score += 1 if agrees else -1
            cand.checked += 1
            if agrees:
                cand.agreed.append((texts[ex.id], values))
    found.sort(key=lambda c: (-c.score, not c.backed))  # among equals, one another example backs
    # agreements = (score + checked) / 2 must be more than half of checked, i.e. score > 0
    kept = [c for c in found if c.score > 0]
    split = not kept and any(
        c.checked >= 2 for c in found
    )  # compared with each other, and no majority
    return kept[:limit], split


def backed_by_other_values(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates another example backs with values other than their own defaults (a request
    sent twice backs nothing): all an early build may try."""
    return [
        c
        for c in candidates
        if c.backed
        and any(values != dict(parse_signature(c.source).defaults) for _, values in c.agreed)
    ]


def _table_values(exemplar: dict[str, Any] | None, text: str) -> dict[str, Any] | None:
    """Another example's values for a candidate whose own example's values are cells of its table
    (minicache.hit.tables), read from that example's table the same way, or None. Why: lifted programs
    over tables name their parameters after their rows (``deferred_revenue_2019``,
    ``net_sales_2019``), so two examples of one computation never share parameter names, and
    without this no TAT-QA candidate was backed by another example. Only table exemplars: the cue
    words of an ordinary exemplar are learned from one example and read other requests' numbers
    less surely, and what backs a candidate decides how much of its validation may fail."""
    if exemplar is None:
        return None
    values, unread = align_table(exemplar, text)
    return None if unread else values
