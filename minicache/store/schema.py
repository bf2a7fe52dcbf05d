"""The one schema both stores use: tables, columns, indexes, and the migrations that build them.

A migration is a list of steps (create a table, add a column, create an index, or a statement that
only one dialect needs), and :func:`statements` renders one version's steps for SQLite or
PostgreSQL. The dialects differ in type names (a timestamp is ``REAL`` in SQLite but must be
``DOUBLE PRECISION`` in PostgreSQL, whose ``REAL`` is float4), in placeholders, and in how rows
keep their insertion order: a SQLite table has a ``rowid``, a PostgreSQL one gets a ``seq``
identity column. The rendered DDL is what each store ran before the schema was written once, so a
database an older MiniCache created opens unchanged (the store tests build one with the old DDL and
compare).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from minicache.errors import StoreError

ColumnType = Literal["text", "int", "bigint", "float", "bytes"]
DialectName = Literal["sqlite", "postgres"]


@dataclass(frozen=True)
class Dialect:
    """What differs between the two SQL dialects MiniCache speaks."""

    name: DialectName
    types: dict[ColumnType, str]
    param: str  # the query placeholder
    seq: str | None  # the identity column an ordered table gets, where the dialect has no rowid
    versions: str  # the table of applied migrations, as each store has always created it
    greatest: str  # the larger of two values (SQLite's scalar MAX, PostgreSQL's GREATEST)
    least: str  # the smaller of two values (SQLite's scalar MIN, PostgreSQL's LEAST)

    def params(self, n: int) -> str:
        return ",".join([self.param] * n)

    def insert(self, table: str, row: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """An INSERT of ``row`` (column -> value, as the row mapping in :mod:`.rows` writes it)."""
        return (
            f"INSERT INTO {table} ({', '.join(row)}) VALUES ({self.params(len(row))})",
            tuple(row.values()),
        )

    def add_to(
        self, table: str, tenant: str, row_id: str, amounts: dict[str, int]
    ) -> tuple[str, tuple[Any, ...]]:
        """An UPDATE adding ``amounts`` (column -> amount) to one row's counts, in one statement."""
        sets = ", ".join(f"{column}={column}+{self.param}" for column in amounts)
        return (
            f"UPDATE {table} SET {sets} WHERE tenant={self.param} AND id={self.param}",
            (*amounts.values(), tenant, row_id),
        )


SQLITE = Dialect(
    "sqlite",
    {"text": "TEXT", "int": "INTEGER", "bigint": "INTEGER", "float": "REAL", "bytes": "BLOB"},
    param="?",
    seq=None,
    versions="CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    greatest="MAX",
    least="MIN",
)
POSTGRES = Dialect(
    "postgres",
    {
        "text": "TEXT",
        "int": "INTEGER",
        "bigint": "BIGINT",
        "float": "DOUBLE PRECISION",
        "bytes": "BYTEA",
    },
    param="%s",
    seq="seq BIGINT GENERATED ALWAYS AS IDENTITY",
    versions="CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY)",
    greatest="GREATEST",
    least="LEAST",
)


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    null: bool = False
    default: str | None = None  # an SQL literal both dialects read alike

    def ddl(self, d: Dialect) -> str:
        return " ".join(
            [self.name, d.types[self.type]]
            + ([] if self.null else ["NOT NULL"])
            + ([] if self.default is None else [f"DEFAULT {self.default}"])
        )


