"""What a served hit records when its entry fails: the request joins the group's failure record,
which the next build must answer right (:mod:`minicache.build.failures` reads it)."""

from __future__ import annotations

import time

from minicache.store.base import Store

MAX_RECORDED = 5  # failing examples / requests kept per group


def record_failed_hit(
    store: Store, tenant: str, group_id: str, question: str, reason: str, evicted: bool
) -> None:
    """A request the group's entry failed on: the next build must answer it right."""
    failure = store.group_failure(tenant, group_id) or {"examples": [], "requests": []}
    failure["requests"] = list(dict.fromkeys([question] + failure.get("requests", [])))[
        :MAX_RECORDED
    ]
    failure.setdefault("hit_errors", [])
    failure["hit_errors"] = ([reason] + failure["hit_errors"])[:MAX_RECORDED]
    if evicted:
        failure.update(kind="evict", at=time.time())
    store.set_group_failure(tenant, group_id, failure)
