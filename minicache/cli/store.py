"""``minicache stats`` and ``minicache entries ...``: the commands that read and edit a store.

They open the store with :func:`minicache.store.open_store`, the opener the engine and the server
use, so ``--store`` means the same thing everywhere (a SQLite file or a ``postgresql://`` URL).
Every one but ``entries import`` opens it with ``create=False``: a store that does not exist is an
error, never a new, empty one that would look like an empty cache.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

# A MiniCacheError is printed as one "error:" line like every other command's (click's own
# exception would print "Error:").
from minicache.errors import MiniCacheError

if TYPE_CHECKING:
    from minicache.cli.options import Runtime
    from minicache.store import Store


def store_option(f):
    """``--store``: a SQLite file or a postgresql:// URL (env MINICACHE_STORE)."""
    return click.option(
        "--store",
        envvar="MINICACHE_STORE",
        default="minicache.db",
        show_default=True,
        help="SQLite file or postgresql:// URL holding groups, examples and entries "
        "(env MINICACHE_STORE).",
    )(f)


def tenant_option(f):
    """``--tenant``: whose cache the command reads or writes."""
    return click.option(
        "--tenant", default="default", show_default=True, help="Tenant whose cache to use."
    )(f)


@contextmanager
def _open(spec: str, *, create: bool) -> Iterator[Store]:
    """The store ``spec`` names, closed afterwards. ``create=False`` for commands that only read."""
    from minicache.store import open_store

    store = open_store(spec, create=create)
    try:
        yield store
    finally:
        store.close()


@click.command()
@store_option
@tenant_option
def stats(store: str, tenant: str) -> None:
    """Counters of the cache: requests, hits, misses, builds, entries, tokens."""
    with _open(store, create=False) as s:
        counters = s.counters(tenant)
        entries = s.list_entries(tenant)
        groups = s.list_groups(tenant)
        others = [t for t in s.tenants() if t != tenant] if not counters.get("requests") else []
    counters = {
        "requests": 0,
        "hits": 0,
        "misses": 0,
        "fallbacks": 0,
        "errors": 0,
        "probations": 0,
        "probations_failed": 0,
        **counters,
    }
    requests = counters["requests"]
    data = dict(
        counters,
        groups=len(groups),
        entries_active=sum(e.status == "active" for e in entries),
        entries_total=len(entries),
        hit_rate=(counters.get("hits", 0) / requests) if requests else 0.0,
    )
    click.echo(json.dumps(data, indent=2, sort_keys=True))
    if not requests and not groups:
        # All zeros usually means the wrong tenant, not an idle cache: a server with API keys counts
        # each key's requests under that key's tenant, never under "default".
        where = (
            f"tenants with data: {', '.join(others)} (use --tenant NAME)"
            if others
            else "nor has any other tenant"
        )
        click.echo(
            f"note: tenant {tenant!r} has no requests or groups in this store; {where}", err=True
        )


@click.group()
def entries() -> None:
    """List, show, delete, export and import cache entries."""


@entries.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include superseded and evicted entries.")
@store_option
@tenant_option
def entries_list(show_all: bool, store: str, tenant: str) -> None:
    """One line per entry: id, status, group, hits/failures, variables."""
    with _open(store, create=False) as s:
        found = s.list_entries(tenant, None if show_all else "active")
    for e in found:
        names = ", ".join(v.name for v in e.template)
        click.echo(
            f"{e.id}  {e.status:<10} v{e.version}  {e.group_id}  hits {e.hits} failures {e.failures}  ({names})"
        )


@entries.command("show")
@click.argument("entry_id")
@store_option
@tenant_option
def entries_show(entry_id: str, store: str, tenant: str) -> None:
    """The whole entry as JSON: template, program, validation record, rules, counters."""
    with _open(store, create=False) as s:
        e = s.get_entry(tenant, entry_id)
    if e is None:
        raise MiniCacheError(f"no entry {entry_id} for tenant {tenant}")
    click.echo(json.dumps(e.to_json(), indent=2))


@entries.command("delete")
@click.argument("entry_id")
@store_option
@tenant_option
def entries_delete(entry_id: str, store: str, tenant: str) -> None:
    """Delete one entry (its group falls back to the miss path and may be rebuilt)."""
    with _open(store, create=False) as s:
        deleted = s.delete_entry(tenant, entry_id)
    if not deleted:
        raise MiniCacheError(f"no entry {entry_id} for tenant {tenant}")
    click.echo(f"deleted {entry_id}")


@entries.command("export")
@click.argument("path", type=click.Path(dir_okay=False, writable=True))
@click.option(
    "--examples",
    default=3,
    show_default=True,
    type=click.IntRange(0, 100),
    help="Requests of each entry's group to include (an importing cache routes by them).",
)
@store_option
@tenant_option
def entries_export(path: str, examples: int, store: str, tenant: str) -> None:
    """Write the active entries to PATH as JSON (for `entries import` or a warm start elsewhere)."""
    from minicache.portability import export_entries

    with _open(store, create=False) as s:
        data = export_entries(s, tenant, examples)
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, allow_nan=False)
    except OSError as exc:
        raise click.FileError(path, hint=exc.strerror or str(exc)) from None
    click.echo(f"exported {len(data)} entries to {path}")


@entries.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@store_option
@tenant_option
@click.pass_obj
def entries_import(runtime: Runtime, path: str, store: str, tenant: str) -> None:
    """Import the entries of PATH (an export) into the store.

    \b
    The whole file is validated first, then written in one transaction: if any entry is invalid,
    nothing is written (not even a new store file). Each entry becomes its group's active entry
    under a fresh id (the exported id is kept as validation.imported_from), so importing a group
    that already has an active entry adds a version that supersedes it. Example requests in the
    file are embedded for routing, which needs the embedder (`minicache models`).
    """
    from minicache.config.models import load_engine_config
    from minicache.portability import import_entries, load_export

    validated = load_export(path)
    rows = load_engine_config().route_table_rows
    with _open(store, create=True) as s:
        n = import_entries(s, validated, tenant, runtime.route_embedder(), table_rows=rows)
    click.echo(f"imported {n} entries into tenant {tenant}")
