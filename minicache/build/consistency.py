"""Build-time self-consistency: the computation the target's samples agree on, example by example.

A miss pays for one greedy target call; a build is paid for once and amortized over every hit of
its group, so it can afford several samples per example. With ``EngineConfig.build_samples`` k > 1
a build asks the target the miss path's own prompt k times for each held example, at
``build_temperature``, runs each program, and decides in two steps:

* **Within an example**, the samples are counted by computation with each parameter named for the
  number of the request it holds (:mod:`minicache.programs.computation`, ``BY_REQUEST_NUMBER``), so
  a sample that swaps two of its request's quantities is another computation. The one most of the
  example's samples wrote (among equals, the first sampled) is the example's winner. Counting by
  request number is only meaningful inside one request: two wordings of one computation write
  their numbers in different orders, so their keys differ though their computation does not.
* **Across examples**, the group's computation is the one more than half the winners write, and
  at least ``validate_min`` of them: two winners are one computation where they have the same shape
  with parameters named by their use (``BY_USE``, as group merges compare entries) and, where their
  lifted programs have the same parameter names, the one's program run on the other's values gives
  the other's answer (the names pair up consistently: a wording whose winner divides the debts by
  the assets is caught here). Routing puts wordings in one group that give some quantities
  otherwise (a share price and earnings per share, or net income and a share count). The build is
  not made from a minority's winners: those examples stay held as their misses recorded them, and
  the entry must refuse them or answer them as their misses did
  (:meth:`minicache.build.run.BuildRun.work_from`), so requests worded like them are never served
  an answer the target's samples for them contradict. Without such a majority the group is not
  built.

The agreement is the share of all samples drawn (failed ones included) that wrote their example's
winner; the group is built only if most winners are one computation and the agreement is above
``build_agreement``. The build then works from each held example's winning sample instead of the
program its miss was answered with (:meth:`minicache.build.run.BuildRun.work_from`, which also
holds the winners to the requests the group failed on before); an example with no winner (none of
its samples ran to a computation) is left out. Without agreement the group is not built: one greedy
program per example cannot tell a systematic mistake from the group's computation, and samples
that disagree say the target is unsure of it.

The samples are drawn under the group's build lease, renewed before each one (``renew``), so a
slow target cannot outlive it and let another replica build the group too; a renewal refused
(the lease lapsed and another replica took it) stops the drawing (``lease_lost``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minicache.answers import check_answer
from minicache.errors import BackendError, ProgramError
from minicache.miss.prompts import plain_pot_messages
from minicache.models.base import GenerationOptions, ModelBackend
from minicache.models.compute import compute_clock
from minicache.programs.computation import ParameterNaming, computation_of, parameterized
from minicache.programs.signature import answers_match
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
    """What a build's samples agreed on: each example's winning sample, how many samples agree
    with their example's winner, and why the winners are not one computation (None: they are)."""

    winners: dict[str, Sample]  # example id -> its winning sample; examples with no winner absent
    agreed: int  # samples that wrote their example's winning computation
    samples: int  # samples drawn in all (failed ones included)
    split: str | None = None  # why the winners are not one computation across the examples
    lease_lost: bool = False  # a renewal of the group's lease was refused: drawing stopped
    tokens: int = 0  # target tokens the samples cost
    seconds: float = 0.0  # compute seconds the samples cost (minicache.models.compute)
    # examples whose winner is another computation than most winners': not built from
    left_out: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        """The share of all samples that wrote their example's winning computation."""
        return self.agreed / self.samples if self.samples else 0.0

    def reached(self, bar: float) -> bool:
        """Whether the winners are one computation and the agreement is above ``bar``."""
        return bool(self.winners) and self.split is None and self.agreement > bar

    def refusal(self, bar: float) -> str:
        """Why a build whose samples did not reach agreement is not built, as its failure records it."""
        if self.winners and self.split is not None:
            return f"the examples' samples are not one computation: {self.split}"
        return (
            f"the target's samples do not agree: {self.agreed} of {self.samples} samples "
            f"({self.agreement:.0%}) wrote their example's most common computation, not more than "
            f"{bar:.0%}"
        )


def draw_samples(
    target: ModelBackend,
    sandbox: SandboxPool,
    examples: list[Example],
    k: int,
    temperature: float,
    max_tokens: int,
    renew: Callable[[], bool],
) -> tuple[list[Sample], int, bool]:
    """``k`` programs for each example, written by ``target`` for the miss path's own prompt at
    ``temperature`` (each with its own seed, so a backend that seeds its sampler draws k different
    ones), each run and keyed by its computation; the target tokens they cost; and whether the
    group's lease was lost (``renew``, asked before each sample, refused: no more are drawn). A
    sample the target or the sandbox fails is kept with no key: it counts among the samples,
    agreeing with none."""
    samples: list[Sample] = []
    tokens = 0
    for ex in examples:
        messages = plain_pot_messages(ex.question, ex.context)
        request = request_text(ex.question, ex.context)
        for i in range(k):
            if not renew():
                return samples, tokens, True
            options = GenerationOptions(max_tokens=max_tokens, temperature=temperature, seed=i)
            try:
                out = target.complete(messages, options)
            except BackendError:
                samples.append(Sample(ex, ""))
                continue
            tokens += out.prompt_tokens + out.completion_tokens
            sample = Sample(ex, extract_code(out.text))
            samples.append(sample)
            try:
                sample.answer = check_answer(sandbox.run(sample.code, {}).value)
            except ProgramError:
                continue
            found = computation_of(sample.code, ParameterNaming.BY_REQUEST_NUMBER, request=request)
            sample.key = None if found is None else found.shape
    return samples, tokens, False


