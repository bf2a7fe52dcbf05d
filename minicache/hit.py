"""The checks that make a hit trustworthy: a hit is served only when the cache can show it is right.

The hit stage (:meth:`minicache.hit_path.HitPath.serve`) calls :class:`HitVerifier`; anything it cannot show raises
:class:`HitRefused` and the request pays for a miss instead. Four layers, cheapest first (the whole
story, with the reasons, is docs/hits.md):

1. **Zero-model extraction.** Learned rules (two agreeing examples) and alignment with an exemplar
   (one validated example, :mod:`minicache.align`). When both resolve every variable they must agree.
2. **Corroboration of model-chosen values.** When the small model chooses, its choice must agree with
   every rule and aligned slot that applies, no number may fill two variables unless the request
   writes it twice or the group's examples always had them equal, the words around each chosen
   number must not point to another variable, and the decoder's margin (log-probability gap to the
   runner-up) must be large enough where the backend reports it.
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
from dataclasses import dataclass
from typing import Any

from .align import Alignment, align, cue_score, learn_exemplars, number_words, positions, same_value, same_values, stems
from .errors import HitRefused  # re-exported
from .extraction import Extraction, Extractor, Method, check_types
from .lifting import EXAMPLE_MARK
from .rules import acronym, apply_rule, name_stems
from .store.base import Entry, Variable

MODEL_PATHS = ("choice", "free")  # extraction methods where the small model chose the values
ZERO_MODEL_PATHS = ("rule", "align")


@dataclass
class VerifyConfig:
    """Knobs of the hit checks (see docs/hits.md for how they were chosen)."""

    value_range: float = 100.0  # a value may lie this factor outside the examples' magnitudes
    answer_range: float = 1000.0  # ... and the answer this factor outside the examples' answers
    min_margin: float = 1.0  # the decoder's log-probability gap, chosen vs runner-up (nats)
    exemplars: int = 3  # exemplars kept per entry for alignment
    align: bool = True  # zero-model alignment with exemplars (EngineConfig.use_rules=False switches it off too)
    reorder_check: bool = False  # a second model call with the variables in reverse order must agree
    # Probation (layer 5): a new entry's first `probation` hit attempts are answered by the miss path
    # and compared with the would-be hit; one disagreement evicts it. A tenant whose probations mostly
    # pass (at least `probation_tenant_min` run, failure estimate (failed+1)/(run+2) at most
    # `probation_max_failure`) has shown that routing keeps its computations apart: its new entries
    # skip probation, except every `probation_every`-th, so the record follows the workload. 0 switches
    # probation off. (docs/hits.md: the rates measured on SVAMP and Formula these were chosen between.)
    probation: int = 1
    probation_tenant_min: int = 5
    probation_max_failure: float = 0.35
    probation_every: int = 4


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
    return run < config.probation_tenant_min or (failed + 1) / (run + 2) > config.probation_max_failure


def on_probation(entry: Entry, config: VerifyConfig,
                 counters: Callable[[], dict[str, int]] | None = None) -> bool:
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


def learn_profile(template: list[Variable], validated: list[tuple[str, dict[str, Any]]], answers: list[Any],
                  exemplars: int = 3) -> dict[str, Any]:
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
    equal = [[a.name, b.name] for i, a in enumerate(template) for b in template[i + 1:]
             if validated and all(vals.get(a.name) == vals.get(b.name) for _, vals in validated)]
    numeric = [a for a in answers if isinstance(a, (int, float)) and not isinstance(a, bool)]
    return {"exemplars": learn_exemplars(template, validated, exemplars),
            "values": {k: v[:20] for k, v in values.items()}, "kinds": {k: sorted(set(v)) for k, v in kinds.items()},
            "equal": equal, "answers": numeric[:20]}


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


def check_values(profile: dict[str, Any], template: list[Variable], values: dict[str, Any], text: str,
                 factor: float) -> None:
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
            raise HitRefused("unwritten", f"{var.name} was written in the examples' requests; {v} is not "
                                          "written in this one")
        if seen_kinds and here:
            if seen_kinds == {"pct"} and "pct" not in here:
                raise HitRefused("unit", f"{var.name} was a percentage in every example; {v} is not written as one")
            if seen_kinds == {"money"} and all(k.startswith(("unit:", "word:")) for k in here):
                # Written plainly ("assets 64,000") it may still be the amount; with a unit it is not.
                # WebShop-v2's one wrong choice hit gave max_price ($ in every example) the 1 of "1tb".
                raise HitRefused("unit", f"{var.name} was a money amount in every example; {v} is written "
                                         f"as {', '.join(sorted(k.split(':', 1)[1] for k in here))}")
            if "pct" not in seen_kinds and here == {"pct"}:
                raise HitRefused("unit", f"{var.name} was never a percentage in the examples; {v} is written as one")


def _checked_values(profile: dict[str, Any], template: list[Variable], values: dict[str, Any], text: str,
                    factor: float) -> None:
    """:func:`check_values`, its refusal carrying the values it refused (minicache.refusals)."""
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


def _cues(var: Variable, profile: dict[str, Any]) -> set[str]:
    """Words that say what a variable is: its name and the name's acronym ("eps"), its description
    (with the example's own words, which lifting records after EXAMPLE_MARK), its cue words in each
    exemplar, and those learned from context refusals the miss path showed unfounded
    (``profile["cues"]``, :mod:`minicache.refusals`)."""
    import re

    said = var.name.replace("_", " ") + " " + var.description.replace(EXAMPLE_MARK, " ")
    words = re.findall(r"[a-z]+", said.lower())
    found = set(stems(words)) | {a for a in [acronym(name_stems(var.name))] if a}
    for ex in profile.get("exemplars", []):
        found |= set((ex.get("slots", {}).get(var.name) or {}).get("cues", []))
    return found | set((profile.get("cues") or {}).get(var.name, []))


def corroborate(entry: Entry, extraction: Extraction, text: str, partial: dict[str, Any],
                min_margin: float) -> None:
    """Refuse a model's choice that any independent signal contradicts (see the module docstring)."""
    values = extraction.variables
    numeric = [v for v in entry.template if v.type != "string" and isinstance(values.get(v.name), (int, float))]
    said_by_rules = {var.name: apply_rule(entry.rules[var.name], text) for var in numeric if entry.rules.get(var.name)}
    for var in numeric:
        said = said_by_rules.get(var.name)
        if said is not None and said != values[var.name]:
            read = {k: v for k, v in said_by_rules.items() if v is not None}
            raise HitRefused("rule", f"the rule reads {var.name}={said}, the model chose {values[var.name]}",
                             readings={"rule": {**values, **read}, "model": dict(values)})
        if var.name in partial and partial[var.name] != values[var.name]:
            raise HitRefused("align", f"alignment reads {var.name}={partial[var.name]}, "
                                      f"the model chose {values[var.name]}")
    pos = positions(text)
    equal = {frozenset(pair) for pair in (entry.validation.get("profile") or {}).get("equal", [])}
    for i, a in enumerate(numeric):
        for b in numeric[i + 1:]:
            v = values[a.name]
            if values[b.name] == v and frozenset((a.name, b.name)) not in equal:
                written = sum(v in p.values() for p in pos)
                if written < 2:
                    raise HitRefused("duplicate", f"{a.name} and {b.name} both took {v}, written once")
    profile = entry.validation.get("profile") or {}
    cues = {var.name: _cues(var, profile) for var in numeric}
    words = number_words(text, pos)
    score = {(var.name, p.start): cue_score(words[p.start], cues[var.name]) for var in numeric for p in pos}
    at = {var.name: [p for p in pos if values[var.name] in p.values()] for var in numeric}
    taken = {p.start for ps in at.values() for p in ps}
    for var in numeric:
        mine, chosen = max(((score[var.name, p.start], p.start) for p in at[var.name]), default=(0.0, None))
        # A number written as a word ("one year", "quarterly") competes only for a variable the
        # examples wrote that way: formula-v10 refused two right Free Cash Flow choices because the
        # words around "one"/"quarterly" ("operating", "cash flow") fit the cash flow better.
        kinds = (profile.get("kinds") or {}).get(var.name)  # None: not learned, every number competes
        worded = kinds is None or any(k.startswith("word:") for k in kinds)
        other = max(((score[var.name, p.start], p) for p in pos if p.start not in taken
                     and (worded or not p.kind.startswith("word:"))), key=lambda t: t[0], default=(0.0, None))
        if other[1] is not None and other[0] > mine:
            around = sorted(set(stems([w for w, _ in words[chosen]]))) if chosen is not None else []
            raise HitRefused("context", f"the words around {other[1].readings[0].text.strip()!r} match {var.name} "
                                        f"better than those around the chosen {values[var.name]}",
                             readings={"hit": dict(values)}, variable=var.name, cues=around)
    _check_swaps(numeric, at, score)
    margins = extraction.detail.get("margins") or {}
    low = {k: m for k, m in margins.items() if m is not None and m < min_margin}
    if low:
        name, margin = min(low.items(), key=lambda t: t[1])
        raise HitRefused("margin", f"the model chose {name} by a log-probability margin of {margin:.2f} "
                                   f"(at least {min_margin} needed)")


def _check_swaps(numeric: list[Variable], at: dict[str, list[Any]], score: dict[tuple[str, int], float]) -> None:
    """Refuse when the chosen numbers, given to the variables in another order, fit their words better."""
    import itertools

    if not 2 <= len(numeric) <= 7 or any(len(at[v.name]) != 1 for v in numeric):
        return  # a value written at several places (or not at all) has no single place to swap
    names = [v.name for v in numeric]
    places = [at[n][0].start for n in names]
    if len(set(places)) < len(places):
        return

    def total(order: tuple[int, ...]) -> float:
        return sum(score[n, s] for n, s in zip(names, order, strict=True))

    mine = total(tuple(places))
    best = max(itertools.permutations(places), key=total)
    if total(best) > mine:
        moved = [n for n, a, b in zip(names, places, best, strict=True) if a != b]
        raise HitRefused("swap", f"the words around the chosen numbers fit {', '.join(moved)} better in another order")


class HitVerifier:
    """Extraction for a hit, with every check above. Stateless: safe to share between threads."""

    def __init__(self, extractor: Extractor, config: VerifyConfig | None = None) -> None:
        self.extractor = extractor
        self.config = config or VerifyConfig()

    def aligned(self, entry: Entry, text: str) -> tuple[Alignment | None, dict[str, Any]]:
        """The first complete alignment (None if there is none) and the slots every exemplar that read
        them agrees on. Two exemplars aligning to different values refuse the hit."""
        complete: Alignment | None = None
        partial: dict[str, Any] = {}
        conflicts: set[str] = set()
        for exemplar in (entry.validation.get("profile") or {}).get("exemplars", []):
            found = align(exemplar, text)
            if found.complete:
                if complete is not None and not same_values(complete.values, found.values):
                    raise HitRefused("align", "two validated examples align the request differently")
                complete = complete or found
            for k, v in found.values.items():
                if k in partial and not same_value(partial[k], v):
                    conflicts.add(k)
                partial.setdefault(k, v)
        return complete, {k: v for k, v in partial.items() if k not in conflicts}

    def extract(self, entry: Entry, request_text: str, *, allow_model: bool = True) -> Extraction:
        """The verified values for ``entry`` from a request; raises HitRefused (or ExtractionError
        when the small model fails outright, which counts as the entry's failure)."""
        began = time.perf_counter()
        text = self.extractor.text_for(entry, request_text)
        profile = entry.validation.get("profile") or {}
        by_rules = self.extractor.by_rules(entry, text)
        zero_model = self.config.align and self.extractor.use_rules
        aligned, partial = self.aligned(entry, text) if zero_model else (None, {})
        if by_rules is not None and aligned is not None and not same_values(by_rules, aligned.values):
            raise HitRefused("rule", f"rules read {by_rules}, alignment reads {aligned.values}",
                             readings={"rule": dict(by_rules), "align": dict(aligned.values)})
        zero_model_values: tuple[Method, dict[str, Any]] | None = ("rule", by_rules) if by_rules is not None \
            else ("align", aligned.values) if aligned is not None else None
        if zero_model_values is not None:
            method, values = zero_model_values
            checked = check_types(entry.template, values)
            _checked_values(profile, entry.template, checked, text, self.config.value_range)
            return Extraction(checked, method, time.perf_counter() - began)
        if not allow_model:
            raise HitRefused("audit", "the entry is demoted and only zero-model hits are served", shadow=True)
        mode = entry.validation.get("extraction", "choice")
        extraction = self.extractor.by_model(entry.template, text, choice=(mode == "choice"))
        _checked_values(profile, entry.template, extraction.variables, text, self.config.value_range)
        corroborate(entry, extraction, text, partial, self.config.min_margin)
        if self.config.reorder_check and len(entry.template) > 1:
            # A model that fills variables by their order in the prompt, not by meaning, changes its
            # answer when the order changes. Costs a second call: off unless asked for.
            again = self.extractor.by_model(entry.template[::-1], text, choice=(mode == "choice"))
            differ = [k for k, v in extraction.variables.items() if again.variables.get(k) != v]
            if differ:
                raise HitRefused("reorder", f"with the variables in reverse order the model chose "
                                            f"{', '.join(f'{k}={again.variables[k]}' for k in differ)}")
            extraction.small_tokens += again.small_tokens
            extraction.seconds = time.perf_counter() - began
        return extraction

    def check_answer(self, entry: Entry, value: Any) -> None:
        check_answer(entry.validation.get("profile") or {}, value, self.config.answer_range)
