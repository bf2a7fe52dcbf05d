"""The entry export format (minicache.portability): one pydantic model that every import path uses,
checked with valid and invalid documents (one per rejection reason), and imports written in one
transaction on SQLite and PostgreSQL: all entries land, or none.
"""

from __future__ import annotations

import json

import pytest

from fakes import CR_VALUES, CURRENT_RATIO, SIMPLE_INTEREST, HashEmbedder
from minicache import portability
from minicache.engine import InvalidRequest
from minicache.portability import EntryExport, load_export, parse_export
from minicache.programs.signature import parse_signature
from minicache.sandbox import SandboxViolation
from minicache.store import (
    Entry,
    Example,
    SQLiteStore,
    StoreError,
    Variable,
    new_id,
    open_store,
    program_hash,
)


def exported(domain=CURRENT_RATIO, values=CR_VALUES[0], entry_id="ent_a", group="label:cr") -> dict:
    """An entry as an export writes it (built from the fake world's parameterized program)."""
    program = domain.program(list(values))
    template = [v.as_dict() for v in parse_signature(program).template]
    return {
        "id": entry_id,
        "tenant": "a",
        "group_id": group,
        "version": 1,
        "status": "active",
        "template": template,
        "program": program,
        "program_hash": program_hash(program),
        "validation": {"extraction": "choice", "passed": 3, "of": 3},
        "rules": {},
        "hits": 4,
        "failures": 0,
        "created_at": 1.7e9,
        "updated_at": 1.7e9,
        "examples": [
            {
                "question": domain.ask(*values),
                "context": None,
                "answer": domain.answer(*values),
                "variables": dict(zip(domain.names, values, strict=True)),
            }
        ],
    }


def two_entries() -> list[dict]:
    return [exported(), exported(SIMPLE_INTEREST, (12000, 5, 3), "ent_b", "label:si")]


# -- valid documents ------------------------------------------------------------------------------


def test_a_valid_export_parses_to_typed_entries():
    entries = parse_export(two_entries())
    assert [e.group_id for e in entries] == ["label:cr", "label:si"]
    assert entries[0].template[0].name == "current_assets" and entries[0].hits == 4
    assert entries[1].examples[0].variables == {"principal": 12000, "rate_pct": 5, "years": 3}


def test_minimal_entries_and_an_empty_document_are_valid():
    full = exported()
    minimal = {k: full[k] for k in ("group_id", "template", "program")}
    assert parse_export([minimal])[0].status == "active"
    assert parse_export([]) == []


def test_the_engine_raises_the_same_invalid_request_the_server_maps_to_400():
    from minicache import errors

    assert InvalidRequest is errors.InvalidRequest


# -- invalid documents: one case per rejection reason ---------------------------------------------


def _with(path: str, value) -> list[dict]:
    """The two-entry document with ``path`` (dotted, into entry 1) set to ``value``."""
    doc = two_entries()
    target = doc[1]
    *parents, last = path.split(".")
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[int(last) if last.isdigit() else last] = value
    return doc


