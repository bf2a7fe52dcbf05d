"""Stores: where groups, examples and validated entries live. SQLite by default."""

import re
from typing import TYPE_CHECKING, Any

from .base import Entry, Example, Group, Store, Variable, new_id, program_hash
from .sqlite import SQLiteStore, StoreError

if TYPE_CHECKING:
    from .postgres import PostgresStore


def __getattr__(name: str) -> Any:
    # psycopg is imported only when a PostgreSQL store is asked for.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Entry", "Example", "Group", "Store", "Variable", "SQLiteStore", "StoreError", "new_id",
           "program_hash", "open_store"]


def open_store(spec: "str | Store | None") -> Store:
    """A store from a SQLite path, ``:memory:``, a ``postgresql://`` URL, or an existing store object."""
    if spec is None:
        return SQLiteStore("minicache.db")
    if isinstance(spec, str):
        if spec.lower().startswith(("postgres://", "postgresql://")):
            try:
                from .postgres import PostgresStore
            except ImportError as exc:
                raise StoreError(f"PostgreSQL stores need psycopg: {exc}") from exc
            return PostgresStore(spec)
        if re.match(r"^\s*\w+\s*=", spec):
            raise StoreError("key=value connection strings are not accepted: use a postgresql:// URL "
                             "(or a file path for SQLite)")
        return SQLiteStore(spec)
    return spec
