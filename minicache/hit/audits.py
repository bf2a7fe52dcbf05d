"""What an entry's audits decide: whether it is demoted, and whether a new one starts on probation.

Layers 4 and 5 of the hit checks (:mod:`minicache.hit.verify`, docs/hits.md). An audit answers a
served hit (or a probation attempt) by the miss path too and records whether they agreed
(:meth:`minicache.hit.path.HitPath.audit`). An entry caught disagreeing whose upper bound on error
(:func:`wilson_upper`) exceeds delta serves no model-chosen hit (:func:`demoted`) until agreeing
audits bring the bound back under delta. Where routing has not shown that it keeps a tenant's
computations apart (word problems that share words, not computations), a new entry's first hit
attempts are answered by the miss path and compared before it serves any (:func:`on_probation`);
once passed, a probation is over for good. How many, and what share of an entry's hits is audited,
the entry's own record decides (:mod:`minicache.hit.scrutiny`).
"""

from __future__ import annotations

from collections.abc import Callable

from minicache.config.engine import VerifyConfig
from minicache.hit.scrutiny import probation_length, wilson_upper
from minicache.store.base import Entry

__all__ = ["demoted", "needs_probation", "on_probation", "probation_reason", "wilson_upper"]


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
    """An entry built on probation that has not yet had as many agreeing comparisons as its stored
    record asks for (:func:`minicache.hit.scrutiny.probation_length`: ``probation``, more for each
    contradiction its validation holds). That length never changes and agreeing comparisons only
    grow, so once an entry has passed it never goes back on probation: what disagrees with it in
    service raises its audit share, and an audit that catches a zero-model hit wrong counts as its
    failure (:meth:`minicache.hit.path.HitPath.audit`).

    An entry put on probation only because its tenant's record was not yet established
    (``"record"``) is released as soon as ``counters()`` (the tenant's record, read only then) shows
    it established: builds come in bursts. On Formula the first 10 entries were built before five
    probations had finished, and 4 or 5 of them first came back after the record was established,
    each paying a probation miss it no longer asked for. A sampled entry, or one stored before the
    reason was (``True``), stays on it."""
    flag = entry.validation.get("probation")
    if not flag or entry.audits_agreed >= probation_length(entry, config):
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
