"""Entry export and import: the one definition of the export format, and the one way in.

An export is a JSON list of entries: what ``GET /admin/export``, ``minicache entries export`` and
:meth:`MiniCache.export_entries` write. Every way back in (``POST /admin/import``, ``minicache
entries import``, :meth:`MiniCache.import_entries`, :meth:`MiniCache.warm_start`) goes through
:func:`parse_export`, which validates the *whole* document against :class:`EntryExport` before
anything is written, and :func:`import_entries`, which writes it in one store transaction: an
import lands completely or not at all.

Why so strict: an import stores programs that later run on every hit, and JSON and counters that
every later read must serve back. So beyond shapes and types the model rejects what a store cannot
hold or give back (NUL characters, lone surrogates, NaN and Infinity, integers beyond int32, which
is PostgreSQL's INTEGER), programs the sandbox gate refuses, templates that do not name the
program's parameters, and documents that repeat an entry id or a group (a second entry for one
group would silently supersede the first).

Ids: an imported entry gets a fresh id; the id it had in the file is kept as
``validation["imported_from"]``. An import therefore never collides with what the store holds:
importing the same file twice, or into the tenant it came from, adds a new version of each
group's entry, which supersedes the previous one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from minicache.errors import InvalidRequest, ProgramShapeError
from minicache.hit.rules import valid_rule
from minicache.programs.signature import parse_signature
from minicache.route.router import Embedder, embed_request
from minicache.sandbox import SandboxViolation, check_program
from minicache.store import Entry, Example, Store, Variable, new_id, program_hash

__all__ = [
    "EntryExport",
    "ExportedEntry",
    "ExportedExample",
    "ExportedVariable",
    "export_entries",
    "import_entries",
    "load_export",
    "parse_export",
]

INT32_MAX = 2**31 - 1  # counters and versions are INTEGER columns (int32 in PostgreSQL)
MAX_ENTRIES = 10_000  # one import is one transaction: keep it bounded
MAX_EXAMPLES = 100  # what GET /admin/export?examples= allows
MAX_DEPTH = 32  # JSON nesting anywhere in an entry
MAX_NAME = 200  # ids, group ids and tenants
MAX_QUESTION = 32_000  # the engine's default request limits (EngineConfig)
MAX_CONTEXT = 200_000

Name = Annotated[StrictStr, Field(min_length=1, max_length=MAX_NAME)]
Count = Annotated[StrictInt, Field(ge=0, le=INT32_MAX)]
Status = Literal["active", "candidate", "superseded", "evicted"]


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored and served back as it is, or None: PostgreSQL refuses NUL
    characters, and a lone surrogate cannot be encoded as UTF-8 (every JSON response would fail)."""
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"contains a lone surrogate at character {exc.start}"
    return None


def _json_problem(value: Any, path: str, depth: int = 0) -> str | None:
    """The first thing in ``value`` that is not plain, storable JSON, as ``"path: why"``."""
    where = path or "entry"
    if depth > MAX_DEPTH:
        return f"{where}: nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        problem = text_problem(value)
        return f"{where}: {problem}" if problem else None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value} is not allowed (only finite numbers)"
    if value is None or isinstance(value, (bool, int, float)):
        return None
    if isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                return f"{where}: key {key!r} is not a string"
            problem = text_problem(key)
            if problem:
                return f"{where}: a key {problem}"
        items = ((f"{path}.{k}" if path else k, v) for k, v in value.items())
    else:
        return f"{where}: {type(value).__name__} is not a JSON value"
    for sub, item in items:
        problem = _json_problem(item, sub, depth + 1)
        if problem:
            return problem
    return None


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ExportedVariable(_Strict):
    """One slot of an entry's extraction template."""

    name: Annotated[StrictStr, Field(min_length=1, max_length=100)]
    type: Literal["number", "integer", "string"] = "number"
    description: Annotated[StrictStr, Field(max_length=2_000)] = ""
    unit: Annotated[StrictStr, Field(max_length=200)] = ""
    example: StrictInt | StrictFloat | StrictStr | None = None


