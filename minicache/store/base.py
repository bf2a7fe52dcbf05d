"""What the engine persists, and the :class:`Store` protocol every backend (SQLite, PostgreSQL) implements.

Everything is stored as text or numbers (JSON for structured fields, raw float32 bytes for
embeddings); nothing is pickled, so a store can be read and audited with plain SQL. Every row
carries its tenant, and every query filters by it.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np

# An entry is a candidate until validated, then active; storing a newer active entry supersedes the
# group's previous one, and an entry that keeps failing (or is invalidated) is evicted.
EntryStatus = Literal["candidate", "active", "superseded", "evicted"]
# A group is open until it has an active entry (cached); admission marks it uncacheable for a while.
GroupStatus = Literal["open", "cached", "uncacheable"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def program_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass
class Variable:
    """One slot of an extraction template."""

    name: str
    type: str = "number"  # "number" | "integer" | "string"
    description: str = ""
    unit: str = ""
    example: Any = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Group:
    id: str
    tenant: str
    label: str | None = None
    status: GroupStatus = "open"
    build_failures: int = 0
    uncacheable_until: float = 0.0
    n_examples: int = 0
    created_at: float = field(default_factory=time.time)


@dataclass
class Example:
    """A request served by the miss path: what the target wrote for it and what that computed."""

    id: str
    tenant: str
    group_id: str
    question: str
    context: str | None
    program: str
    answer: Any
    variables: dict[str, Any]
    embedding: np.ndarray | None = None
    created_at: float = field(default_factory=time.time)


@dataclass
class Entry:
    """A cache entry: extraction template + parameterized program, trusted once validated."""

    id: str
    tenant: str
    group_id: str
    template: list[Variable]
    program: str
    version: int = 1
    status: EntryStatus = "active"
    validation: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, Any] = field(default_factory=dict)  # learned extraction rules, per variable
    hits: int = 0
    failures: int = 0
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    # Audits (see minicache.hit.verify): served hits also answered by the miss path, and how many agreed.
    audits_agreed: int = 0
    audits_disagreed: int = 0
    # The small model's choices on hit attempts (see minicache.hit.model_record): served, refused, milliseconds.
    model_served: int = 0
    model_refused: int = 0
    model_ms: int = 0

    @staticmethod
    def model_choice(served: bool, ms: int) -> dict[str, int]:
        """What one small-model choice adds to an entry's record (``Store.record_model_choice``)."""
        return {"model_served" if served else "model_refused": 1, "model_ms": max(0, int(ms))}

    @property
    def program_hash(self) -> str:
        return program_hash(self.program)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "group_id": self.group_id,
            "version": self.version,
            "status": self.status,
            "template": [v.as_dict() for v in self.template],
            "program": self.program,
            "program_hash": self.program_hash,
            "validation": self.validation,
            "rules": self.rules,
            "hits": self.hits,
            "failures": self.failures,
            "audits_agreed": self.audits_agreed,
            "audits_disagreed": self.audits_disagreed,
            "model_served": self.model_served,
            "model_refused": self.model_refused,
            "model_ms": self.model_ms,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass
class StepRecord:
    """A verified structured output StepCache may reuse step by step (see :mod:`minicache.stepcache`)."""

    id: str
    tenant: str
    task: str  # "linear" | "json"
    frame: str  # the request with its constants, names and output schema masked
    request: str
    steps: list[str]
    embedding: np.ndarray | None = None
    created_at: float = field(default_factory=time.time)


class RoutingRow(NamedTuple):
    """One example as the routing index needs it: ``seq`` orders examples by commit, so a replica
    reads only the rows after the last one it saw (see :meth:`Store.examples_since`)."""

    seq: int
    id: str
    group_id: str
    embedding: bytes


def stack_embeddings(rows: list[tuple[str, bytes]]) -> tuple[list[str], np.ndarray]:
    """The routing index from (group id, float32 bytes) rows. Rows of another width than the most
    recent one (an embedder change) are left out rather than breaking every request."""
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    width = len(rows[-1][1])
    kept = [(g, b) for g, b in rows if len(b) == width]
    return [g for g, _ in kept], np.stack([np.frombuffer(b, dtype=np.float32) for _, b in kept])


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=float)


