"""A tenant's record of a build's two dear steps, as store counters: the target's generalizations
and the small model's checks. Kept in the store, not the process, so replicas share it and it
survives restarts; admission (:mod:`minicache.build.admission`) prices the next such step from it."""

from __future__ import annotations

from minicache.store.base import Store

# The target's generalizations: asked, made an entry, milliseconds.
GENERALIZE_COUNTERS = ("generalizations", "generalizations_ok", "generalize_ms")
# Builds whose validation asked the small model: such builds, their milliseconds of it.
MODEL_CHECK_COUNTERS = ("model_check_builds", "model_check_ms")
# Target tokens spent by builds (samples and generalizations; also counted in ``target_tokens``).
BUILD_TARGET_TOKENS = "build_target_tokens"


def record_generalization(store: Store, tenant: str, seconds: float, ok: bool) -> None:
    """Add one target generalization to the tenant's record (:data:`GENERALIZE_COUNTERS`)."""
    store.bump(tenant, "generalizations")
    store.bump(tenant, "generalize_ms", max(0, round(seconds * 1000)))
    if ok:
        store.bump(tenant, "generalizations_ok")


def record_model_checks(store: Store, tenant: str, seconds: float) -> None:
    """Add one build's small-model checks to the tenant's record (:data:`MODEL_CHECK_COUNTERS`)."""
    store.bump(tenant, "model_check_builds")
    store.bump(tenant, "model_check_ms", max(0, round(seconds * 1000)))
