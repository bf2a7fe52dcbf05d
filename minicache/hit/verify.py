"""The checks that make a hit trustworthy: a hit is served only when the cache can show it is right.

The hit stage (:meth:`minicache.hit.path.HitPath.serve`) calls :class:`HitVerifier`; anything it
cannot show raises :class:`HitRefused` and the request pays for a miss instead. Five layers, cheapest
first (the whole story, with the reasons, is docs/hits.md):

1. **Zero-model extraction.** Learned rules (two agreeing examples) and alignment with an exemplar
   (one validated example, :mod:`minicache.hit.align`). When both resolve every variable they must
   agree, and a reading of slots of one kind must be told apart by a reader independent of it
   (:mod:`minicache.hit.independence`).
2. **Corroboration of model-chosen values** (:mod:`minicache.hit.corroboration`): rules, alignment,
   one number per variable, the words around each chosen number, their order and the decoder's
   margin.
   With ``VerifyConfig.second_choice`` (off by default), when a check refutes one variable's value
   (out of its range or written form, or one number in two variables), the model chooses once
   more without that value (:meth:`HitVerifier._second_choice`), and that choice must pass every
   check.
3. **Plausibility against the group's examples** (every path, :mod:`minicache.hit.profile`): each
   value in the sign, magnitude and written form (percent or not) the examples show, written in the
   request where the examples wrote it, and followed by no other word than one the entry accepts
   there (:mod:`minicache.hit.words_after`); the answer in their sign and magnitude.
4. **Audits** (:mod:`minicache.hit.audits`): a sampled share of hits is also answered by the miss
   path; an entry caught disagreeing whose upper bound on error exceeds delta serves no model-chosen
   hit until agreeing audits bring the bound back under delta.
5. **Probation** (:func:`minicache.hit.audits.needs_probation`): where routing has not shown that it
   keeps a tenant's computations apart (SVAMP's word problems share words, not computations), a new
   entry's first hit attempts are answered by the miss path and compared before it serves any. How
   many grows with the contradictions stored in the entry's validation; the share of later hits
   audited grows with every doubt in its record (:mod:`minicache.hit.scrutiny`).
"""

from __future__ import annotations

import time
from typing import Any

from minicache.config.engine import VerifyConfig
from minicache.errors import ExtractionError, HitRefused
from minicache.hit.align import Alignment, align, left_beside, same_value, same_values
from minicache.hit.checks import Check
from minicache.hit.corroboration import corroborate, rule_readings
from minicache.hit.extraction import Extraction, Extractor, Method, check_types
from minicache.hit.independence import corroborate_reading
from minicache.hit.profile import check_answer, checked_values
from minicache.hit.word_slots import in_exemplar_words
from minicache.hit.wording import check_wording
from minicache.store.base import Entry

__all__ = ["MODEL_PATHS", "REFUTING", "ZERO_MODEL_PATHS", "HitRefused", "HitVerifier"]

# Extraction methods where the small model chose the values, and those where it did not.
MODEL_PATHS = (Method.CHOICE, Method.FREE, Method.SECOND_CHOICE)
ZERO_MODEL_PATHS = (Method.RULE, Method.ALIGN)
# Checks whose refusal names one variable's value as wrong: the model may choose again without it.
# Not Check.WORD_AFTER: the word a request writes may be a right one the entry has not yet learned
# (minicache.hit.words_after), and a second choice would take the right value out.
REFUTING = (Check.RANGE, Check.UNIT, Check.UNWRITTEN, Check.DUPLICATE)


