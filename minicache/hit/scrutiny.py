"""How closely an entry is watched: how long its probation lasts and what share of its hits is audited,
sized from the entry's own record rather than from one constant for every group.

A global probation length and audit rate are tuned on the streams they were measured on. On groups
nobody tuned on, the entries that went wrong were those whose readings rested on little (rules
learned from two or three examples, the small model's choice) and nothing independent caught them;
entries with a long record of agreeing audits, meanwhile, keep paying for audits that find nothing.
So each entry's record is read as *doubts* (:class:`Doubt`): evidence that something about it
disagreed (a contradiction), or that its readings rest on thin evidence. The contradictions its
stored record holds lengthen its probation; every doubt raises the audit share; agreeing audits
lower it, through the Wilson upper bound on the entry's failure rate, down to a floor once that bound
is under the bar.

The configured values stay the priors and bounds (:class:`~minicache.config.engine.VerifyConfig`,
``EngineConfig.audit_rate``): an entry without doubts and without audits gets exactly them.
"""

from __future__ import annotations

import math
from collections import Counter
from enum import StrEnum
from typing import Any

from minicache.config.engine import EngineConfig, VerifyConfig
from minicache.store.base import Entry

MODEL_METHODS = (
    "choice",
    "free",
    "second-choice",
)  # extraction methods where the small model chose


class Doubt(StrEnum):
    """One sign in an entry's record that its hits may be wrong (the reason a size grew)."""

    # Contradictions: something compared with the entry disagreed with it.
    VALIDATION = "validation"  # a held example its build's validation got wrong
    SAMPLES = "samples"  # the target's samples wrote another computation for some examples
    DISAGREED = "disagreed"  # an audit (or probation comparison) that disagreed, counted each
    REFUSED = "refused"  # the checks refused the small model's reading of one of its requests
    REVISED = "revised"  # its readings were revised after validation, unvalidated since
    # Thin evidence: nothing disagreed, but little stands behind the readings.
    MODEL_READ = "model-read"  # its validation needed the small model to read the held examples
    FEW_EXAMPLES = "few-examples"  # its rules were learned from fewer examples than a build holds
    MODEL_CHOICE = "model-choice"  # this hit's values were chosen by the small model


# The contradictions an entry's ``validation`` holds, written when the entry is stored and never
# changed: they size its probation (:func:`probation_length`). The others (``disagreed``,
# ``refused``) are found while it serves, so never during a probation: they raise its audit share
# only.
STORED_CONTRADICTIONS = frozenset({Doubt.VALIDATION, Doubt.SAMPLES, Doubt.REVISED})


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


def doubts(entry: Entry, build_after: int, method: str | None = None) -> Counter[Doubt]:
    """The doubts in ``entry``'s record (and in the hit at hand, extracted by ``method``), and why each
    matters:

    - ``validation``: the build's validation got a held example wrong (``passed < of``). The entry
      was trusted by a majority, so some of the group's requests are known to defeat it.
    - ``samples``: with self-consistency, not every sample wrote the entry's computation
      (``agreement < 1``): the target itself was unsure which computation the group is.
    - ``disagreed``: each audit or probation comparison whose would-be hit disagreed with the miss
      path. The most direct evidence there is, so each one counts.
    - ``refused``: the checks refused the small model's reading of one of the entry's requests
      (``model_refused``). The group's requests are worded in ways its readers cannot tell apart,
      and the readings that were not refused come from the same readers.
    - ``revised``: a refusal review changed the entry's rules or cues (``validation["revisions"]``);
      the revision was shown right on one request, not validated on the held examples.
    - ``model-read``: the build's validation needed the small model to read the held examples, so no
      zero-model reader corroborated the readings it was trusted on.
    - ``few-examples``: its rules were learned from fewer agreeing examples than a build waits for
      (``EngineConfig.build_after``). Rules learned from two examples carried swapped slots to new
      wording, where nothing independent caught them.
    - ``model-choice``: the hit at hand was read by the small model, whose choice between two
      numbers of the same unit and size is where swaps hide.
    """
    found: Counter[Doubt] = Counter()
    record = entry.validation
    passed, held = record.get("passed"), record.get("of")
    if isinstance(passed, int) and isinstance(held, int) and passed < held:
        found[Doubt.VALIDATION] += 1
    agreement = record.get("agreement")
    if isinstance(agreement, int | float) and agreement < 1:
        found[Doubt.SAMPLES] += 1
    if entry.audits_disagreed > 0:
        found[Doubt.DISAGREED] += entry.audits_disagreed
    if entry.model_refused > 0:
        found[Doubt.REFUSED] += 1
    if any(_changed(note) for note in record.get("revisions") or []):
        found[Doubt.REVISED] += 1
    if record.get("extraction") in MODEL_METHODS:
        found[Doubt.MODEL_READ] += 1
    learned_from = record.get("rule_examples")
    if entry.rules and isinstance(learned_from, int) and learned_from < build_after:
        found[Doubt.FEW_EXAMPLES] += 1
    if method in MODEL_METHODS:
        found[Doubt.MODEL_CHOICE] += 1
    return found


