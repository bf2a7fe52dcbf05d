"""What only the SQLite store does: its migrations and the files older code wrote, the WAL journal,
the busy timeout, shared in-memory stores, and open_store's SQLite side. Everything both stores
promise is in tests/test_store_contract.py, run on SQLite there."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from test_store_contract import check_writes_and_reads_back, entry, example

from minicache.store import SQLiteStore, StoreBusy, StoreError, open_store
from minicache.store.schema import LATEST

# The SQLite schema exactly as the store wrote it before the schema was defined once for both
# stores (minicache/store/schema.py): every SQLite file created until then has these tables.
OLD_MIGRATIONS: list[str] = [
    # 1: the initial schema
    """
    CREATE TABLE groups (
        tenant TEXT NOT NULL, id TEXT NOT NULL, label TEXT, status TEXT NOT NULL DEFAULT 'open',
        build_failures INTEGER NOT NULL DEFAULT 0, uncacheable_until REAL NOT NULL DEFAULT 0,
        created_at REAL NOT NULL, PRIMARY KEY (tenant, id));
    CREATE TABLE examples (
        tenant TEXT NOT NULL, id TEXT NOT NULL, group_id TEXT NOT NULL, question TEXT NOT NULL,
        context TEXT, program TEXT NOT NULL, answer TEXT NOT NULL, variables TEXT NOT NULL,
        embedding BLOB, created_at REAL NOT NULL, PRIMARY KEY (tenant, id));
    CREATE INDEX examples_group ON examples (tenant, group_id);
    CREATE TABLE entries (
        tenant TEXT NOT NULL, id TEXT NOT NULL, group_id TEXT NOT NULL, version INTEGER NOT NULL,
        status TEXT NOT NULL, template TEXT NOT NULL, program TEXT NOT NULL, program_hash TEXT NOT NULL,
        validation TEXT NOT NULL, rules TEXT NOT NULL DEFAULT '{}', hits INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL,
        PRIMARY KEY (tenant, id));
    CREATE INDEX entries_group ON entries (tenant, group_id, status);
    CREATE TABLE counters (tenant TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL,
        PRIMARY KEY (tenant, name));
    """,
    # 2: build leases, so that replicas sharing a store never build one group twice at once
    """
    CREATE TABLE build_leases (tenant TEXT NOT NULL, group_id TEXT NOT NULL, owner TEXT NOT NULL,
        expires_at REAL NOT NULL, PRIMARY KEY (tenant, group_id));
    """,
    # 3: StepCache's verified structured outputs
    """
    CREATE TABLE step_records (tenant TEXT NOT NULL, id TEXT NOT NULL, task TEXT NOT NULL, frame TEXT NOT NULL,
        request TEXT NOT NULL, steps TEXT NOT NULL, embedding BLOB, created_at REAL NOT NULL,
        PRIMARY KEY (tenant, id));
    CREATE INDEX step_records_task ON step_records (tenant, task);
    """,
    # 4: each entry's audit record (hits also answered by the miss path: agreed / disagreed)
    """
    ALTER TABLE entries ADD COLUMN audits_agreed INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE entries ADD COLUMN audits_disagreed INTEGER NOT NULL DEFAULT 0;
    """,
    # 5: a commit-ordered example sequence (replicas' routing indexes read only what is new) and
    # why each group's last build failed or its entry was evicted (minicache.build.admission)
    """
    CREATE TABLE sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
    ALTER TABLE examples ADD COLUMN seq INTEGER;
    UPDATE examples SET seq = rowid;
    INSERT INTO sequences (name, value) SELECT 'examples', COALESCE(MAX(rowid), 0) FROM examples;
    CREATE INDEX examples_seq ON examples (tenant, seq);
    ALTER TABLE groups ADD COLUMN failure TEXT;
    """,
    # 6: each entry's record of the small model's choices on hit attempts (minicache.hit.model_record)
    """
    ALTER TABLE entries ADD COLUMN model_served INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE entries ADD COLUMN model_refused INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE entries ADD COLUMN model_ms INTEGER NOT NULL DEFAULT 0;
    """,
]


def write_old_schema(path: Path, up_to: int = len(OLD_MIGRATIONS)) -> None:
    """A database file as the previous code migrated it, to version ``up_to``."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for version, script in enumerate(OLD_MIGRATIONS[:up_to], start=1):
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
    conn.close()


def schema_of(path: Path) -> dict[str, list[tuple]]:
    """Every table's columns (name, type, not null, default, key) and every index's columns."""
    conn = sqlite3.connect(path)
    try:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]
        schema = {t: [tuple(c[1:]) for c in conn.execute(f"PRAGMA table_info({t})")] for t in names}
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
        ):
            schema[f"index {name}"] = [tuple(c) for c in conn.execute(f"PRAGMA index_info({name})")]
        return schema
    finally:
        conn.close()