@dataclass(frozen=True)
class Table:
    """CREATE TABLE. ``ordered``: rows are read back in insertion order (PostgreSQL adds ``seq``)."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    ordered: bool = True


@dataclass(frozen=True)
class Index:
    name: str
    table: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class AddColumn:
    table: str
    column: Column


@dataclass(frozen=True)
class Only:
    """Statements one dialect needs and the other does not (its reason is said where it is used)."""

    dialect: DialectName
    sql: tuple[str, ...]


Step = Table | Index | AddColumn | Only


def _text(name: str, null: bool = False, default: str | None = None) -> Column:
    return Column(name, "text", null, default)


def _int(name: str, default: str | None = None, kind: ColumnType = "int") -> Column:
    return Column(name, kind, default=default)


def _float(name: str, default: str | None = None) -> Column:
    return Column(name, "float", default=default)


_TENANT_ID = (_text("tenant"), _text("id"))

MIGRATIONS: list[list[Step]] = [
    # 1: the initial schema
    [
        Table(
            "groups",
            (
                *_TENANT_ID,
                _text("label", null=True),
                _text("status", default="'open'"),
                _int("build_failures", "0"),
                _float("uncacheable_until", "0"),
                _float("created_at"),
            ),
            key=("tenant", "id"),
        ),
        Table(
            "examples",
            (
                *_TENANT_ID,
                _text("group_id"),
                _text("question"),
                _text("context", null=True),
                _text("program"),
                _text("answer"),
                _text("variables"),
                Column("embedding", "bytes", True),
                _float("created_at"),
            ),
            key=("tenant", "id"),
        ),
        Index("examples_group", "examples", ("tenant", "group_id")),
        Table(
            "entries",
            (
                *_TENANT_ID,
                _text("group_id"),
                _int("version"),
                _text("status"),
                _text("template"),
                _text("program"),
                _text("program_hash"),
                _text("validation"),
                _text("rules", default="'{}'"),
                _int("hits", "0"),
                _int("failures", "0"),
                _float("created_at"),
                _float("updated_at"),
            ),
            key=("tenant", "id"),
        ),
        # Replicas write one group's entries concurrently on PostgreSQL (serialized by the group's
        # row lock); the constraint is the backstop. SQLite's writers are serialized by BEGIN IMMEDIATE.
        Only("postgres", ("ALTER TABLE entries ADD UNIQUE (tenant, group_id, version)",)),
        Index("entries_group", "entries", ("tenant", "group_id", "status")),
        Table(
            "counters",
            (_text("tenant"), _text("name"), _int("value", kind="bigint")),
            key=("tenant", "name"),
            ordered=False,
        ),
    ],
    # 2: build leases, so that replicas sharing a store never build one group twice at once
    [
        Table(
            "build_leases",
            (_text("tenant"), _text("group_id"), _text("owner"), _float("expires_at")),
            key=("tenant", "group_id"),
            ordered=False,
        )
    ],
    # 3: StepCache's verified structured outputs
    [
        Table(
            "step_records",
            (
                *_TENANT_ID,
                _text("task"),
                _text("frame"),
                _text("request"),
                _text("steps"),
                Column("embedding", "bytes", True),
                _float("created_at"),
            ),
            key=("tenant", "id"),
        ),
        Index("step_records_task", "step_records", ("tenant", "task")),
    ],
    # 4: each entry's audit record (hits also answered by the miss path: agreed / disagreed)
    [
        AddColumn("entries", _int("audits_agreed", "0")),
        AddColumn("entries", _int("audits_disagreed", "0")),
    ],
    # 5: a commit-ordered example sequence (replicas' routing indexes read only what is new) and why
    # each group's last build failed or its entry was evicted (minicache.build.admission). PostgreSQL's
    # examples have had an identity ``seq`` since 1; SQLite's get one drawn from a counter row, since
    # a rowid can be reused after a delete and a replica's cursor would then skip an example.
    [
        Only(
            "sqlite",
            (
                "CREATE TABLE sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
                "ALTER TABLE examples ADD COLUMN seq INTEGER",
                "UPDATE examples SET seq = rowid",
                "INSERT INTO sequences (name, value) "
                "SELECT 'examples', COALESCE(MAX(rowid), 0) FROM examples",
            ),
        ),
        Index("examples_seq", "examples", ("tenant", "seq")),
        AddColumn("groups", _text("failure", null=True)),
    ],
    # 6: each entry's record of the small model's choices on its hit attempts: served, refused by a
    # check, and their milliseconds (minicache.hit.model_record decides from it whether to ask the model)
    [
        AddColumn("entries", _int("model_served", "0")),
        AddColumn("entries", _int("model_refused", "0")),
        AddColumn("entries", _int("model_ms", "0", kind="bigint")),
    ],
    # 7: the dashboard's requests over time, per minute and per hour, so that its charts survive a
    # restart (minicache.store.history says what a row holds)
    [
        Table(
            "counter_history",
            (
                _text("tenant"),
                _text("unit"),
                _int("bucket_start", kind="bigint"),
                _text("name"),
                _float("low"),
                _float("high"),
            ),
            key=("tenant", "unit", "bucket_start", "name"),
            ordered=False,
        ),
        Index("counter_history_unit", "counter_history", ("unit", "bucket_start")),
    ],
]

LATEST = len(MIGRATIONS)


def render(step: Step, d: Dialect) -> list[str]:
    """The statements ``step`` is in dialect ``d`` (none for another dialect's :class:`Only`)."""
    if isinstance(step, Table):
        parts = [c.ddl(d) for c in step.columns]
        if step.ordered and d.seq:
            parts.append(d.seq)
        parts.append(f"PRIMARY KEY ({', '.join(step.key)})")
        return [f"CREATE TABLE {step.name} ({', '.join(parts)})"]
    if isinstance(step, Index):
        return [f"CREATE INDEX {step.name} ON {step.table} ({', '.join(step.columns)})"]
    if isinstance(step, AddColumn):
        return [f"ALTER TABLE {step.table} ADD COLUMN {step.column.ddl(d)}"]
    return list(step.sql) if step.dialect == d.name else []


def statements(version: int, d: Dialect) -> list[str]:
    """The statements that bring a database at ``version - 1`` to ``version``, in order."""
    return [sql for step in MIGRATIONS[version - 1] for sql in render(step, d)]


def upgrade(execute: Callable[..., object], current: int, d: Dialect, where: str) -> None:
    """Apply every migration after ``current``, each recorded in ``schema_version``, through
    ``execute(sql, args)`` inside the caller's transaction (all versions land, or none).

    A database a newer MiniCache migrated is refused: this one would misread what it does not know."""
    if current > LATEST:
        raise StoreError(
            f"{where} has schema version {current}; this MiniCache knows up to {LATEST}. "
            "Upgrade MiniCache."
        )
    for version in range(current + 1, LATEST + 1):
        for statement in statements(version, d):
            execute(statement)
        execute(f"INSERT INTO schema_version (version) VALUES ({d.param})", (version,))