class ExportedExample(_Strict):
    """One request the entry's group served; it lets the importing cache route unlabelled requests."""

    question: Annotated[StrictStr, Field(min_length=1, max_length=MAX_QUESTION)]
    context: Annotated[StrictStr, Field(max_length=MAX_CONTEXT)] | None = None
    answer: Any = None
    variables: dict[str, Any] = Field(default_factory=dict)


class ExportedEntry(_Strict):
    """One cache entry as exported. ``tenant``, ``version``, ``created_at`` and ``updated_at`` are
    checked but not imported: the importing store assigns them."""

    id: Name | None = None
    tenant: Name | None = None
    group_id: Name
    version: Annotated[StrictInt, Field(ge=1, le=INT32_MAX)] = 1
    status: Status = "active"
    template: Annotated[list[ExportedVariable], Field(min_length=1, max_length=100)]
    program: StrictStr
    program_hash: StrictStr | None = None
    validation: dict[str, Any] = Field(default_factory=dict)
    rules: dict[str, dict[str, Any]] = Field(default_factory=dict)
    hits: Count = 0
    failures: Count = 0
    audits_agreed: Count = 0
    audits_disagreed: Count = 0
    model_served: Count = 0
    model_refused: Count = 0
    model_ms: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] = 0  # a bigint column
    created_at: Annotated[StrictFloat, Field(ge=0)] | None = None
    updated_at: Annotated[StrictFloat, Field(ge=0)] | None = None
    examples: Annotated[list[ExportedExample], Field(max_length=MAX_EXAMPLES)] = Field(
        default_factory=list
    )

    @model_validator(mode="before")
    @classmethod
    def _plain_json(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"not a JSON object ({type(data).__name__})")
        problem = _json_problem(data, "")
        if problem:
            raise ValueError(problem)
        return data

    @field_validator("group_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is blank")
        return value

    @field_validator("program")
    @classmethod
    def _program_passes_the_gates(cls, source: str) -> str:
        try:
            check_program(source)  # the sandbox's allow-list: what every program must pass to run
        except SandboxViolation as exc:
            raise ValueError(f"refused by the sandbox: {exc}") from None
        try:
            parse_signature(source)
        except ProgramShapeError as exc:
            raise ValueError(f"not a parameterized solve(): {exc}") from None
        return source

    @model_validator(mode="after")
    def _consistent(self) -> ExportedEntry:
        if self.program_hash is not None and self.program_hash != program_hash(self.program):
            raise ValueError("program_hash does not match the program text")
        names = [v.name for v in self.template]
        params = [v.name for v in parse_signature(self.program).template]
        if sorted(names) != sorted(params) or len(set(names)) != len(names):
            raise ValueError(f"template names {names} are not the program's parameters {params}")
        for name, rule in self.rules.items():
            if name not in names:
                raise ValueError(f"rules.{name}: not a template variable")
            if not valid_rule(rule):
                raise ValueError(f"rules.{name}: not a valid extraction rule")
        return self


class EntryExport(RootModel[Annotated[list[ExportedEntry], Field(max_length=MAX_ENTRIES)]]):
    """A whole export document: a list of entries, no entry id and no group twice."""

    @model_validator(mode="after")
    def _unique(self) -> EntryExport:
        ids: dict[str, int] = {}
        groups: dict[str, int] = {}
        for i, entry in enumerate(self.root):
            if entry.id is not None:
                if entry.id in ids:
                    raise ValueError(f"entry {i}: id {entry.id!r} repeats entry {ids[entry.id]}'s")
                ids[entry.id] = i
            if entry.group_id in groups:
                raise ValueError(
                    f"entry {i}: group_id {entry.group_id!r} repeats entry {groups[entry.group_id]}'s "
                    "(one entry per group: the second would supersede the first)"
                )
            groups[entry.group_id] = i
        return self


def _describe(error: dict[str, Any]) -> str:
    """One pydantic error as ``entry N: field.path: why``."""
    loc = list(error.get("loc", ()))
    message = str(error.get("msg", "invalid"))
    message = message.removeprefix("Value error, ")
    if error.get("type") == "list_type" and not loc:
        return "expected a JSON list of entries (as an export writes)"
    if error.get("type") == "too_long" and not loc:
        return f"at most {MAX_ENTRIES} entries per import"
    if not loc:
        return message
    head, rest = loc[0], [str(p) for p in loc[1:]]
    field = ".".join(p if not p.isdigit() else f"[{p}]" for p in rest).replace(".[", "[")
    return f"entry {head}: {field}: {message}" if field else f"entry {head}: {message}"


