"""The checks that make a hit trustworthy: a hit is served only when the cache can show it is right.

The hit stage (:meth:`minicache.hit.path.HitPath.serve`) calls :class:`HitVerifier`; anything it cannot show raises
:class:`HitRefused` and the request pays for a miss instead. Four layers, cheapest first (the whole
story, with the reasons, is docs/hits.md):

1. **Zero-model extraction.** Learned rules (two agreeing examples) and alignment with an exemplar
   (one validated example, :mod:`minicache.hit.align`). When both resolve every variable they must agree.
2. **Corroboration of model-chosen values** (:mod:`minicache.hit.corroboration`): rules, alignment, one
   number per variable, the words around each chosen number, their order and the decoder's margin.
   With ``VerifyConfig.second_choice`` (off by default), when a check refutes one variable's value
   (out of its range or written form, or one number in two variables), the model chooses once
   more without that value (:meth:`HitVerifier._second_choice`), and that choice must pass every check.
3. **Plausibility against the group's examples** (every path): each value in the sign, magnitude and
   written form (percent or not) the examples show, and written in the request where the examples
   wrote it; the answer in their sign and magnitude.
4. **Audits** (:func:`wilson_upper`): a sampled share of hits is also answered by the miss path; an
   entry caught disagreeing whose upper bound on error exceeds delta serves no model-chosen hit until
   agreeing audits bring the bound back under delta.
5. **Probation** (:func:`needs_probation`): where routing has not shown that it keeps a tenant's
   computations apart (SVAMP's word problems share words, not computations), a new entry's first
   hit attempts are answered by the miss path and compared before it serves any.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from minicache.config.engine import VerifyConfig
from minicache.errors import ExtractionError, HitRefused  # HitRefused re-exported
from minicache.hit.align import (
    Alignment,
    align,
    learn_exemplars,
    positions,
    same_value,
    same_values,
)
from minicache.hit.corroboration import corroborate, rule_readings
from minicache.hit.extraction import Extraction, Extractor, Method, check_types
from minicache.store.base import Entry, Variable

MODEL_PATHS = (
    "choice",
    "free",
    "second-choice",
)  # extraction methods where the small model chose the values
# Checks whose refusal names one variable's value as wrong: the model may choose again without it.
REFUTING = ("range", "unit", "unwritten", "duplicate")
ZERO_MODEL_PATHS = ("rule", "align")


def wilson_upper(failures: int, n: int, z: float) -> float:
    """Upper end of the Wilson score interval for an error rate of ``failures`` in ``n`` trials.

    Wilson rather than the normal approximation: it stays inside [0, 1] and is sensible for the
    handful of audits an entry gets (Brown, Cai & DasGupta 2001)."""
    if n <= 0:
        return 1.0
    p = failures / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def needs_probation(counters: dict[str, int], config: VerifyConfig) -> bool:
    """Whether a tenant's next new entry starts on probation, from the tenant's record
    (``probations`` run, ``probations_failed``, ``builds_ok``): until a few have run; while more than
    ``probation_max_failure`` of them are estimated to fail (Laplace's rule, so two passes out of two
    do not read as certainty); and otherwise for every ``probation_every``-th entry built."""
    return probation_reason(counters, config) is not None


def probation_reason(counters: dict[str, int], config: VerifyConfig) -> str | None:
    """Why a new entry starts on probation, stored in its ``validation.probation``: ``"sample"`` for
    every ``probation_every``-th entry built (whatever the record); ``"record"`` while the tenant's
    record has not shown its entries safe; None when it starts without."""
    if config.probation <= 0:
        return None
    if config.probation_every > 0 and counters.get("builds_ok", 0) % config.probation_every == 0:
        return "sample"
    return "record" if _record_unproven(counters, config) else None


def _record_unproven(counters: dict[str, int], config: VerifyConfig) -> bool:
    run, failed = counters.get("probations", 0), counters.get("probations_failed", 0)
    return (
        run < config.probation_tenant_min or (failed + 1) / (run + 2) > config.probation_max_failure
    )


def on_probation(
    entry: Entry, config: VerifyConfig, counters: Callable[[], dict[str, int]] | None = None
) -> bool:
    """An entry built on probation that has not yet had ``probation`` agreeing comparisons.

    An entry put on probation only because its tenant's record was not yet established
    (``"record"``) is released as soon as ``counters()`` (the tenant's record, read only then) shows
    it established: builds come in bursts. On Formula-v6 the first 10 entries were built before five
    probations had finished, and 4 or 5 of them first came back after the record was established,
    each paying a probation miss it no longer asked for (2026-12-03). A sampled entry, or one
    stored before the reason was (``True``), stays on it."""
    flag = entry.validation.get("probation")
    if not flag or entry.audits_agreed >= config.probation:
        return False
    if flag == "record" and counters is not None and not _record_unproven(counters(), config):
        return False
    return True


def demoted(entry: Entry, delta: float, z: float) -> bool:
    """An entry caught wrong by an audit, whose upper confidence bound on error exceeds ``delta``.

    With no disagreement at all the bound is not applied (it would need ~380 agreeing audits at
    delta=0.01 before a new entry could serve): the build's validation is the entry's starting trust."""
    d = entry.audits_disagreed
    return d > 0 and wilson_upper(d, d + entry.audits_agreed, z) > delta


# ---------------------------------------------------------------------------------------------
# What a build learns for the checks: entry.validation["profile"]


def learn_profile(
    template: list[Variable],
    validated: list[tuple[str, dict[str, Any]]],
    answers: list[Any],
    exemplars: int = 3,
) -> dict[str, Any]:
    """Exemplars for alignment, each numeric variable's observed values and written kinds, and the
    group's numeric answers."""
    values: dict[str, list[Any]] = {}
    kinds: dict[str, list[str]] = {}
    for text, vals in validated:
        pos = positions(text)
        for var in template:
            v = vals.get(var.name)
            if var.type == "string" or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            values.setdefault(var.name, []).append(v)
            kinds.setdefault(var.name, []).extend(p.kind for p in pos if v in p.values())
    equal = [
        [a.name, b.name]
        for i, a in enumerate(template)
        for b in template[i + 1 :]
        if validated and all(vals.get(a.name) == vals.get(b.name) for _, vals in validated)
    ]
    numeric = [a for a in answers if isinstance(a, (int, float)) and not isinstance(a, bool)]
    return {
        "exemplars": learn_exemplars(template, validated, exemplars),
        "values": {k: v[:20] for k, v in values.items()},
        "kinds": {k: sorted(set(v)) for k, v in kinds.items()},
        "equal": equal,
        "answers": numeric[:20],
    }


# ---------------------------------------------------------------------------------------------
# The checks


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _outside(value: float, seen: list[float], factor: float) -> str | None:
    """Why ``value`` does not fit the sign and magnitude of ``seen``, or None if it does.

    A positive or negative value is plausible when a nonzero example had its sign; zero when an
    example was zero or the examples had both signs. Zeros among the examples add zero to what is
    plausible instead of switching the checks off: formula-v8's Balance of Trade, its answers all
    negative, admitted every positive answer once a 0 had joined them. Examples that are all zero
    say nothing about sign or magnitude."""
    if not seen:
        return None
    signs, sign = {_sign(s) for s in seen}, _sign(value)
    if signs != {0} and sign not in signs and not (sign == 0 and {-1, 1} <= signs):
        return f"{value} has another sign than every example ({min(seen)} to {max(seen)})"
    nonzero = [abs(s) for s in seen if s]
    if nonzero and value:
        lo, hi = min(nonzero), max(nonzero)
        if abs(value) < lo / factor or abs(value) > hi * factor:
            return f"{value} is far outside the examples' magnitude ({lo:g} to {hi:g})"
    return None


def check_values(
    profile: dict[str, Any],
    template: list[Variable],
    values: dict[str, Any],
    text: str,
    factor: float,
) -> None:
    """Each value in the sign, magnitude and written form (percent or not) of the group's examples, and
    written in the request when it was written in theirs."""
    pos = positions(text)
    for var in template:
        v = values.get(var.name)
        if var.type == "string" or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        why = _outside(v, profile.get("values", {}).get(var.name, []), factor)
        if why:
            raise HitRefused("range", f"{var.name}: {why}", variable=var.name)
        seen_kinds = set(profile.get("kinds", {}).get(var.name, []))
        here = {p.kind for p in pos if v in p.values()}
        if seen_kinds and not here:
            # Only the small model can give a number the request does not write. On WebShop-v2 it gave
            # max_price 140 (an entry's default) to requests with no price, twice: both wrong hits.
            raise HitRefused(
                "unwritten",
                f"{var.name} was written in the examples' requests; {v} is not written in this one",
                variable=var.name,
            )
        if seen_kinds and here:
            if seen_kinds == {"pct"} and "pct" not in here:
                raise HitRefused(
                    "unit",
                    f"{var.name} was a percentage in every example; {v} is not written as one",
                    variable=var.name,
                )
            if seen_kinds == {"money"} and all(k.startswith(("unit:", "word:")) for k in here):
                # Written plainly ("assets 64,000") it may still be the amount; with a unit it is not.
                # WebShop-v2's one wrong choice hit gave max_price ($ in every example) the 1 of "1tb".
                raise HitRefused(
                    "unit",
                    f"{var.name} was a money amount in every example; {v} is written "
                    f"as {', '.join(sorted(k.split(':', 1)[1] for k in here))}",
                    variable=var.name,
                )
            if "pct" not in seen_kinds and here == {"pct"}:
                raise HitRefused(
                    "unit",
                    f"{var.name} was never a percentage in the examples; {v} is written as one",
                    variable=var.name,
                )


def _checked_values(
    profile: dict[str, Any],
    template: list[Variable],
    values: dict[str, Any],
    text: str,
    factor: float,
) -> None:
    """:func:`check_values`, its refusal carrying the values it refused (minicache.hit.refusals)."""
    try:
        check_values(profile, template, values, text, factor)
    except HitRefused as exc:
        exc.readings = exc.readings or {"hit": dict(values)}
        raise


def check_answer(profile: dict[str, Any], value: Any, factor: float) -> None:
    """The answer in the sign and magnitude of the answers the group's examples were served."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        why = _outside(value, profile.get("answers", []), factor)
        if why:
            raise HitRefused("answer", why)


class HitVerifier:
    """Extraction for a hit, with every check above. Stateless: safe to share between threads."""

    def __init__(self, extractor: Extractor, config: VerifyConfig | None = None) -> None:
        self.extractor = extractor
        self.config = config or VerifyConfig()

    def aligned(self, entry: Entry, text: str) -> tuple[Alignment | None, dict[str, Any]]:
        """The first complete alignment (None if there is none) and the slots every exemplar that read
        them agrees on. Two exemplars aligning to different values refuse the hit. Where none aligns
        completely, a reading by elimination (minicache.hit.align) counts when every exemplar, two at
        least, gives the same one. Replayed on formula-v23's entries (scripts/align_replay.py), one
        exemplar's reading alone read 3 requests wrong where pot was right; the agreement of all,
        none (of the 28 requests this and the per-year kind newly read, 27 right, one wrong for pot too)."""
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
                        "align", "two validated examples align the request differently"
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
        refusal raised after the model chose carries its seconds as ``model_s``."""
        began = time.perf_counter()
        text = self.extractor.text_for(entry, request_text)
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
                "rule",
                f"rules read {by_rules}, alignment reads {aligned.values}",
                readings={"rule": dict(by_rules), "align": dict(aligned.values)},
            )
        zero_model_values: tuple[Method, dict[str, Any]] | None = (
            ("rule", by_rules)
            if by_rules is not None
            else ("align", aligned.values)
            if aligned is not None
            else None
        )
        if zero_model_values is not None:
            method, values = zero_model_values
            checked = check_types(entry.template, values)
            _checked_values(profile, entry.template, checked, text, self.config.value_range)
            return Extraction(checked, method, time.perf_counter() - began)
        if no_model is not None:
            raise no_model
        exemplars = profile.get("exemplars") or []
        if exemplars and all("table" in ex for ex in exemplars):
            # The small model read its own example's cells right on 4 of 17 TAT-QA requests
            # (minicache.hit.tables): where the table does not answer, the miss path does.
            why = "; ".join(sorted({align(ex, text).reason for ex in exemplars}))
            raise HitRefused("align", f"the entry's values are read from the table only: {why}")
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
        mode = entry.validation.get("extraction", "choice")
        pinned = (
            self.pinned(entry, text, partial)
            if mode == "choice" and self.config.pin_readings
            else {}
        )
        extraction = self.extractor.by_model(
            entry.template, text, choice=(mode == "choice"), fixed=pinned
        )
        if pinned:
            extraction.detail["pinned"] = sorted(pinned)
        try:
            self._corroborated(entry, extraction, text, partial)
        except HitRefused as refused:
            if mode != "choice" or not self.config.second_choice:
                raise
            extraction = self._second_choice(entry, extraction, text, partial, refused, pinned)
            extraction.seconds = time.perf_counter() - began
        if self.config.reorder_check and len(entry.template) > 1:
            # A model that fills variables by their order in the prompt, not by meaning, changes its
            # answer when the order changes. Costs a second call: off unless asked for.
            again = self.extractor.by_model(
                entry.template[::-1], text, choice=(mode == "choice"), fixed=pinned
            )
            differ = [k for k, v in extraction.variables.items() if again.variables.get(k) != v]
            if differ:
                raise HitRefused(
                    "reorder",
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
        variable refused the hit, while rule readings were right 99% of the time (issue 16); replayed
        on formula-v12..v16 (scripts/second_choice_replay.py --pin) pinning turned such refusals into
        right hits. Only rules pin: a slot read by aligning one exemplar alone (``partial``) once read
        the wrong number (formula-v16, formula-train-516) and pinning it made a wrong hit where the
        disagreement had refused it. Every other check (range, unit, duplicate, the words around each
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
        _checked_values(
            profile, entry.template, extraction.variables, text, self.config.value_range
        )
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
        again.method = "second-choice"
        again.small_tokens += first.small_tokens
        again.detail["first_choice"] = {"refused": refused.check, "variable": name, "value": value}
        return again

    def check_answer(self, entry: Entry, value: Any) -> None:
        check_answer(entry.validation.get("profile") or {}, value, self.config.answer_range)
