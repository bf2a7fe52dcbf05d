"""Whether a build may trust a candidate: its program run through the real hit path (extraction,
then the program) on the group's held examples, matching enough of the answers they were served.

The build (:mod:`minicache.build.builder`) chooses the candidates and what a result means for the
group; this module only checks one candidate and says what it found
(:class:`~minicache.build.validation.Validation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from minicache.answers import check_answer
from minicache.build.reach import unreachable
from minicache.build.validation import UNREACHABLE, Check, Validation
from minicache.config.engine import EngineConfig
from minicache.errors import ExtractionError, ProgramError, ProgramShapeError
from minicache.hit.align import Alignment, align
from minicache.hit.exemplars import learn_exemplar
from minicache.hit.extraction import Extractor, check_types
from minicache.models.compute import compute_clock
from minicache.programs.numbers import candidate_values
from minicache.programs.signature import ProgramSignature, answers_match, parse_signature
from minicache.request import request_text, strip_prefix
from minicache.sandbox import SandboxPool
from minicache.store import Example

Mode = Literal["choice", "free"]
# An example to check: itself, its request text (the group's shared prefix stripped), and its
# complete alignment with the candidate's exemplar (None: the small model reads it).
Planned = tuple[Example, str, Alignment | None]


@dataclass
class _Tally:
    """What the checks of one validation have found so far."""

    backed: bool  # grows when a complete alignment reproduces an example other than the origin
    checks: list[Check] = field(default_factory=list)
    validated: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    model_s: float = 0.0
    declined: str | None = None  # why the small model was not asked (admission), once it was not

    @property
    def passed(self) -> int:
        return sum(c.match for c in self.checks)


class Validator:
    """Checks a candidate entry on held examples through the real hit path."""

    def __init__(self, sandbox: SandboxPool, extractor: Extractor, config: EngineConfig) -> None:
        self.sandbox, self.extractor, self.config = sandbox, extractor, config

    def validate(
        self,
        source: str,
        held: list[Example],
        origin: Example,
        prefix: str,
        backed: bool = True,
        also: list[Example] | None = None,
        ask_model: Callable[[], str | None] | None = None,
    ) -> Validation:
        """Run the real hit path (extraction, then the program) on each held example; the candidate
        passes if enough answers match the ones its examples were served.

        Extraction is as on a hit: zero-model alignment first, with an exemplar learned from the
        example the candidate's defaults are the values of (its origin; docs/hits.md, section 1),
        then the small model. An alignment that is complete but reads the values wrong fails the
        check, as the hit it stands for would be wrong. Why not the small model alone: on Formula
        it swapped values in validation (CPI 300 and 315 read the other way round) and failed builds
        a hit would have served right by alignment, and each of its extractions costs 1-3 s of a
        build's compute on two cores (4-8 s over TAT-QA's tables).

        How many must match: ``validate_min`` of the held examples, and more than half of them, when
        something other than the model backs the candidate (``backed``: another example's own program
        agreed with it, or the target wrote it from the held examples), or when a complete alignment
        reproduces an example other than its origin. Otherwise every held example must match, so the
        model-free checks run first and the first failed model check ends the validation. Why more
        than half: a failed build's wrong examples join the held ones (:mod:`minicache.build.failures`),
        and a rebuild in a SVAMP group of five different word-problem computations made an entry
        that fitted its origin and one other of 4 held: 2 was ``validate_min``. At the default 3
        held the two bars are one (2 of 3). Why: on TAT-QA each failed build validated two such
        candidates, programs over one table's line items that the small model then read off other
        tables' wrong rows, and spent 20-25 s of compute on four extractions that could not have
        made an entry trusted on its own example alone.

        A candidate whose values are table cells (its exemplar is a table exemplar, minicache.hit.tables)
        is checked only where its table reads the example, as its hits are served only there (the
        hit path refuses the rest, ``refused``); and, since those checks need no model, on every
        example of ``also`` (the group's newest) its table reads too. Of those, ``validate_min`` must
        match, and a majority when backed (all when not), so that no table entry stands on its origin
        alone. Why: TAT-QA's largest percentage-change group failed both builds on held examples
        the table did not read (one asked for two changes at once) and that the small model read
        wrong; the entry would have refused them. On the same stream with this, that group was
        built in 0.1 s and served table hits.

        ``ask_model``, called before the small model's first check, says why the build should not pay
        for it (admission, :meth:`Admission.model_checks_declined`); the validation then stops there,
        ``declined``. A check no choice of the example's numbers can pass asks no model
        (:mod:`minicache.build.reach`)."""
        try:  # a target-built program may have no defaults
            signature = parse_signature(source, require_defaults=False)
        except ProgramShapeError as exc:
            return Validation(ok=False, error=f"program shape: {exc}")
        origin_text = strip_prefix(request_text(origin.question, origin.context), prefix)
        mode = self._mode(signature, origin_text)
        exemplar = self._exemplar(signature, origin_text)
        table = exemplar is not None and "table" in exemplar
        pool = held + [ex for ex in also or [] if table and all(ex.id != h.id for h in held)]
        planned, refused = _plan(pool, prefix, exemplar, table)
        tally = _Tally(backed=backed)

        def needed() -> int:
            return self._needed(table, tally.backed, len(planned), len(held))

        for n, (ex, text, aligned) in enumerate(planned):
            if tally.passed + (len(planned) - n) < needed():
                break  # cannot reach the required matches any more
            check = self._check(
                source, signature, mode, ex, text, aligned, origin, tally, ask_model
            )
            if check is None:
                break  # the validation stops before the model's first check
            tally.checks.append(check)
        passed = tally.passed
        return Validation(
            ok=tally.declined is None and passed >= needed(),
            error=tally.declined,
            template=signature.template,
            extraction=mode,
            checks=tally.checks,
            validated=tally.validated,
            passed=passed,
            of=len(planned),
            shared_prefix=prefix,
            defaults=signature.defaults,
            refused=refused,
            model_s=tally.model_s,
            declined=tally.declined is not None,
        )

    def _mode(self, signature: ProgramSignature, origin_text: str) -> Mode:
        """How the small model reads an example: choosing among the numbers written in its request
        works only if the origin's values (the program's defaults) are written in the origin's."""
        written = candidate_values(origin_text)
        numeric = [
            v for v in signature.defaults.values() if v is not None and not isinstance(v, str)
        ]
        return "choice" if self.config.use_choice and all(v in written for v in numeric) else "free"

    def _exemplar(self, signature: ProgramSignature, origin_text: str) -> dict[str, Any] | None:
        """The exemplar a hit would align requests with, learned from the origin, or None."""
        if (
            self.config.use_rules
            and self.config.verify.align
            and None not in signature.defaults.values()
        ):
            return learn_exemplar(signature.template, origin_text, signature.defaults)
        return None

    def _needed(self, table: bool, backed: bool, planned: int, held: int) -> int:
        """How many checks must match (see :meth:`validate`)."""
        if table:  # a majority of what its table reads, and never its origin alone
            return max(self.config.validate_min, planned // 2 + 1 if backed else planned)
        return max(min(self.config.validate_min, held), held // 2 + 1) if backed else held

    def _check(
        self,
        source: str,
        signature: ProgramSignature,
        mode: Mode,
        ex: Example,
        text: str,
        aligned: Alignment | None,
        origin: Example,
        tally: _Tally,
        ask_model: Callable[[], str | None] | None,
    ) -> Check | None:
        """One example through the hit path: its values (aligned, or read by the small model), the
        program on them, the answer against the served one. None when admission declined the
        small model's reading (``tally.declined``)."""
        check = Check(example=ex.id, expected=ex.answer)
        try:
            if aligned is not None:
                check.extraction, check.variables = (
                    "align",
                    check_types(signature.template, aligned.values),
                )
            else:
                check.extraction = mode
                if mode == "choice" and unreachable(
                    source, signature.template, text, ex.answer, self.sandbox
                ):
                    raise ExtractionError(UNREACHABLE)
                tally.declined = ask_model() if ask_model is not None else None
                if tally.declined is not None:
                    return None
                check.variables = self._read_by_model(signature, text, mode, tally)
            value = check_answer(self.sandbox.run(source, check.variables).value)
            check.got, check.match = value, answers_match(value, ex.answer)
            if check.match:
                tally.validated.append((text, check.variables))
                tally.backed = tally.backed or (aligned is not None and ex.id != origin.id)
        except (ExtractionError, ProgramError) as exc:
            check.match, check.error = False, str(exc)
        return check

    def _read_by_model(
        self, signature: ProgramSignature, text: str, mode: Mode, tally: _Tally
    ) -> dict[str, Any]:
        """The small model's reading of ``text``'s values, its compute seconds counted even when
        it fails."""
        began = compute_clock()
        try:
            return self.extractor.by_model(
                signature.template, text, choice=(mode == "choice")
            ).variables
        finally:
            tally.model_s += compute_clock() - began


def _plan(
    pool: list[Example], prefix: str, exemplar: dict[str, Any] | None, table: bool
) -> tuple[list[Planned], list[str]]:
    """Each example with its alignment, the complete ones (no model) first; and the ids of those a
    table candidate's hit path would refuse (its table does not read them)."""
    planned: list[Planned] = []
    refused: list[str] = []
    for ex in pool:
        text = strip_prefix(request_text(ex.question, ex.context), prefix)
        aligned = align(exemplar, text) if exemplar is not None else None
        complete = aligned if aligned is not None and aligned.complete else None
        if table and complete is None:
            refused.append(ex.id)
        else:
            planned.append((ex, text, complete))
    planned.sort(key=lambda p: p[2] is None)
    return planned, refused
