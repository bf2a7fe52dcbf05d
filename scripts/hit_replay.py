"""Replay the hit path on real Formula requests with the real small model and no target model.

For a few formulas whose program is unambiguous, a hand-written program stands in for the entry's
lifted one. As in a build, the group's first requests are validated (the small model extracts, the
program must give the gold answer) and the entry's rules and hit-check profile are learned from
those. Every later request of the group then goes through

* the old hit path: learned rules, else the small model's choice, no checks; and
* the verified hit path (minicache.hit.HitVerifier, then the answer check),

and both answers are compared with the gold answer. The small model's extraction is memoized per
prompt, so both paths see the same model output.

    .venv/bin/python scripts/hit_replay.py [--per-group 20]

``--oracle`` uses no model at all and measures alignment alone: a validated example's values are the
one assignment of its request's numbers to the variables that gives the gold answer (examples with
none or several are skipped), and each later request is aligned with the exemplars and checked
against its gold answer (right, wrong, refused by the range/unit checks, or not aligned).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import time
from typing import Any

from minicache.align import align
from minicache.bench.data import is_correct, load
from minicache.extraction import Extraction, ExtractionError, Extractor
from minicache.hit import HitRefused, HitVerifier, check_values, learn_profile
from minicache.models.base import set_real_models_allowed
from minicache.numbers import candidate_values
from minicache.request import shared_prefix, strip_prefix
from minicache.rules import learn_rules
from minicache.store import Entry, Variable

FORMULAS: dict[str, tuple[list[Variable], Any]] = {
    "Current Ratio": ([Variable("current_assets", "number", "current assets, dollars"),
                       Variable("current_liabilities", "number", "current liabilities, dollars")],
                      lambda current_assets, current_liabilities: current_assets / current_liabilities),
    "Debt-to-Equity Ratio": ([Variable("total_liabilities", "number", "total liabilities (debt), dollars"),
                              Variable("shareholders_equity", "number", "shareholders' equity, dollars")],
                             lambda total_liabilities, shareholders_equity: total_liabilities / shareholders_equity),
    "Simple Interest": ([Variable("principal", "number", "principal, dollars"),
                         Variable("rate_pct", "number", "annual interest rate, percent as written"),
                         Variable("years", "number", "time, years")],
                        lambda principal, rate_pct, years: principal * rate_pct / 100 * years),
    "Working Capital": ([Variable("current_assets", "number", "current assets, dollars"),
                         Variable("current_liabilities", "number", "current liabilities, dollars")],
                        lambda current_assets, current_liabilities: current_assets - current_liabilities),
    "Interest Coverage Ratio": ([Variable("ebit", "number", "earnings before interest and taxes, dollars"),
                                 Variable("interest_expense", "number", "interest expense, dollars")],
                                lambda ebit, interest_expense: ebit / interest_expense),
    "Price-to-Earnings Ratio (P/E Ratio)": ([Variable("price", "number", "share price, dollars"),
                                             Variable("eps", "number", "earnings per share, dollars")],
                                            lambda price, eps: price / eps),
}


class Memo(Extractor):
    """The small model's extraction, computed once per (variables, text, mode)."""

    cache: dict[tuple, Extraction] = {}

    def by_model(self, template, text, *, choice=None):
        key = (tuple(v.name for v in template), text, choice)
        if key not in self.cache:
            self.cache[key] = super().by_model(template, text, choice=choice)
        return self.cache[key]


