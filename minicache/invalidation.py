"""Evicting cached programs on request (``MiniCache.invalidate``, ``minicache entries invalidate``,
the dashboard): one entry, or a whole group, whose examples go too so that it starts afresh."""

from __future__ import annotations

from minicache.errors import InvalidRequest
from minicache.route.router import Router
from minicache.store import Store


def invalidate(
    store: Store,
    router: Router,
    *,
    group: str | None = None,
    entry: str | None = None,
    tenant: str = "default",
) -> int:
    """Evict one active entry; or, for a group (label or group id), evict its active entries and
    forget its examples, so the next requests start it afresh instead of rebuilding the same
    program. Returns how many active entries were evicted."""
    if entry:
        found = store.get_entry(tenant, entry)
        if found is None or found.status != "active":
            return 0
        store.set_entry_status(tenant, entry, "evicted")
        return 1
    if group:
        gid = group if store.get_group(tenant, group) else f"label:{group}"
        n = 0
        for e in store.list_entries(tenant, "active"):
            if e.group_id == gid:
                store.set_entry_status(tenant, e.id, "evicted")
                n += 1
        store.clear_examples(tenant, gid)
        router.forget_group(tenant, gid)
        return n
    raise InvalidRequest("invalidate needs group= or entry=")