def example_winners(samples: list[Sample]) -> tuple[dict[str, Sample], int]:
    """Each example's winning sample: the first of the computation most of its own samples wrote
    (among equals, the one sampled first); and how many samples wrote their example's winner.
    Examples keep their order; one none of whose samples has a computation has no winner."""
    winners: dict[str, Sample] = {}
    agreed = 0
    for example_id in dict.fromkeys(s.example.id for s in samples):
        keyed = [s for s in samples if s.example.id == example_id and s.key is not None]
        if not keyed:
            continue
        votes = Counter(s.key for s in keyed)
        top = max(votes.values())
        key = next(s.key for s in keyed if votes[s.key] == top)
        # the computation's sample whose answer most of its samples gave: one that rounded
        # otherwise does not set the example's answer
        answers = Counter(repr(s.answer) for s in keyed if s.key == key)
        winners[example_id] = next(
            s for s in keyed if s.key == key and answers[repr(s.answer)] == max(answers.values())
        )
        agreed += top
    return winners, agreed


def one_computation(
    winners: list[Sample], sandbox: SandboxPool, least: int = 2
) -> tuple[list[Sample], str | None]:
    """The examples' winning samples that are the group's one computation, and why there is none
    (None: there is). Winners are one computation where each one's program lifted against its own
    request has the other's shape with parameters named by their use and, where the two name their
    parameters alike, the one's program run on the other's values gives the other's answer. The
    group's computation is the one more than half the winners write (a winner with no computation
    to compare counts against it), and at least ``least`` of them (a build's ``validate_min``): a
    group whose wordings give some of their quantities otherwise (a price and earnings per share,
    or net income and shares) holds a minority the target computes otherwise. Anything less is no
    computation."""
    classes: list[tuple[str, dict[str, Any], str, list[Sample]]] = []  # program, names, shape
    split: str | None = None
    for s in winners:
        found = parameterized(s.code, request_text(s.example.question, s.example.context))
        shape = None if found is None else computation_of(found[0], ParameterNaming.BY_USE)
        if found is None or shape is None:
            split = f"example {s.example.id}'s winning program has no computation to compare"
            continue
        program, values = found
        reason = None
        for ref_program, ref_values, ref_shape, members in classes:
            if shape.shape != ref_shape:
                reason = reason or (
                    f"examples {members[0].example.id} and {s.example.id} agree on different "
                    "computations"
                )
            elif set(values) == set(ref_values) and not _answers(
                sandbox, ref_program, values, s.answer
            ):
                reason = (
                    f"examples {members[0].example.id} and {s.example.id} use their quantities "
                    "differently: the one's program on the other's values does not give its answer"
                )
            else:
                members.append(s)
                break
        else:
            split = reason or split
            classes.append((program, values, shape.shape, [s]))
    sizes = sorted((len(c[3]) for c in classes), reverse=True)
    if not sizes or sizes[0] < least or 2 * sizes[0] <= len(winners):
        counts = "+".join(str(n) for n in sizes) or "0"
        return [], f"{split or 'no winner'} (winners by computation: {counts}; {least} must agree)"
    majority = next(c[3] for c in classes if len(c[3]) == sizes[0])
    return majority, None


def _answers(sandbox: SandboxPool, program: str, values: dict[str, Any], answer: Any) -> bool:
    """Whether ``program`` run on ``values`` gives ``answer``."""
    try:
        return answers_match(check_answer(sandbox.run(program, values).value), answer)
    except ProgramError:
        return False


def sample_consensus(
    target: ModelBackend,
    sandbox: SandboxPool,
    examples: list[Example],
    k: int,
    temperature: float,
    max_tokens: int,
    renew: Callable[[], bool] = lambda: True,
    least: int = 2,
) -> Consensus:
    """Draw ``k`` samples per example (:func:`draw_samples`), find each example's winner
    (:func:`example_winners`) and the computation more than half the winners write, ``least`` at
    least (:func:`one_computation`; the others are left out), with what drawing them cost."""
    began = compute_clock()
    samples, tokens, lost = draw_samples(
        target, sandbox, examples, k, temperature, max_tokens, renew
    )
    winners, agreed = example_winners(samples)
    split = None
    left_out: list[str] = []
    if not lost:
        majority, split = one_computation(list(winners.values()), sandbox, least)
        left_out = [i for i in winners if split is None and winners[i] not in majority]
        winners = {i: w for i, w in winners.items() if i not in left_out}
    consensus = Consensus(winners, agreed, len(samples), split, lost, tokens, left_out=left_out)
    consensus.seconds = max(0.0, compute_clock() - began)
    return consensus