class Store(Protocol):
    """Persistence for groups, examples and entries. Implementations must be thread-safe."""

    # groups
    def get_group(self, tenant: str, group_id: str) -> Group | None: ...
    def ensure_group(self, tenant: str, group_id: str, label: str | None = None) -> Group: ...
    def list_groups(self, tenant: str) -> list[Group]: ...
    def update_group(self, group: Group) -> None: ...
    def delete_group(self, tenant: str, group_id: str) -> int: ...

    # examples (routing uses their embeddings)
    def add_example(self, example: Example) -> None: ...
    def examples(self, tenant: str, group_id: str) -> list[Example]: ...
    def clear_examples(self, tenant: str, group_id: str) -> int: ...
    def routing_index(self, tenant: str) -> tuple[list[str], np.ndarray]: ...
    # examples with an embedding whose seq is above ``cursor``, by seq: seq only grows, and an
    # example becomes visible only after every example with a lower seq (commit order)
    def examples_since(self, tenant: str, cursor: int, limit: int = 10_000) -> list[RoutingRow]: ...
    # why the group's last build failed or its entry was evicted (JSON), for the next attempt
    def set_group_failure(
        self, tenant: str, group_id: str, failure: dict[str, Any] | None
    ) -> None: ...
    def group_failure(self, tenant: str, group_id: str) -> dict[str, Any] | None: ...

    # entries
    def put_entry(self, entry: Entry) -> Entry: ...
    def active_entry(self, tenant: str, group_id: str) -> Entry | None: ...
    def get_entry(self, tenant: str, entry_id: str) -> Entry | None: ...
    def list_entries(self, tenant: str, status: EntryStatus | None = None) -> list[Entry]: ...
    def record_hit(self, tenant: str, entry_id: str) -> None: ...
    def record_failure(self, tenant: str, entry_id: str) -> int: ...
    def record_audit(self, tenant: str, entry_id: str, agreed: bool) -> tuple[int, int]: ...
    # one hit attempt in which the small model chose values: served or refused, and its milliseconds
    def record_model_choice(self, tenant: str, entry_id: str, served: bool, ms: int) -> None: ...
    def set_entry_status(self, tenant: str, entry_id: str, status: EntryStatus) -> None: ...
    # an import: every entry (as put_entry) and example in ONE transaction, all or nothing
    def import_entries(self, entries: list[Entry], examples: list[Example]) -> None: ...
    def delete_entry(self, tenant: str, entry_id: str) -> bool: ...

    # build coordination between replicas: a lease row with an expiry (a crashed builder's lease lapses)
    def acquire_build_lease(self, tenant: str, group_id: str, owner: str, ttl_s: float) -> bool: ...
    def release_build_lease(self, tenant: str, group_id: str, owner: str) -> None: ...

    # counters
    # step records (StepCache)
    def add_step_record(self, record: StepRecord) -> None: ...
    def step_records(self, tenant: str, task: str) -> list[StepRecord]: ...

    def bump(self, tenant: str, counter: str, n: int = 1) -> None: ...
    def counters(self, tenant: str) -> dict[str, int]: ...
    # every tenant that has counters, groups or entries, sorted
    def tenants(self) -> list[str]: ...

    # the dashboard's requests over time (see minicache.store.history): per bucket of a unit
    # ("minute", "hour"), counter readings kept as (lowest, highest) and additions that sum
    def record_history(
        self,
        tenant: str,
        unit: str,
        bucket_start: int,
        levels: Mapping[str, float],
        added: Mapping[str, float],
    ) -> None: ...
    def history(
        self, tenant: str, unit: str, since: int
    ) -> dict[int, dict[str, tuple[float, float]]]: ...
    def prune_history(self, unit: str, before: int) -> int: ...

    def schema_version(self) -> int: ...
    def close(self) -> None: ...
