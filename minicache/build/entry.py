"""What a build stores when a candidate is validated: the entry, with the extraction rules learned
from every example that agreed with it and the record of how it was validated."""

from __future__ import annotations

import time

from minicache.build.candidates import Candidate
from minicache.build.run import BuildRun
from minicache.build.validation import Validation
from minicache.config.engine import EngineConfig
from minicache.hit.audits import probation_reason
from minicache.hit.profile import learn_profile
from minicache.hit.rules import learn_rules
from minicache.store import Entry, new_id


def consensus_record(run: BuildRun) -> dict[str, float | int]:
    """What the target's samples agreed on (``samples`` drawn, ``agreement``: the share that wrote
    their example's winner, ``left_out``: examples whose winner is another computation than the
    entry's), for an entry built from samples; nothing otherwise."""
    if run.consensus is None:
        return {}
    c = run.consensus
    return {"samples": c.samples, "agreement": round(c.agreement, 4), "left_out": len(c.left_out)}


def new_entry(
    run: BuildRun,
    cand: Candidate,
    record: Validation,
    config: EngineConfig,
    counters: dict[str, int],
) -> Entry:
    """The validated candidate as the group's entry, with rules learned from every agreeing example
    (``counters``: the tenant's, which say whether the entry starts on probation)."""
    template = record.template
    pairs = list(record.validated)
    pairs += [p for p in cand.agreed if all(p[0] != q[0] for q in pairs)]
    rules = learn_rules(template, pairs) if config.use_rules else {}
    if len(pairs) < 3:  # positions are only trusted with three agreeing examples
        rules = {k: r for k, r in rules.items() if r.kind != "position"}
    return Entry(
        id=new_id("ent"),
        tenant=run.tenant,
        group_id=run.group_id,
        template=template,
        program=cand.source,
        validation={
            "extraction": record.extraction,
            "passed": record.passed,
            "shared_prefix": record.shared_prefix,
            "of": record.of,
            "source": cand.kind,
            "attempts": run.attempts,
            "rule_examples": len(pairs),
            "profile": learn_profile(
                template,
                pairs,
                [ex.answer for ex in run.examples],
                config.verify.exemplars,
                word_slots=config.route_word_slots,
            ),
            "held": [ex.id for ex in run.held],
            "at": time.time(),
            "probation": probation_reason(counters, config.verify) or False,
            **consensus_record(run),
        },
        rules={name: rule.to_json() for name, rule in rules.items()},
    )