class HitVerifier:
    """Extraction for a hit, with every check above. Stateless: safe to share between threads."""

    def __init__(
        self, extractor: Extractor, config: VerifyConfig | None = None, *, word_slots: bool = False
    ) -> None:
        self.extractor = extractor
        self.config = config or VerifyConfig()
        # EngineConfig.route_word_slots: a request naming other people or items than an exemplar
        # is read in the exemplar's words (minicache.hit.word_slots).
        self.word_slots = word_slots

    def aligned(self, entry: Entry, text: str) -> tuple[Alignment | None, dict[str, Any]]:
        """The first complete alignment (None if there is none) and the slots every exemplar that read
        them agrees on. Two exemplars aligning to different values refuse the hit. Where none aligns
        completely, a reading by elimination (minicache.hit.align) counts when every exemplar, two at
        least, gives the same one. Replayed on a Formula run's entries, one exemplar's reading alone
        read 3 requests wrong where PoT was right; the agreement of all, none (of the 28 requests
        this and the per-year kind newly read, 27 right, one wrong for PoT too)."""
        complete: Alignment | None = None
        partial: dict[str, Any] = {}
        conflicts: set[str] = set()
        exemplars = (entry.validation.get("profile") or {}).get("exemplars", [])
        eliminated: list[dict[str, Any] | None] = []
        for exemplar in exemplars:
            found = align(exemplar, text)
            if found.complete:
                if complete is not None and not same_values(complete.values, found.values):
                    raise HitRefused(
                        Check.ALIGN, "two validated examples align the request differently"
                    )
                complete = complete or found
            eliminated.append(found.by_elimination)
            for k, v in found.values.items():
                if k in partial and not same_value(partial[k], v):
                    conflicts.add(k)
                partial.setdefault(k, v)
        first = eliminated[0] if eliminated else None
        if (
            complete is None
            and len(eliminated) >= 2
            and first is not None
            and all(e is not None and same_values(e, first) for e in eliminated)
        ):
            complete = Alignment(first, True, "by elimination, every exemplar agreeing")
        return complete, {k: v for k, v in partial.items() if k not in conflicts}

    def extract(
        self, entry: Entry, request_text: str, *, no_model: HitRefused | None = None
    ) -> Extraction:
        """The verified values for ``entry`` from a request; raises HitRefused (or ExtractionError
        when the small model fails outright, which counts as the entry's failure). ``no_model``: the
        refusal to raise where only the small model could read the values (None: it is asked). A
        refusal raised after the model chose carries its seconds as ``model_s``. With word slots,
        every reader, the small model too, reads the request in an exemplar's words where it names
        other people or items (minicache.hit.word_slots): its numbers are the request's. One that
        differs from an exemplar's request in a word it may not be read through is refused first.
        Values that pass every check are refused last where the request writes an operation word
        no validated example wrote or leaves out a word of the quantity every one asked for, or
        (``VerifyConfig.wording`` ``full``) any word every one wrote
        (:func:`minicache.hit.wording.check_wording`)."""
        began = time.perf_counter()
        text = self.extractor.text_for(entry, request_text)
        extraction = self._extract(entry, text, began, no_model)
        try:
            profile = entry.validation.get("profile") or {}
            check_wording(profile, text, extraction.variables, self.config.wording)
        except HitRefused as refused:
            if extraction.method in MODEL_PATHS:
                refused.model_s = extraction.seconds
            raise
        return extraction

    def _extract(
        self, entry: Entry, text: str, began: float, no_model: HitRefused | None
    ) -> Extraction:
        """:meth:`extract` but for the wording check."""
        if self.word_slots:
            text = in_exemplar_words(entry, text)
        profile = entry.validation.get("profile") or {}
        by_rules = self.extractor.by_rules(entry, text)
        zero_model = self.config.align and self.extractor.use_rules
        aligned, partial = self.aligned(entry, text) if zero_model else (None, {})
        if (
            by_rules is not None
            and aligned is not None
            and not same_values(by_rules, aligned.values)
        ):
            raise HitRefused(
                Check.RULE,
                f"rules read {by_rules}, alignment reads {aligned.values}",
                readings={"rule": dict(by_rules), "align": dict(aligned.values)},
            )
        if by_rules is not None and aligned is None:
            _nothing_left_beside(profile, text, by_rules)
        zero_model_values: tuple[Method, dict[str, Any]] | None = (
            (Method.RULE, by_rules)
            if by_rules is not None
            else (Method.ALIGN, aligned.values)
            if aligned is not None
            else None
        )
        if zero_model_values is not None:
            method, values = zero_model_values
            checked = check_types(entry.template, values)
            checked_values(profile, entry.template, checked, text, self.config.value_range)
            if self.config.corroborate_zero_model:
                other = partial if method == Method.RULE else rule_readings(entry, text)
                corroborate_reading(entry, method, checked, text, other)
            return Extraction(checked, method, time.perf_counter() - began)
        if no_model is not None:
            raise no_model
        exemplars = profile.get("exemplars") or []
        if exemplars and all("table" in ex for ex in exemplars):
            # The small model read its own example's cells right on 4 of 17 TAT-QA requests
            # (minicache.hit.tables): where the table does not answer, the miss path does.
            why = "; ".join(sorted({align(ex, text).reason for ex in exemplars}))
            raise HitRefused(Check.ALIGN, f"the entry's values are read from the table only: {why}")
        try:
            return self._by_model(entry, text, profile, partial, began)
        except HitRefused as refused:
            refused.model_s = time.perf_counter() - began
            raise

    def _by_model(
        self,
        entry: Entry,
        text: str,
        profile: dict[str, Any],
        partial: dict[str, Any],
        began: float,
    ) -> Extraction:
        """The small model's choice, corroborated (and chosen again or re-asked where configured)."""
        mode = entry.validation.get("extraction", Method.CHOICE)
        pinned = (
            self.pinned(entry, text, partial)
            if mode == Method.CHOICE and self.config.pin_readings
            else {}
        )
        extraction = self.extractor.by_model(
            entry.template, text, choice=(mode == Method.CHOICE), fixed=pinned
        )
        if pinned:
            extraction.detail["pinned"] = sorted(pinned)
        try:
            self._corroborated(entry, extraction, text, partial)
        except HitRefused as refused:
            if mode != Method.CHOICE or not self.config.second_choice:
                raise
            extraction = self._second_choice(entry, extraction, text, partial, refused, pinned)
            extraction.seconds = time.perf_counter() - began
        if self.config.reorder_check and len(entry.template) > 1:
            # A model that fills variables by their order in the prompt, not by meaning, changes its
            # answer when the order changes. Costs a second call: off unless asked for.
            again = self.extractor.by_model(
                entry.template[::-1], text, choice=(mode == Method.CHOICE), fixed=pinned
            )
            differ = [k for k, v in extraction.variables.items() if again.variables.get(k) != v]
            if differ:
                raise HitRefused(
                    Check.REORDER,
                    f"with the variables in reverse order the model chose "
                    f"{', '.join(f'{k}={again.variables[k]}' for k in differ)}",
                )
            extraction.small_tokens += again.small_tokens
            extraction.seconds = time.perf_counter() - began
        return extraction

    def pinned(self, entry: Entry, text: str, partial: dict[str, Any]) -> dict[str, Any]:
        """The values the entry's learned rules read in ``text``, given to the small model, which
        chooses only the rest. A reading the exemplars' alignment contradicts is not given (the
        disagreement then refuses the hit, as it would unpinned); empty when the rules would leave
        the model nothing to choose.

        Why: with every value chosen by the model, a model that disagreed with a rule on one
        variable refused the hit, while rule readings were right 99% of the time; replayed on Formula
        runs, pinning turned such refusals into right hits. Only rules pin: a slot read by aligning
        one exemplar alone (``partial``) once read the wrong number, and pinning it made a wrong hit
        where the disagreement had refused it. Every other check (range, unit, duplicate, the words around each
        number, the alignment, margins) still runs on all the values."""
        numeric = {v.name for v in entry.template if v.type != "string"}
        readings = {
            k: v
            for k, v in rule_readings(entry, text).items()
            if v is not None and k in numeric and (k not in partial or same_value(partial[k], v))
        }
        return {} if numeric <= set(readings) else readings

    def _corroborated(
        self, entry: Entry, extraction: Extraction, text: str, partial: dict[str, Any]
    ) -> None:
        profile = entry.validation.get("profile") or {}
        checked_values(profile, entry.template, extraction.variables, text, self.config.value_range)
        corroborate(entry, extraction, text, partial, self.config.min_margin)

    def _second_choice(
        self,
        entry: Entry,
        first: Extraction,
        text: str,
        partial: dict[str, Any],
        refused: HitRefused,
        pinned: dict[str, Any],
    ) -> Extraction:
        """The model chooses again with the one value a check refuted taken out of that variable's
        choices, and the new choice must pass every check. Only a refutation qualifies (a value
        outside the variable's range or written form, or one number in two variables): the check
        names a value that is wrong for that variable. A disagreement (with a rule, an alignment, the
        words around another number, the order) or a small margin says the request is unclear, and
        the miss path answers it. When the second choice fails too, the first refusal is raised: it
        is the one that the refusal review compares with the miss answer (minicache.hit.refusals)."""
        name = refused.variable
        if refused.check not in REFUTING or name is None or name not in first.variables:
            raise refused
        value = first.variables[name]
        try:
            fixed = {k: v for k, v in pinned.items() if k != name}
            again = self.extractor.by_model(
                entry.template, text, choice=True, exclude={name: [value]}, fixed=fixed
            )
            if fixed:
                again.detail["pinned"] = sorted(fixed)
            if again.variables.get(name) == value:  # a backend that ignored the schema
                raise HitRefused(refused.check, "the value was chosen again")
            self._corroborated(entry, again, text, partial)
        except ExtractionError:  # HitRefused included
            raise refused from None
        again.method = Method.SECOND_CHOICE
        again.small_tokens += first.small_tokens
        again.detail["first_choice"] = {"refused": refused.check, "variable": name, "value": value}
        return again

    def check_answer(self, entry: Entry, value: Any) -> None:
        check_answer(entry.validation.get("profile") or {}, value, self.config.answer_range)


def _nothing_left_beside(profile: dict[str, Any], text: str, values: dict[str, Any]) -> None:
    """Refuse a keyword rule's reading where every exemplar's alignment finds a number of ``text``
    left over beside it (:func:`minicache.hit.align.left_beside`): the rules read only the numbers
    they know, and "a 20% discount, then a further 10% off" has one the entry's program has no place
    for. An entry whose exemplars are all tables reads cells, not every number, and is not held
    to this."""
    exemplars = [ex for ex in profile.get("exemplars") or [] if "table" not in ex]
    left = [left_beside(ex, text, values) for ex in exemplars]
    if exemplars and all(p is not None for p in left):
        first = next(p for p in left if p is not None)
        raise HitRefused(
            Check.RULE,
            f"{first.readings[0].text.strip()!r} is left over beside the rules' reading, a "
            f"{first.kind} number no variable reads",
            readings={"rule": dict(values)},
        )
