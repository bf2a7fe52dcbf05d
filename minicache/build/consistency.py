"""Build-time self-consistency: the computation most of the target's samples agree on.

A miss pays for one greedy target call; a build is paid for once and amortized over every hit of
its group, so it can afford several samples per example. With ``EngineConfig.build_samples`` k > 1
a build asks the target the miss path's own prompt k times for each held example, at
``build_temperature``, runs each program, lifts it against its request
(:mod:`minicache.programs.lifting`) and counts the samples by computation: the lifted program up
to names, each parameter named for the number of the request it holds
(:mod:`minicache.programs.computation`, ``BY_REQUEST_NUMBER``), so that one computation written
for two requests, whose numbers and wording differ, counts as one, and a sample that swaps two of
its request's quantities does not. The computation with the most samples
across all the held examples is the group's, if its share of the samples (its agreement) is above
``build_agreement``; the build then works from each example's agreeing sample instead of the
program its miss was answered with, and an example none of whose samples wrote it is left out.
Without such a computation the group is not built: one greedy program per example cannot tell a
systematic mistake from the group's computation, and samples that disagree say the target is
unsure of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from minicache.answers import check_answer
from minicache.errors import BackendError, ProgramError
from minicache.miss.prompts import plain_pot_messages
from minicache.models.base import GenerationOptions, ModelBackend
from minicache.models.compute import compute_clock
from minicache.programs.computation import ParameterNaming, computation_of
from minicache.programs.text import extract_code
from minicache.request import request_text
from minicache.sandbox import SandboxPool
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
            request = request_text(ex.question, ex.context)
            found = computation_of(sample.code, ParameterNaming.BY_REQUEST_NUMBER, request=request)
            sample.key = None if found is None else found.shape
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