INVALID = {
    # document shape
    "not a list": ({"entries": []}, "expected a JSON list"),
    "entry not an object": (two_entries()[:1] + ["an entry"], "entry 1: not a JSON object"),
    "repeated id": (
        two_entries()[:1] + [exported(SIMPLE_INTEREST, (1, 2, 3), "ent_a", "label:si")],
        "entry 1: id 'ent_a' repeats entry 0's",
    ),
    "repeated group": (
        two_entries()[:1] + [exported(entry_id="ent_c")],
        "entry 1: group_id 'label:cr' repeats",
    ),
    # integers out of range or of the wrong type
    "hits 10**30": (_with("hits", 10**30), "entry 1: hits: "),
    "failures 2**63": (_with("failures", 2**63), "entry 1: failures: "),
    "negative hits": (_with("hits", -1), "entry 1: hits: "),
    "hits a bool": (_with("hits", True), "entry 1: hits: "),
    "hits a float": (_with("hits", 2.0), "entry 1: hits: "),
    "hits a string": (_with("hits", "3"), "entry 1: hits: "),
    "version not a number": (_with("version", "v2"), "entry 1: version: "),
    # NaN / Infinity anywhere
    "NaN in validation": (
        _with("validation.passed", float("nan")),
        "entry 1: validation.passed: nan is not allowed",
    ),
    "Infinity in an answer": (
        _with("examples.0.answer", float("inf")),
        "examples[0].answer: inf is not allowed",
    ),
    "-Infinity in variables": (
        _with("examples.0.variables.years", float("-inf")),
        "variables.years: -inf",
    ),
    "NaN as a template example": (
        _with("template.0.example", float("nan")),
        "template[0].example: nan",
    ),
    # NUL and lone surrogates in any string
    "NUL in group_id": (_with("group_id", "label:s\x00i"), "entry 1: group_id: contains a NUL"),
    "NUL in a question": (
        _with("examples.0.question", "What\x00?"),
        "examples[0].question: contains a NUL",
    ),
    "NUL in the program": (
        _with("program", "def solve(x=1):\n    return x\x00\n"),
        "program: contains a NUL",
    ),
    "NUL in a key": (_with("validation", {"a\x00": 1}), "validation: a key contains a NUL"),
    "surrogate in group_id": (
        _with("group_id", "label:\ud800"),
        "group_id: contains a lone surrogate",
    ),
    "surrogate in a question": (
        _with("examples.0.question", "rate \udfff?"),
        "question: contains a lone surrogate",
    ),
    "surrogate in a description": (
        _with("template.0.description", "\ud83d"),
        "template[0].description: contains",
    ),
    "surrogate in the id": (_with("id", "ent_\ud800"), "entry 1: id: contains a lone surrogate"),
    # wrong types and shapes
    "program not a string": (_with("program", 5), "entry 1: program: "),
    "template not a list": (_with("template", {"name": "x"}), "entry 1: template: "),
    "empty template": (_with("template", []), "entry 1: template: "),
    "rules not an object": (_with("rules", ["a"]), "entry 1: rules: "),
    "context an object": (_with("examples.0.context", {"an": "object"}), "examples[0].context: "),
    "examples not a list": (_with("examples", "none"), "entry 1: examples: "),
    "empty question": (_with("examples.0.question", ""), "examples[0].question: "),
    "blank group_id": (_with("group_id", "   "), "entry 1: group_id: "),
    "missing group_id": (
        [exported(), {k: v for k, v in exported(entry_id="x").items() if k != "group_id"}],
        "entry 1: group_id: Field required",
    ),
    "unknown status": (_with("status", "zombie"), "entry 1: status: "),
    "unknown template field": (_with("template.0.colour", "red"), "template[0].colour: "),
    "unknown template type": (_with("template.0.type", "complex"), "template[0].type: "),
    "unknown entry field": (_with("hit", 3), "entry 1: hit: "),
    "too deep": (
        _with("validation.deep", json.loads("[" * 40 + "]" * 40)),
        "nested deeper than 32",
    ),
    "too many examples": (_with("examples", exported()["examples"] * 101), "entry 1: examples: "),
    # programs: the sandbox gate, the solve() shape, and agreement with the template
    "forbidden import": (
        _with("program", "import os\ndef solve(x=1,  # x\n):\n    return x\n"),
        "program: Value error, refused by the sandbox",
    ),
    "dunder access": (
        _with("program", "def solve(x=1):\n    return x.__class__\n"),
        "refused by the sandbox",
    ),
    "no solve function": (
        _with("program", "def other(x=1):\n    return x\n"),
        "not a parameterized solve()",
    ),
    "parameter without default": (
        _with("program", "def solve(a, b):\n    return a / b\n"),
        "not a parameterized solve()",
    ),
    "program_hash mismatch": (
        _with("program_hash", "0" * 64),
        "entry 1: program_hash does not match",
    ),
    "template names differ": (
        _with("template.0.name", "capital"),
        "are not the program's parameters",
    ),
    "rule for an unknown variable": (
        _with("rules", {"nope": {"kind": "anchor", "words": ["x"]}}),
        "rules.nope: not a template variable",
    ),
    "malformed rule": (
        _with("rules", {"principal": {"kind": "anchor"}}),
        "rules.principal: not a valid",
    ),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_an_invalid_document_is_rejected_naming_the_entry_and_field(case):
    doc, expected = INVALID[case]
    with pytest.raises(InvalidRequest) as err:
        parse_export(doc)
    message = str(err.value)
    assert expected.replace("Value error, ", "") in message, message


def test_every_program_goes_through_the_sandbox_gate(monkeypatch):
    """The model calls minicache.sandbox.check_program itself, so a hardened gate applies to imports."""
    seen: list[str] = []

    def gate(source: str):
        seen.append(source)
        raise SandboxViolation("the hardened gate says no")

    monkeypatch.setattr(portability, "check_program", gate)
    with pytest.raises(
        InvalidRequest, match="entry 0: program: refused by the sandbox: the hardened gate says no"
    ):
        parse_export(two_entries())
    assert seen == [
        e["program"] for e in two_entries()
    ]  # every entry's program, not only the first


def test_the_model_itself_rejects_what_parse_export_rejects():
    """One validator: EntryExport.model_validate is the check; parse_export only words its error."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        EntryExport.model_validate(_with("hits", 10**30))


def test_load_export_reads_files_and_names_them(tmp_path):
    path = tmp_path / "entries.json"
    path.write_text(json.dumps(two_entries()), encoding="utf-8")
    assert len(load_export(path)) == 2
    path.write_text(
        '[{"group_id": NaN}]', encoding="utf-8"
    )  # Python's json accepts NaN: the model must not
    with pytest.raises(InvalidRequest, match="entries.json: entry 0: group_id: nan is not allowed"):
        load_export(path)
    path.write_bytes(b"[\xff]")
    with pytest.raises(InvalidRequest, match="cannot read entries"):
        load_export(path)
    path.write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(InvalidRequest, match="cannot read entries"):
        load_export(path)
    with pytest.raises(InvalidRequest, match="cannot read entries"):
        load_export(tmp_path / "missing.json")


# -- imports: one transaction, on both stores -------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = open_store(str(tmp_path / "mc.db"))
    else:
        pytest.importorskip("psycopg")
        s = open_store(request.getfixturevalue("pg_dsn"))
    yield s
    s.close()


def _entry(group: str, entry_id: str | None = None, tenant: str = "t") -> Entry:
    program = CURRENT_RATIO.program(list(CR_VALUES[0]))
    return Entry(
        id=entry_id or new_id("ent"),
        tenant=tenant,
        group_id=group,
        program=program,
        template=parse_signature(program).template,
    )


def _example(group: str, example_id: str | None = None, tenant: str = "t") -> Example:
    return Example(
        id=example_id or new_id("ex"),
        tenant=tenant,
        group_id=group,
        question="q",
        context=None,
        program="p",
        answer=1.5,
        variables={"x": 1},
    )


def nothing_in(store, tenant: str = "t") -> bool:
    return store.list_entries(tenant) == [] and store.list_groups(tenant) == []


def test_store_import_writes_entries_and_examples_together(store):
    old = store.put_entry(_entry("g1"))
    store.import_entries([_entry("g1"), _entry("g2")], [_example("g1"), _example("g2")])
    active = {e.group_id: e for e in store.list_entries("t", "active")}
    assert set(active) == {"g1", "g2"} and active["g1"].version == 2
    assert store.get_entry("t", old.id).status == "superseded"
    assert len(store.examples("t", "g1")) == 1 and len(store.examples("t", "g2")) == 1
    assert {g.id: g.status for g in store.list_groups("t")} == {"g1": "cached", "g2": "cached"}


def test_store_import_that_fails_half_way_writes_nothing(store):
    """A duplicate id in the second entry fails after the first was written: the transaction rolls it back."""
    with pytest.raises(StoreError, match="rolled back"):
        store.import_entries([_entry("g1", "ent_same"), _entry("g2", "ent_same")], [])
    assert nothing_in(store)
    with pytest.raises(StoreError, match="rolled back"):
        store.import_entries([_entry("g1")], [_example("g1", "ex_same"), _example("g1", "ex_same")])
    assert nothing_in(store)


def test_store_import_rolls_back_on_any_error_not_only_integrity(store, monkeypatch):
    calls = []
    real = store.add_example

    def flaky(example):
        calls.append(example.id)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        real(example)

    monkeypatch.setattr(store, "add_example", flaky)
    with pytest.raises(RuntimeError):
        store.import_entries([_entry("g1")], [_example("g1"), _example("g1")])
    assert nothing_in(store) and len(calls) == 2


def test_importing_a_document_writes_every_entry_with_fresh_ids_and_routable_examples(store):
    embedder = HashEmbedder()
    n = portability.import_entries(store, parse_export(two_entries()), "b", lambda: embedder)
    assert n == 2 and embedder.calls == 2
    imported = {e.group_id: e for e in store.list_entries("b", "active")}
    assert set(imported) == {"label:cr", "label:si"}
    assert (
        imported["label:cr"].id != "ent_a"
        and imported["label:cr"].validation["imported_from"] == "ent_a"
    )
    assert (
        imported["label:cr"].hits == 4
        and imported["label:cr"].program == two_entries()[0]["program"]
    )
    ids, matrix = store.routing_index("b")
    assert sorted(ids) == ["label:cr", "label:si"] and matrix.shape == (2, 256)


def test_importing_the_same_document_twice_supersedes_instead_of_colliding(store):
    """The documented behaviour for ids the store already holds: none can collide (fresh ids), and
    the second import of a group adds a version that supersedes the first."""
    doc = parse_export(two_entries())
    portability.import_entries(store, doc, "b", None)
    portability.import_entries(store, doc, "b", None)
    rows = [e for e in store.list_entries("b") if e.group_id == "label:cr"]
    assert sorted((e.version, e.status) for e in rows) == [(1, "superseded"), (2, "active")]
    assert len({e.id for e in store.list_entries("b")}) == 4


def test_import_without_an_embedder_stores_unembedded_examples(store):
    portability.import_entries(store, parse_export(two_entries()), "b", None)
    assert len(store.examples("b", "label:cr")) == 1
    assert store.routing_index("b")[0] == []


def test_an_export_round_trips_through_the_model(store):
    """What export_entries writes (with every field the store's entries carry) is a valid document."""
    portability.import_entries(store, parse_export(two_entries()), "a", HashEmbedder)
    data = portability.export_entries(store, "a", examples=3)
    assert len(data) == 2 and all(len(d["examples"]) == 1 for d in data)
    again = parse_export(json.loads(json.dumps(data)))
    assert [e.program for e in again] == [e["program"] for e in two_entries()]
    assert portability.export_entries(store, "a", examples=0)[0]["examples"] == []


@pytest.mark.parametrize("tenant", ["", "  ", "t\x00", "\ud800", "x" * 201, None])
def test_import_refuses_an_unusable_tenant_and_writes_nothing(store, tenant):
    with pytest.raises(InvalidRequest, match="tenant"):
        portability.import_entries(store, parse_export(two_entries()), tenant, None)  # type: ignore[arg-type]
    assert store.list_entries("t") == []


def test_open_store_create_false_never_creates(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        open_store(str(tmp_path / "no" / "such.db"), create=False)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(StoreError, match="not a MiniCache store"):
        open_store(str(empty), create=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"] and empty.read_bytes() == b""
    SQLiteStore(tmp_path / "real.db").close()
    open_store(str(tmp_path / "real.db"), create=False).close()


@pytest.mark.parametrize("spec", ["mysql://u@h/db", "postgresq://u@h/db", "host=h dbname=d", " "])
def test_open_store_refuses_specs_it_does_not_know(tmp_path, monkeypatch, spec):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError):
        open_store(spec)
    assert list(tmp_path.iterdir()) == []


def test_variables_of_the_export_model_match_the_store_dataclass():
    """ExportedVariable must carry every Variable field, or an import would drop one."""
    from dataclasses import fields

    assert {f.name for f in fields(Variable)} == set(portability.ExportedVariable.model_fields)


def test_an_engine_routes_to_imported_examples_at_once(tmp_path, sandbox):
    """The tenant's in-memory routing index was loaded before the import: the imported examples
    reach it at once, not at its next refresh from the store (an hour away here)."""
    from fakes import FakeSmall, FakeTarget
    from minicache.engine import EngineConfig, MiniCache

    target = FakeTarget()
    mc = MiniCache(
        target,
        FakeSmall(),
        store=str(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        # no sampled audit: one would answer the hit again with the target (5% of runs failed)
        config=EngineConfig(background_builds=False, route_refresh_s=3600.0, audit_rate=0.0),
    )
    try:
        assert (
            mc.solve(SIMPLE_INTEREST.ask(*(8000, 4, 2)), tenant="b").route == "miss"
        )  # loads b's index
        assert mc.import_entries(two_entries()[:1], tenant="b") == 1
        result = mc.solve(CURRENT_RATIO.ask(*CR_VALUES[3]), tenant="b")
        assert result.route == "hit" and result.group == "label:cr"
        assert result.answer == pytest.approx(CURRENT_RATIO.answer(*CR_VALUES[3]))
        assert target.miss_calls == 1
    finally:
        mc.close()