def _changed(note: Any) -> bool:
    """Whether a revision changed the entry's readings: a wording review that only recorded
    evidence (``learned`` empty, minicache.hit.wording) changed nothing the entry serves by."""
    return not (
        isinstance(note, dict) and note.get("check") == "wording" and not note.get("learned")
    )


def probation_length(entry: Entry, config: VerifyConfig) -> int:
    """How many agreeing comparisons an entry on probation needs before it serves.

    ``config.probation`` for an entry whose stored record has no contradiction, one more for each
    contradiction in it (:data:`STORED_CONTRADICTIONS`: a held example its validation got wrong,
    self-consistency samples that wrote another computation, a revision since validation), at most
    ``config.probation_max``. The length is read from ``entry.validation`` alone, which is written
    when the entry is stored and never changed, and the entry's agreeing comparisons only grow: an
    entry that has passed stays passed. The contradictions found in service (a disagreeing audit, a
    refused reading of the small model's) only come once it serves, as an entry on probation serves
    no hit and its first disagreement evicts it; they raise its audit share (:func:`audit_share`)
    rather than send it back. Thin evidence does not lengthen it either: on the streams measured,
    most entries were read by the small model from two or three examples, so it would lengthen
    every probation alike instead of singling out the entries that disagreed with something.
    Whether an entry starts on probation at all is the tenant's record's decision
    (:func:`minicache.hit.audits.probation_reason`); 0 switches probation off."""
    if config.probation <= 0:
        return 0
    found = doubts(entry, build_after=0)
    extra = sum(n for doubt, n in found.items() if doubt in STORED_CONTRADICTIONS)
    return min(max(config.probation, config.probation_max), config.probation + extra)


def audit_share(entry: Entry, config: EngineConfig, method: str | None = None) -> float:
    """The share of ``entry``'s hits (this one read by ``method``) answered by the miss path too.

    ``EngineConfig.audit_rate`` is the share for an entry without doubts or audits. Each doubt adds
    that much again: an entry with two doubts is audited three times as often, since each is a
    separate way its hits can be wrong that the build could not see. An entry never caught wrong has
    the result scaled by the Wilson upper bound on its failure rate from its agreeing audits (1
    before any), so a clean record lowers it; an entry caught wrong keeps its full, raised share
    (the disagreements are doubts too), as a demoted one must earn its way back. Once the bound is
    under ``audit_delta`` (the bar a demoted entry must get back under) the entry gets the floor,
    ``VerifyConfig.audit_rate_min``; the share never exceeds ``VerifyConfig.audit_rate_max``. The
    bounds never cut into the configured rate itself (a rate above the ceiling or below the floor
    stays the entry's start), 0 switches audits off, and a rate of 1 audits every hit whatever the
    record (a setting for checking a deployment)."""
    base = config.audit_rate
    if base <= 0 or base >= 1:
        return max(0.0, min(1.0, base))
    verify = config.verify
    floor, ceiling = min(base, verify.audit_rate_min), max(base, verify.audit_rate_max)
    audits = entry.audits_agreed + entry.audits_disagreed
    bound = wilson_upper(entry.audits_disagreed, audits, config.audit_z)
    if bound <= config.audit_delta:
        return floor
    weight = 1 + sum(doubts(entry, config.build_after, method).values())
    discount = bound if entry.audits_disagreed == 0 else 1.0
    return min(ceiling, max(floor, base * weight * discount))