# -- migrations and older files --------------------------------------------------------------------


def test_migrations_bring_a_new_store_to_the_latest_schema(tmp_path):
    store = SQLiteStore(tmp_path / "store.db")
    # the versions after OLD_MIGRATIONS were born in schema.py: what they add is checked below
    assert store.schema_version() == LATEST == len(OLD_MIGRATIONS) + 1
    tables = {
        r[0] for r in store._conn().execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    assert {
        "groups",
        "examples",
        "entries",
        "counters",
        "schema_version",
        "build_leases",
        "step_records",
        "sequences",
        "counter_history",
    } <= tables
    store.close()


def test_a_file_the_previous_code_created_opens_and_has_the_schema_a_new_one_gets(tmp_path):
    write_old_schema(tmp_path / "old.db")
    SQLiteStore(tmp_path / "new.db").close()
    with closing(SQLiteStore(tmp_path / "old.db")) as old:  # migrates what came after
        check_writes_and_reads_back(old)
    assert schema_of(tmp_path / "old.db") == schema_of(tmp_path / "new.db")


def test_a_file_at_version_4_migrates_and_numbers_its_examples_in_commit_order(tmp_path):
    path = tmp_path / "v4.db"
    write_old_schema(path, up_to=4)
    conn = sqlite3.connect(path)
    with conn:
        for i in range(3):
            conn.execute(
                "INSERT INTO examples (tenant, id, group_id, question, context, program, answer, variables, "
                "embedding, created_at) VALUES ('default', ?, 'g', 'q', NULL, 'p', '1', '{}', ?, ?)",
                (f"ex_{i}", np.full(2, i, dtype=np.float32).tobytes(), 1000.0 + i),
            )
    conn.close()
    with closing(SQLiteStore(path)) as store:
        assert store.schema_version() == LATEST
        rows = store.examples_since("default", 0)
        assert [r.id for r in rows] == ["ex_0", "ex_1", "ex_2"] and [r.seq for r in rows] == [
            1,
            2,
            3,
        ]
        store.add_example(example("g", embedding=np.ones(2, dtype=np.float32)))
        assert [r.seq for r in store.examples_since("default", 3)] == [4]
        assert store.group_failure("default", "g") is None  # the new column exists, empty


def test_a_file_at_version_6_upgrades_in_place_keeps_its_data_and_records_history(tmp_path):
    path = tmp_path / "v6.db"
    write_old_schema(path, up_to=6)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO counters (tenant, name, value) VALUES ('team-a', 'requests', 7)")
        conn.execute(
            "INSERT INTO groups (tenant, id, created_at) VALUES ('team-b', 'grp_1', 1000.0)"
        )
    conn.close()
    with closing(SQLiteStore(path)) as store:
        assert store.schema_version() == LATEST == 7
        assert store.counters("team-a") == {"requests": 7}
        assert store.get_group("team-b", "grp_1") is not None
        assert store.tenants() == ["team-a", "team-b"]
        store.record_history("team-a", "minute", 60, {"requests": 7.0}, {})
    with closing(SQLiteStore(path)) as again:
        assert again.history("team-a", "minute", 0) == {60: {"requests": (7.0, 7.0)}}


def test_open_store_accepts_a_path_or_a_store_and_refuses_postgres(tmp_path):
    s = open_store(str(tmp_path / "o.db"))
    assert isinstance(s, SQLiteStore) and s.schema_version() >= 1
    assert open_store(s) is s
    s.close()
    with pytest.raises(StoreError, match="cannot connect|connect"):
        open_store("postgresql://127.0.0.1:1/x")
    with pytest.raises(StoreError, match="key=value"):
        open_store("host=db dbname=minicache")


# -- journal, locking, in-memory stores ------------------------------------------------------------


def test_wal_journal_mode_is_on(tmp_path):
    store = SQLiteStore(tmp_path / "store.db")
    assert store._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(store.path) as plain:  # WAL is a property of the file
        assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    plain.close()
    store.close()


def test_a_write_lock_held_past_the_busy_timeout_is_store_busy_and_writes_nothing(tmp_path):
    store = SQLiteStore(tmp_path / "store.db", busy_timeout_s=0.2)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, and taking its time
    try:
        with pytest.raises(StoreBusy, match="waited 0.2 s"):
            store.put_entry(entry())
        assert isinstance(StoreBusy("x"), StoreError)  # callers that catch StoreError catch it too
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.list_entries("default") == [] and store.get_group("default", "grp_1") is None
    assert store.put_entry(entry()).version == 1  # the lock is free again: writes go through
    store.close()


def test_in_memory_store_is_shared_between_threads():
    s = SQLiteStore(":memory:")
    s.bump("default", "requests")
    errors: list[BaseException] = []

    def other_thread():
        try:
            s.bump("default", "requests")
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    if errors:
        raise errors[0]
    assert s.counters("default") == {"requests": 2}
    s.close()
