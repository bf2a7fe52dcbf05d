"""Build-time self-consistency: the computation most of the target's samples agree on.

A miss pays for one greedy target call; a build is paid for once and amortized over every hit of
its group, so it can afford several samples per example. With ``EngineConfig.build_samples`` k > 1
a build asks the target the miss path's own prompt k times for each held example, at
``build_temperature``, runs each program, lifts it against its request
(:mod:`minicache.programs.lifting`) and counts the samples by computation: the lifted program up
to parameter and variable names (:func:`computation_key`), so that one computation written for two
requests, whose numbers and wording differ, counts as one. The computation with the most samples
across all the held examples is the group's, if its share of the samples (its agreement) is above
``build_agreement``; the build then works from each example's agreeing sample instead of the
program its miss was answered with, and an example none of whose samples wrote it is left out.
Without such a computation the group is not built: one greedy program per example cannot tell a
systematic mistake from the group's computation, and samples that disagree say the target is
unsure of it.
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from minicache.answers import check_answer
from minicache.errors import BackendError, ProgramError, ProgramShapeError
from minicache.miss.prompts import plain_pot_messages
from minicache.models.base import GenerationOptions, ModelBackend
from minicache.models.compute import compute_clock
from minicache.programs.lifting import lift
from minicache.programs.numbers import candidate_values
from minicache.programs.signature import parse_signature
from minicache.programs.text import extract_code
from minicache.request import request_text
from minicache.sandbox import SandboxPool, SandboxViolation, check_program
from minicache.store import Example


@dataclass
class Sample:
    """One program the target wrote for one example: its code, its answer, its computation."""

    example: Example
    code: str
    answer: Any = None
    key: str | None = None  # None: it failed, or nothing of its request could be lifted


@dataclass
class Consensus:
    """What a build's samples agreed on: the winning computation, its share, and the examples
    rewritten to the samples that wrote it (each example's program and answer are its sample's)."""

    key: str | None
    agreed: int  # samples that wrote the winning computation
    samples: int  # samples drawn in all (failed ones included)
    examples: list[Example] = field(default_factory=list)
    tokens: int = 0  # target tokens the samples cost
    seconds: float = 0.0  # compute seconds the samples cost (minicache.models.compute)

    @property
    def agreement(self) -> float:
        """The share of all samples that wrote the winning computation."""
        return self.agreed / self.samples if self.samples else 0.0

    def reached(self, bar: float) -> bool:
        """Whether the winning computation has more than ``bar`` of the samples."""
        return self.key is not None and self.agreement > bar

    def disagreement(self, bar: float) -> str:
        """Why a build without agreement is not built, as its failure records it."""
        return (
            f"the target's samples do not agree: the most common computation has {self.agreed} of "
            f"{self.samples} samples ({self.agreement:.0%}), not more than {bar:.0%}"
        )


class _Names(ast.NodeTransformer):
    """Renames a function's parameters and local variables (``names``: old to new; other locals
    ``v0, v1, ...`` in the order they first appear), and drops annotations."""

    def __init__(self, names: dict[str, str], local: set[str]) -> None:
        self.names, self.local, self.n = dict(names), local, 0

    def rename(self, name: str) -> str:
        if name in self.names or name not in self.local:
            return self.names.get(name, name)
        self.names[name], self.n = f"v{self.n}", self.n + 1
        return self.names[name]

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg, node.annotation = self.rename(node.arg), None
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.rename(node.id)
        return node


def _quantities(defaults: dict[str, Any], text: str) -> dict[str, str]:
    """Each parameter named for the request's number it holds, ``q<i>`` for the i-th number written
    in ``text`` (``q-`` where its value is not written there). Why not the program's order: a
    program that swaps two of the request's quantities (``debts / assets``) would otherwise read
    as the one that does not, and swapped slots are the mistakes that hide."""
    written = candidate_values(text)
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
        names[name] = f"q{at}" if at is not None else f"q-{name}"  # unwritten: its own name
    return names


def computation_key(source: str, text: str) -> str | None:
    """What a program computes, up to names: its ``solve`` with the request's values lifted into
    parameters (a program that already has parameters is read as it is), each parameter named for
    the number of the request it holds (:func:`_quantities`), in that order, local variables renamed
    by order of appearance, defaults, annotations and comments dropped. None when it is no ``solve``
    or nothing of ``text`` could be lifted (a constant is no computation)."""
    try:
        defaults = parse_signature(source).defaults
        program = source
    except ProgramShapeError:
        lifted = lift(source, text)
        if lifted is None:
            return None
        program, defaults = lifted.program, lifted.defaults
    try:
        tree = check_program(program)
    except SandboxViolation:
        return None
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "solve":
            args = fn.args
            local = {a.arg for a in args.args + args.kwonlyargs + args.posonlyargs}
            local |= {
                n.id
                for n in ast.walk(fn)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            args.defaults, args.kw_defaults = [], [None for _ in args.kwonlyargs]
            fn.returns = None
            _Names(_quantities(defaults, text), local).visit(fn)
            args.args.sort(key=lambda a: a.arg)
            args.kwonlyargs.sort(key=lambda a: a.arg)
            return ast.unparse(tree)
    return None


def draw_samples(
    target: ModelBackend,
    sandbox: SandboxPool,
    examples: list[Example],
    k: int,
    temperature: float,
    max_tokens: int,
) -> tuple[list[Sample], int]:
    """``k`` programs for each example, written by ``target`` for the miss path's own prompt at
    ``temperature`` (each with its own seed, so a backend that seeds its sampler draws k different
    ones), each run and keyed by its computation; and the target tokens they cost. A sample the
    target or the sandbox fails is kept with no key: it counts among the samples, agreeing with none."""
    samples, tokens = [], 0
    for ex in examples:
        messages = plain_pot_messages(ex.question, ex.context)
        for i in range(k):
            options = GenerationOptions(max_tokens=max_tokens, temperature=temperature, seed=i)
            try:
                out = target.complete(messages, options)
            except BackendError:
                samples.append(Sample(ex, ""))
                continue
            tokens += out.prompt_tokens + out.completion_tokens
            sample = Sample(ex, extract_code(out.text))
            try:
                sample.answer = check_answer(sandbox.run(sample.code, {}).value)
            except ProgramError:
                samples.append(sample)
                continue
            sample.key = computation_key(sample.code, request_text(ex.question, ex.context))
            samples.append(sample)
    return samples, tokens


def agree(samples: list[Sample]) -> Consensus:
    """The computation most samples wrote, and each example rewritten to its first sample of it
    (examples with none are left out); examples keep their order."""
    votes = Counter(s.key for s in samples if s.key is not None)
    if not votes:
        return Consensus(None, 0, len(samples))
    # Among equals, the computation sampled first: a deterministic choice.
    key = max(
        votes, key=lambda k: (votes[k], -next(i for i, s in enumerate(samples) if s.key == k))
    )
    rewritten: dict[str, Example] = {}
    for s in samples:
        if s.key == key and s.example.id not in rewritten:
            rewritten[s.example.id] = replace(s.example, program=s.code, answer=s.answer)
    ordered = list(dict.fromkeys(s.example.id for s in samples))
    return Consensus(
        key, votes[key], len(samples), [rewritten[i] for i in ordered if i in rewritten]
    )


def sample_consensus(
    target: ModelBackend,
    sandbox: SandboxPool,
    examples: list[Example],
    k: int,
    temperature: float,
    max_tokens: int,
) -> Consensus:
    """Draw ``k`` samples per example (:func:`draw_samples`) and find what they agree on
    (:func:`agree`), with what drawing them cost."""
    began = compute_clock()
    samples, tokens = draw_samples(target, sandbox, examples, k, temperature, max_tokens)
    consensus = agree(samples)
    consensus.tokens, consensus.seconds = tokens, max(0.0, compute_clock() - began)
    return consensus
