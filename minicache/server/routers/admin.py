"""``/admin``: entries, groups, invalidation, export/import, freeze and stats, for one tenant at a time
(``?tenant=``, default "default"). Every endpoint needs an admin key."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query

from minicache.engine import InvalidRequest
from minicache.server.errors import ApiError
from minicache.server.jsonbody import GuardedRoute
from minicache.server.openai_format import SafeJSONResponse
from minicache.server.protocol import (
    EntryStatus,
    ErrorBody,
    FreezeRequest,
    InvalidateRequest,
    Label,
)
from minicache.server.serving import Admin, AdminTenant, State, blocking

log = logging.getLogger("minicache.server")

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in (
        (400, "Invalid request"),
        (401, "Missing or wrong key"),
        (403, "Not an admin key"),
        (404, "No such entry"),
        (429, "Rate limited"),
        (503, "Overloaded or store busy"),
    )
}
EXPORT_SCHEMA_REF = "#/components/schemas/EntryExport"  # added by the app's OpenAPI (see app.py)

router = APIRouter(
    prefix="/admin",
    tags=["admin"],
    route_class=GuardedRoute,
    responses=ERRORS,
    default_response_class=SafeJSONResponse,
)
EntryId = Annotated[Label, Path(description="An entry id.")]


@router.get("/entries", summary="A tenant's entries")
async def list_entries(
    tenant: AdminTenant, server: State, status: Annotated[EntryStatus | None, Query()] = None
) -> dict[str, Any]:
    entries = await blocking(server.engine.store.list_entries, tenant, status)
    return {"object": "list", "tenant": tenant, "data": [e.to_json() for e in entries]}


@router.get("/entries/{entry_id}", summary="One entry")
async def get_entry(entry_id: EntryId, tenant: AdminTenant, server: State) -> dict[str, Any]:
    entry = await blocking(server.engine.store.get_entry, tenant, entry_id)
    if entry is None:
        raise ApiError(404, f"No entry {entry_id} for tenant {tenant}.", code="entry_not_found")
    return entry.to_json()


@router.delete("/entries/{entry_id}", summary="Delete one entry")
async def delete_entry(entry_id: EntryId, tenant: AdminTenant, server: State) -> dict[str, Any]:
    if not await blocking(server.engine.store.delete_entry, tenant, entry_id):
        raise ApiError(404, f"No entry {entry_id} for tenant {tenant}.", code="entry_not_found")
    return {"id": entry_id, "deleted": True}


@router.post("/invalidate", summary="Evict an entry, or a group's entries and examples")
async def invalidate(body: InvalidateRequest, tenant: AdminTenant, server: State) -> dict[str, Any]:
    n = await blocking(server.engine.invalidate, group=body.group, entry=body.entry, tenant=tenant)
    return {"tenant": tenant, "invalidated": n}


@router.get("/groups", summary="A tenant's groups")
async def list_groups(tenant: AdminTenant, server: State) -> dict[str, Any]:
    groups = await blocking(server.engine.store.list_groups, tenant)
    return {"object": "list", "tenant": tenant, "data": [asdict(g) for g in groups]}


@router.get("/export", summary="Active entries in the export format, with some of their requests")
async def export(
    tenant: AdminTenant,
    server: State,
    examples: Annotated[int, Query(ge=0, le=100, description="Requests per entry.")] = 3,
) -> Any:
    return await blocking(server.engine.export_entries, tenant, examples)


@router.post(
    "/import",
    summary="Import an export (all or nothing)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": EXPORT_SCHEMA_REF}}},
        }
    },
)
async def import_(
    body: Annotated[list[Any], Body()], tenant: AdminTenant, server: State
) -> dict[str, Any]:
    """The document is validated whole by the engine (one model of the export format) and written in
    one transaction: an invalid document is a 400 and writes nothing."""
    try:
        n = await blocking(server.engine.import_entries, body, tenant)
    except InvalidRequest as exc:
        raise ApiError(400, f"Nothing imported: {exc}"[:2000], code="invalid_entries") from None
    server.seen_tenants.add(tenant)
    return {"tenant": tenant, "imported": n}


@router.post("/freeze", summary="Stop (or resume) new builds")
async def freeze(body: FreezeRequest, _: Admin, server: State) -> dict[str, Any]:
    server.engine.config.frozen = body.frozen
    log.warning("builds %s by an admin request", "frozen" if body.frozen else "unfrozen")
    return {"frozen": server.engine.config.frozen}


@router.get("/stats", summary="A tenant's counters, entries and groups")
async def stats(tenant: AdminTenant, server: State) -> dict[str, Any]:
    def read() -> dict[str, Any]:
        out = server.engine.stats(tenant)
        out.setdefault("errors", server.engine.store.counters(tenant).get("errors", 0))
        return {"tenant": tenant, "frozen": server.engine.config.frozen, **out}

    return await blocking(read)