def oracle(per_group: int, validate: int) -> None:
    """Alignment alone, from examples whose values the gold answer determines (no model)."""
    requests = load("formula")
    for label, (template, compute) in FORMULAS.items():
        group = [r for r in requests if r.group == label][:per_group]
        prefix = shared_prefix([r.question for r in group[:validate]])
        validated = []
        for r in group[:validate]:
            body = strip_prefix(r.question, prefix)
            fits = []
            for combo in itertools.permutations(candidate_values(body), len(template)):
                values = dict(zip([v.name for v in template], combo, strict=True))
                try:
                    if is_correct(r, compute(**values)):
                        fits.append(values)
                except ZeroDivisionError:
                    pass
            if len(fits) == 1:
                validated.append((body, fits[0]))
        profile = learn_profile(template, validated, [r.answer for r in group[:validate]])
        counts = collections.Counter()
        for r in group[validate:]:
            body = strip_prefix(r.question, prefix)
            done = [a for a in (align(e, body) for e in profile["exemplars"]) if a.complete]
            if not done:
                counts["not aligned"] += 1
                continue
            try:
                check_values(profile, template, done[0].values, body, 100.0)
            except HitRefused:
                counts["refused by range/unit"] += 1
                continue
            counts["right" if is_correct(r, compute(**done[0].values)) else "wrong"] += 1
        print(f"{label}: {len(validated)} of {validate} examples determined by the gold answer, "
              f"{len(profile['exemplars'])} exemplars; later requests: {dict(counts)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-group", type=int, default=20)
    parser.add_argument("--validate", type=int, default=3)
    parser.add_argument("--oracle", action="store_true", help="alignment alone, no model")
    parser.add_argument("--only", help="comma-separated formulas (default: all of FORMULAS)")
    args = parser.parse_args()
    if args.only:
        for name in set(FORMULAS) - set(args.only.split(",")):
            del FORMULAS[name]
    if args.oracle:
        oracle(args.per_group, args.validate)
        return
    from minicache.models.llamacpp import LlamaCppBackend

    set_real_models_allowed(True)
    extractor = Memo(LlamaCppBackend.embedded("small"))
    verifier = HitVerifier(extractor)
    requests = load("formula")
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for label, (template, compute) in FORMULAS.items():
        group = [r for r in requests if r.group == label][:args.per_group]
        texts = [r.question + (f"\n\nContext:\n{r.context}" if r.context else "") for r in group]
        prefix = shared_prefix(texts[:args.validate])
        validated = []
        for r, text in zip(group[:args.validate], texts[:args.validate], strict=True):
            body = strip_prefix(text, prefix)
            try:
                values = extractor.by_model(template, body, choice=True).variables
            except ExtractionError:
                continue
            if is_correct(r, compute(**values)):
                validated.append((body, values))
        rules = learn_rules(template, validated)
        if len(validated) < 3:
            rules = {k: v for k, v in rules.items() if v.kind != "position"}
        entry = Entry(id="replay", tenant="replay", group_id=label, template=template, program="",
                      rules={k: rule.to_json() for k, rule in rules.items()},
                      validation={"extraction": "choice", "shared_prefix": prefix,
                                  "profile": learn_profile(template, validated,
                                                           [r.answer for r in group[:args.validate]])})
        print(f"== {label}: {len(validated)}/{args.validate} validated, rules for {sorted(rules)}, "
              f"{len(entry.validation['profile']['exemplars'])} exemplars", flush=True)
        for r, text in zip(group[args.validate:], texts[args.validate:], strict=True):
            t = time.perf_counter()
            try:
                old = extractor.extract(entry, text)
                old_right = is_correct(r, compute(**old.variables))
                old_path = old.method
            except ExtractionError:
                old_right, old_path = None, "error"
            try:
                new = verifier.extract(entry, text)
                answer = compute(**new.variables)
                verifier.check_answer(entry, answer)
                new_path, new_right = new.method, is_correct(r, answer)
            except HitRefused as exc:
                new_path, new_right = f"refused:{exc.check}", None
            except (ExtractionError, ZeroDivisionError) as exc:
                new_path, new_right = f"error:{type(exc).__name__}", None
            row = totals[label]
            row["requests"] += 1
            row[f"old {old_path} {'right' if old_right else 'wrong' if old_right is False else '-'}"] += 1
            row[f"new {new_path} {'right' if new_right else 'wrong' if new_right is False else '-'}"] += 1
            margins = old.detail.get("margins") if old_path in ("choice", "free") else None
            shown = f"  margins { {k: round(m, 2) for k, m in margins.items()} }" if margins else ""
            print(f"  {time.perf_counter() - t:5.1f}s old {old_path:6} {old_right!s:5}  "
                  f"new {new_path:18} {new_right!s:5}{shown}", flush=True)
    print("\n== totals")
    for label, row in totals.items():
        print(label, dict(sorted(row.items())))


if __name__ == "__main__":
    main()