def parse_export(data: Any) -> list[ExportedEntry]:
    """``data`` (parsed JSON) validated as a whole; :class:`InvalidRequest` names the first problem."""
    try:
        return EntryExport.model_validate(data).root
    except ValidationError as exc:
        errors = exc.errors()
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise InvalidRequest(_describe(dict(errors[0])) + more) from None


def load_export(path: str | Path) -> list[ExportedEntry]:
    """An export file, read and validated as a whole (:class:`InvalidRequest` if unreadable or invalid)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InvalidRequest(f"cannot read entries from {path}: {exc}") from None
    try:
        return parse_export(data)
    except InvalidRequest as exc:
        raise InvalidRequest(f"{path}: {exc}") from None


def export_entries(
    store: Store, tenant: str = "default", examples: int = 3
) -> list[dict[str, Any]]:
    """The tenant's active entries as JSON, each with up to ``examples`` of its group's latest
    requests, which let an importing cache route unlabelled requests to it."""
    out = []
    for entry in store.list_entries(tenant, "active"):
        data = entry.to_json()
        data["examples"] = [
            {
                "question": x.question,
                "context": x.context,
                "answer": x.answer,
                "variables": x.variables,
            }
            for x in (store.examples(tenant, entry.group_id)[-examples:] if examples > 0 else [])
        ]
        out.append(data)
    return out


def import_entries(
    store: Store,
    entries: list[ExportedEntry],
    tenant: str,
    embedder: Callable[[], Embedder] | None,
    recorded: Callable[[str, str, np.ndarray], None] | None = None,
    table_rows: bool = True,
) -> int:
    """Write validated ``entries`` into ``tenant`` in one transaction; returns how many.

    Each becomes its group's active entry under a fresh id. Examples are embedded for routing by
    the embedder ``embedder()`` returns (called only if some entry carries examples: loading one
    costs time); with None they are stored unembedded and serve only requests labelled with their
    group. Embedding happens before the transaction, so no lock is held while a model runs. After
    the commit, ``recorded(tenant, group_id, vector)`` is told of every embedded example (an
    engine's in-memory routing index, so that they route at once, not at its next refresh).
    ``table_rows``: the routing engine's ``route_table_rows``, which the vectors follow."""
    if (
        not isinstance(tenant, str)
        or not tenant.strip()
        or len(tenant) > MAX_NAME
        or text_problem(tenant)
    ):
        raise InvalidRequest(
            f"tenant must be a non-empty string of at most {MAX_NAME} characters, "
            "without NUL characters or lone surrogates"
        )
    model = embedder() if embedder is not None and any(item.examples for item in entries) else None
    rows: list[Entry] = []
    examples: list[Example] = []
    for item in entries:
        validation = dict(item.validation)
        if item.id is not None:
            validation["imported_from"] = item.id
        entry = Entry(
            id=new_id("ent"),
            tenant=tenant,
            group_id=item.group_id,
            program=item.program,
            template=[Variable(**v.model_dump()) for v in item.template],
            status="active",
            validation=validation,
            rules=dict(item.rules),
            hits=item.hits,
            failures=item.failures,
            audits_agreed=item.audits_agreed,
            audits_disagreed=item.audits_disagreed,
            model_served=item.model_served,
            model_refused=item.model_refused,
            model_ms=item.model_ms,
        )
        rows.append(entry)
        for x in item.examples:
            vector: np.ndarray | None = (
                embed_request(model, x.question, x.context, table_rows)
                if model is not None
                else None
            )
            examples.append(
                Example(
                    id=new_id("ex"),
                    tenant=tenant,
                    group_id=item.group_id,
                    question=x.question,
                    context=x.context,
                    program=item.program,
                    answer=x.answer,
                    variables=dict(x.variables),
                    embedding=vector,
                )
            )
    store.import_entries(rows, examples)
    if recorded is not None:
        for example in examples:
            if example.embedding is not None:
                recorded(tenant, example.group_id, example.embedding)
    return len(rows)
