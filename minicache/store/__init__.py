"""Stores: where groups, examples and validated entries live. SQLite by default."""

from .base import Entry, Example, Group, Store, Variable, new_id, program_hash
from .sqlite import SQLiteStore, StoreError

__all__ = ["Entry", "Example", "Group", "Store", "Variable", "SQLiteStore", "StoreError", "new_id",
           "program_hash", "open_store"]


def open_store(spec: "str | Store | None") -> Store:
    """A store from a path (SQLite), ``:memory:``, or an existing store object."""
    if spec is None:
        return SQLiteStore("minicache.db")
    if isinstance(spec, str):
        if spec.startswith(("postgres://", "postgresql://")):
            raise StoreError("PostgreSQL stores are not available in this version; use a SQLite path")
        return SQLiteStore(spec)
    return spec
