"""A tenant's counters: what each answered or failed request adds to them, and how ``stats`` reads
them back.

A request is counted once, when it ends, so that ``requests`` always equals the routes' counters
plus ``errors``; a request with ``no_store`` is not counted at all.
"""

from __future__ import annotations

from typing import Any

from minicache.answers import Route, SolveResult
from minicache.store.base import Entry, Group, Store

# The counter each route of a served request adds one to.
ROUTE_COUNTERS = {
    Route.HIT: "hits",
    Route.MISS: "misses",
    Route.FALLBACK: "fallbacks",
    Route.STEP_REUSE: "step_reuse",
    Route.STEP_PATCH: "step_patch",
    Route.STEP_SKIP: "step_skip",
    Route.PASSTHROUGH: "passthroughs",
}


def count_served(store: Store, tenant: str, result: SolveResult) -> None:
    """A request that was answered: one more request, one more of its route, its target tokens."""
    store.bump(tenant, "requests")
    store.bump(tenant, ROUTE_COUNTERS[Route(result.route)])
    if result.tokens["target"]:
        store.bump(tenant, "target_tokens", result.tokens["target"])


def count_failed(store: Store, tenant: str) -> None:
    """A request that raised: one more request, one more error."""
    store.bump(tenant, "requests")
    store.bump(tenant, "errors")


def tenant_stats(
    counters: dict[str, int],
    entries: list[Entry],
    groups: list[Group],
    *,
    entries_demoted: int,
) -> dict[str, Any]:
    """``MiniCache.stats``: the counters, with rates, and what the store holds; the engine adds its
    process's own figures (the sandbox's, the compute lock's)."""
    requests = counters.get("requests", 0)
    return {
        "requests": requests,
        "hits": counters.get("hits", 0),
        "misses": counters.get("misses", 0),
        "fallbacks": counters.get("fallbacks", 0),
        # requests forwarded to the target as they came (not computations the cache serves)
        "passthroughs": counters.get("passthroughs", 0),
        "errors": counters.get("errors", 0),
        "hit_rate": counters.get("hits", 0) / requests if requests else 0.0,
        "builds_ok": counters.get("builds_ok", 0),
        "builds_failed": counters.get("builds_failed", 0),
        # the target's generalizations in builds (admission prices them from these: docs/hits.md, section 5)
        "generalizations": counters.get("generalizations", 0),
        "generalizations_ok": counters.get("generalizations_ok", 0),
        "generalize_s": counters.get("generalize_ms", 0) / 1000,
        # builds that stopped before the small model's checks, and those checks' record (admission)
        "builds_declined": counters.get("builds_declined", 0),
        "model_check_builds": counters.get("model_check_builds", 0),
        "model_check_s": counters.get("model_check_ms", 0) / 1000,
        "evictions": counters.get("evictions", 0),
        "hit_refusals": counters.get("hit_refusals", 0),
        "audits": counters.get("audits", 0),
        "audits_disagreed": counters.get("audits_disagreed", 0),
        "probations": counters.get("probations", 0),
        "probations_failed": counters.get("probations_failed", 0),
        "refusals_overturned": counters.get("refusals_overturned", 0),
        "entries_demoted": entries_demoted,
        "step_reuse": counters.get("step_reuse", 0),
        "step_patch": counters.get("step_patch", 0),
        "step_skip": counters.get("step_skip", 0),
        "target_tokens": counters.get("target_tokens", 0),
        # the share of target_tokens that builds spent (self-consistency samples, generalizations)
        "build_target_tokens": counters.get("build_target_tokens", 0),
        "small_tokens": counters.get("small_tokens", 0),
        "groups": len(groups),
        "uncacheable_groups": sum(g.status == "uncacheable" for g in groups),
        "entries_active": sum(e.status == "active" for e in entries),
        "entries_total": len(entries),
    }
