"""Stores: where groups, examples and validated entries live. SQLite by default."""

import re
from typing import TYPE_CHECKING, Any

from minicache.errors import StoreBusy, StoreError
from minicache.store.base import (
    Entry,
    EntryStatus,
    Example,
    Group,
    GroupStatus,
    Store,
    Variable,
    new_id,
    program_hash,
)
from minicache.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from minicache.store.postgres import PostgresStore


def __getattr__(name: str) -> Any:
    # psycopg is imported only when a PostgreSQL store is asked for.
    if name == "PostgresStore":
        from minicache.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Entry",
    "EntryStatus",
    "Example",
    "Group",
    "GroupStatus",
    "PostgresStore",
    "Store",
    "Variable",
    "SQLiteStore",
    "StoreBusy",
    "StoreError",
    "new_id",
    "program_hash",
    "open_store",
]


def open_store(spec: "str | Store | None", *, create: bool = True) -> Store:
    """A store from a SQLite path, ``:memory:``, a ``postgresql://`` URL, or an existing store object.

    This is the one opener: the engine, the server and every CLI command call it, so a spec means
    the same store everywhere. ``create=False`` is for commands that only read: the store must
    already exist (a SQLite file, a database with MiniCache's schema), else :class:`StoreError`,
    and nothing is created. An existing store of an older schema is still migrated."""
    if spec is None:
        spec = "minicache.db"
    if isinstance(spec, str):
        if not spec.strip():
            raise StoreError("the store is empty: give a SQLite file path or a postgresql:// URL")
        if spec.lower().startswith(("postgres://", "postgresql://")):
            try:
                from minicache.store.postgres import PostgresStore
            except ImportError as exc:
                raise StoreError(f"PostgreSQL stores need psycopg: {exc}") from exc
            return PostgresStore(spec, create=create)
        if re.match(r"^\s*\w+\s*=", spec) or re.match(r"^[a-z][a-z0-9+.-]*://", spec, re.I):
            raise StoreError(
                "not a store this MiniCache knows: use a file path for SQLite or a "
                "postgresql:// URL (key=value strings and other URL schemes are not accepted)"
            )
        return SQLiteStore(spec, create=create)
    return spec
