"""Rows <-> objects, written once for both stores.

A row is read by column name: ``sqlite3.Row`` and psycopg's dict rows both are. What is written
is a column -> value dict in the schema's column names (:mod:`.schema`), which
:meth:`~.schema.Dialect.insert` turns into an INSERT. Structured fields are JSON text (sorted keys,
so equal values store equal text), embeddings raw float32 bytes, timestamps floats: PostgreSQL's
driver would send an int as a bigint, and SQLite stores a REAL column's int as a float anyway.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, cast

import numpy as np

from minicache.store.base import (
    Entry,
    EntryStatus,
    Example,
    Group,
    GroupStatus,
    StepRecord,
    Variable,
    dumps,
)


class Row(Protocol):
    def __getitem__(self, column: str) -> Any: ...


def vector_bytes(vector: np.ndarray | None) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


def vector(blob: bytes | memoryview | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(bytes(blob), dtype=np.float32)


def to_group(row: Row, n_examples: int) -> Group:
    return Group(
        id=row["id"],
        tenant=row["tenant"],
        label=row["label"],
        status=cast(GroupStatus, row["status"]),
        build_failures=row["build_failures"],
        uncacheable_until=row["uncacheable_until"],
        created_at=row["created_at"],
        n_examples=n_examples,
    )


def example_row(example: Example) -> dict[str, Any]:
    return {
        "tenant": example.tenant,
        "id": example.id,
        "group_id": example.group_id,
        "question": example.question,
        "context": example.context,
        "program": example.program,
        "answer": dumps(example.answer),
        "variables": dumps(example.variables),
        "embedding": vector_bytes(example.embedding),
        "created_at": float(example.created_at),
    }


def to_example(row: Row) -> Example:
    return Example(
        id=row["id"],
        tenant=row["tenant"],
        group_id=row["group_id"],
        question=row["question"],
        context=row["context"],
        program=row["program"],
        answer=json.loads(row["answer"]),
        variables=json.loads(row["variables"]),
        embedding=vector(row["embedding"]),
        created_at=row["created_at"],
    )


def entry_row(entry: Entry) -> dict[str, Any]:
    """``entry`` as stored: its version and updated_at are the ones the store assigned."""
    return {
        "tenant": entry.tenant,
        "id": entry.id,
        "group_id": entry.group_id,
        "version": entry.version,
        "status": entry.status,
        "template": dumps([v.as_dict() for v in entry.template]),
        "program": entry.program,
        "program_hash": entry.program_hash,
        "validation": dumps(entry.validation),
        "rules": dumps(entry.rules),
        "hits": entry.hits,
        "failures": entry.failures,
        "created_at": float(entry.created_at),
        "updated_at": float(entry.updated_at),
        "audits_agreed": entry.audits_agreed,
        "audits_disagreed": entry.audits_disagreed,
        "model_served": entry.model_served,
        "model_refused": entry.model_refused,
        "model_ms": entry.model_ms,
    }


def to_entry(row: Row) -> Entry:
    return Entry(
        id=row["id"],
        tenant=row["tenant"],
        group_id=row["group_id"],
        template=[Variable(**v) for v in json.loads(row["template"])],
        program=row["program"],
        version=row["version"],
        status=cast(EntryStatus, row["status"]),
        validation=json.loads(row["validation"]),
        rules=json.loads(row["rules"]),
        hits=row["hits"],
        failures=row["failures"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        audits_agreed=row["audits_agreed"],
        audits_disagreed=row["audits_disagreed"],
        model_served=row["model_served"],
        model_refused=row["model_refused"],
        model_ms=row["model_ms"],
    )


def step_record_row(record: StepRecord) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "id": record.id,
        "task": record.task,
        "frame": record.frame,
        "request": record.request,
        "steps": json.dumps(record.steps),
        "embedding": vector_bytes(record.embedding),
        "created_at": float(record.created_at),
    }


def to_step_record(row: Row) -> StepRecord:
    return StepRecord(
        id=row["id"],
        tenant=row["tenant"],
        task=row["task"],
        frame=row["frame"],
        request=row["request"],
        steps=json.loads(row["steps"]),
        embedding=vector(row["embedding"]),
        created_at=row["created_at"],
    )
