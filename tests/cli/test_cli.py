"""The ``minicache`` command line, every command, through click's CliRunner, on SQLite and PostgreSQL.

Commands that run models get fakes through the CLI's one seam, :class:`minicache.cli.main.Runtime`
(passed as the runner's ``obj``): the fake world of tests/fakes.py and a hash embedder. Commands
whose work needs the real embedded models (bench-spec, serve, models' downloads) are tested for
their arguments, help and error paths; the real-model guard keeps them off real models here.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SIMPLE_INTEREST,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
    numbers_in,
    request_of,
)
from minicache.cli.main import Runtime, main
from minicache.models import FakeBackend
from minicache.portability import parse_export
from minicache.programs.signature import parse_signature
from minicache.store import open_store, program_hash

COMMANDS = {
    "models",
    "config",
    "demo",
    "bench-spec",
    "solve",
    "run",
    "stats",
    "entries",
    "bench",
    "serve",
}
ENTRY_COMMANDS = {"list", "show", "delete", "export", "import"}
READ_ONLY = [
    ["stats"],
    ["entries", "list"],
    ["entries", "show", "ent_x"],
    ["entries", "export", "out.json"],
    ["entries", "delete", "ent_x"],
]


def fakes(target=None, small=None) -> Runtime:
    embedder = HashEmbedder()
    return Runtime(
        backends=lambda: (target or FakeTarget(), small or FakeSmall()), embedder=lambda: embedder
    )


def cli(*args: str, obj: Runtime | None = None, env: dict | None = None, stdin: str | None = None):
    return CliRunner().invoke(
        main,
        list(args),
        obj=obj if obj is not None else fakes(),
        env=env,
        input=stdin,
        catch_exceptions=False,
    )


def one_error_line(result, *fragments: str) -> None:
    """Exit 1 with exactly one ``error: ...`` line on stderr naming every fragment."""
    assert result.exit_code == 1, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def export_doc(entry_id: str = "ent_file") -> list[dict]:
    """An export of one current-ratio entry with one example request."""
    program = CURRENT_RATIO.program(list(CR_VALUES[0]))
    return [
        {
            "id": entry_id,
            "group_id": "label:cr",
            "program": program,
            "program_hash": program_hash(program),
            "template": [v.as_dict() for v in parse_signature(program).template],
            "hits": 2,
            "examples": [
                {
                    "question": CURRENT_RATIO.ask(*CR_VALUES[0]),
                    "context": None,
                    "answer": CURRENT_RATIO.answer(*CR_VALUES[0]),
                    "variables": dict(zip(CURRENT_RATIO.names, CR_VALUES[0], strict=True)),
                }
            ],
        }
    ]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def spec(request, tmp_path, monkeypatch) -> str:
    """A store spec for --store: a SQLite path, or a PostgreSQL URL to a fresh database. The test
    runs in an empty working directory, so anything a command creates by mistake is visible."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    if request.param == "sqlite":
        return str(tmp_path / "store" / "mc.db")
    pytest.importorskip("psycopg")
    return request.getfixturevalue("pg_dsn")


def seeded(spec: str, tenant: str = "default") -> str:
    """Import one entry into ``spec`` through the CLI; returns the entry id."""
    path = Path("seed.json")
    path.write_text(json.dumps(export_doc()), encoding="utf-8")
    result = cli("entries", "import", str(path), "--store", spec, "--tenant", tenant)
    assert result.exit_code == 0, result.stderr
    path.unlink()
    s = open_store(spec, create=False)
    try:
        (entry,) = s.list_entries(tenant, "active")
    finally:
        s.close()
    return entry.id


# -- every command has help; the list of commands is the one tested here ---------------------------


def test_the_commands_tested_here_are_all_the_commands():
    assert set(main.commands) == COMMANDS
    assert set(main.commands["entries"].commands) == ENTRY_COMMANDS


@pytest.mark.parametrize(
    "path",
    [[], *([c] for c in sorted(COMMANDS)), *(["entries", c] for c in sorted(ENTRY_COMMANDS))],
)
def test_every_command_has_help(path):
    result = cli(*path, "--help")
    assert result.exit_code == 0 and "Usage: " in result.stdout


def test_version():
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.startswith("minicache, version ")


# -- config, models, demo, bench-spec, serve, bench ------------------------------------------------


def test_config_shows_settings_with_the_api_key_masked(tmp_path):
    env = {
        "MINICACHE_CONFIG": empty_config(tmp_path),
        "MINICACHE_TARGET_URL": "http://gpu:8000/v1",
        "MINICACHE_TARGET_MODEL": "qwen",
        "MINICACHE_TARGET_API_KEY": "sk-secret",
    }
    result = cli("config", env=env)
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["target"]["backend"] == "openai" and data["target"]["api_key"] == "***"
    assert "sk-secret" not in result.stdout and data["small"]["backend"] == "embedded"


def test_config_error_is_one_line(tmp_path):
    result = cli(
        "config",
        env={"MINICACHE_CONFIG": empty_config(tmp_path), "MINICACHE_SPECULATIVE": "warp"},
    )
    one_error_line(result, "speculative must be one of")


def test_models_reports_missing_models_without_fetching(tmp_path):
    result = cli(
        "models", "--no-fetch", "--json", env={"MINICACHE_MODELS_DIR": str(tmp_path / "models")}
    )
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["models_dir"] == str(tmp_path / "models")
    assert not data["models"]["target"]["verified"] and not data["models"]["embedder"]["verified"]
    assert not list(tmp_path.rglob("*.gguf"))  # --no-fetch fetched nothing


def test_demo_runs_the_targets_program_and_the_small_models_extraction():
    def target(messages, options):
        a, b = numbers_in(request_of(messages))[:2]
        return f"```python\ndef solve():\n    return {a} / {b}\n```"

    def small(messages, options):
        return {"numbers": numbers_in(messages[1].content), "quantity_asked": "ratio"}

    result = cli("demo", obj=Runtime(backends=lambda: (FakeBackend(target), FakeBackend(small))))
    assert result.exit_code == 0, result.stderr
    answers = re.findall(r"target program -> (\S+)", result.stdout)
    assert [float(a) for a in answers] == pytest.approx([45000 / 30000, 12000 / 5, 128500 / 51400])
    assert result.stdout.count('small extraction -> {"numbers": [') == 3


def test_bench_spec_needs_the_embedded_models_and_says_so():
    result = cli(
        "bench-spec", "-n", "1"
    )  # the test suite's guard blocks real models: a clear error
    one_error_line(result, "embedded")


def test_serve_checks_its_arguments():
    result = cli("serve", "--port", "0")
    assert result.exit_code == 2 and "--port" in result.stderr
    result = cli("serve", "--config", "/nonexistent/server.toml")
    assert result.exit_code == 2 and "--config" in result.stderr


def empty_config(folder) -> str:
    """A models config file with nothing in it: the defaults, whatever ~/.config holds."""
    path = folder / "empty.toml"
    path.write_text("", encoding="utf-8")
    return str(path)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """``serve`` on fakes: MiniCache.local builds the engine on the fake models with the config it is
    given, and uvicorn's run records the app it would serve instead of listening."""
    import uvicorn

    from minicache.engine import MiniCache

    apps: list = []

    def local(store, **kwargs):
        return MiniCache(
            FakeTarget(),
            FakeSmall(),
            str(tmp_path / "served.db"),
            embedder=HashEmbedder(),
            **kwargs,
        )

    monkeypatch.setattr(MiniCache, "local", local)
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: apps.append(self.config.app)
    )
    monkeypatch.setenv("MINICACHE_CONFIG", empty_config(tmp_path))
    for name in [n for n in os.environ if n.startswith(("MINICACHE_ENGINE_", "MINICACHE_SERVER_"))]:
        monkeypatch.delenv(name)
    return apps


def test_serve_passes_engine_options_from_its_file_env_and_flags_to_the_served_engine(
    served, tmp_path
):
    path = tmp_path / "server.toml"
    path.write_text(
        "[engine]\nbuild_after = 5\naudit_rate = 0.2\nmiss_max_tokens = 100\n[engine.verify]\n"
        "min_margin = 2.5\n",
        encoding="utf-8",
    )
    result = cli(
        "serve",
        "--config",
        str(path),
        "--engine-option",
        "miss_max_tokens=300",
        "--engine-option",
        "step.candidates=7",
        env={"MINICACHE_ENGINE_AUDIT_RATE": "0.4", "MINICACHE_ENGINE_MISS_MAX_TOKENS": "200"},
    )
    assert result.exit_code == 0, result.stderr
    (app,) = served
    config = app.state.engine.config
    assert (config.build_after, config.verify.min_margin) == (5, 2.5)  # from the file
    assert config.audit_rate == 0.4  # the environment over the file
    assert (config.miss_max_tokens, config.step.candidates) == (300, 7)  # the flags over both


def test_serve_refuses_a_bad_engine_option_before_the_models_load(served, monkeypatch):
    from minicache.engine import MiniCache

    monkeypatch.setattr(MiniCache, "local", lambda *a, **k: pytest.fail("the models were loaded"))
    result = cli("serve", "--engine-option", "build_afterr=5")
    one_error_line(
        result, "unknown key 'engine.build_afterr'"
    )  # the same one line as every command's
    result = cli("serve", env={"MINICACHE_ENGINE_FROZEN": "perhaps"})
    one_error_line(
        result, "MINICACHE_ENGINE_FROZEN: engine.frozen: Input should be a valid boolean"
    )
    assert served == []


def test_serve_reports_config_errors_before_the_models_load(served, monkeypatch, tmp_path):
    from minicache.engine import MiniCache

    monkeypatch.setattr(MiniCache, "local", lambda *a, **k: pytest.fail("the models were loaded"))
    result = cli("serve", env={"MINICACHE_CONFIG": str(tmp_path / "typo.toml")})
    one_error_line(result, "$MINICACHE_CONFIG names")
    assert "typo.toml, which does not exist" in result.stderr
    for url in ("htp://gpu-box:8000/v1", "gpu-box:8000/v1", "http://:8000/v1", "http://h:99999/v1"):
        result = cli("serve", env={"MINICACHE_TARGET_URL": url, "MINICACHE_TARGET_MODEL": "m"})
        one_error_line(result, "[target] base_url")
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = cli("serve", "--store", str(missing))
    one_error_line(result, "in a folder that does not exist")
    assert not (tmp_path / "no").exists()  # never created
    assert served == []


def test_serve_prints_one_banner_line_with_urls_auth_store_and_target(served, tmp_path):
    store = tmp_path / "cache.db"
    result = cli("serve", "--port", "8123", "--store", str(store))
    assert result.exit_code == 0, result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("minicache serving on")]
    assert (
        "http://127.0.0.1:8123/v1" in line and "dashboard http://127.0.0.1:8123/dashboard" in line
    )
    assert "auth off" in line and f"store {store}" in line and "target embedded" in line


def test_embedded_models_without_llama_cpp_name_the_extra(monkeypatch):
    import importlib.util

    from minicache.config import models
    from minicache.errors import ConfigError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with pytest.raises(ConfigError, match=r"minicache-llm\[embedded\]"):
        models.build_backends(models.Settings())


def test_config_shows_the_engine_and_with_config_the_server_without_its_keys(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text(
        'admin_keys = ["sk-admin-secret-1"]\n[api_keys]\n"sk-tenant-secret-1" = "team"\n'
        "[limits]\nburst = 7\n[engine]\nbuild_after = 6\n",
        encoding="utf-8",
    )
    env = {"MINICACHE_CONFIG": empty_config(tmp_path), "MINICACHE_ENGINE_AUDIT_RATE": "0.5"}
    result = cli("config", "--config", str(path), "--engine-option", "frozen=true", env=env)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (
        data["engine"]["build_after"],
        data["engine"]["audit_rate"],
        data["engine"]["frozen"],
    ) == (6, 0.5, True)
    assert data["server"]["burst"] == 7 and data["server"]["api_keys"] == ["*** -> team"]
    assert "secret" not in result.stdout
    assert "server" not in json.loads(cli("config", env=env).stdout)


def test_config_names_an_unknown_key_in_the_server_file(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text("[limits]\nbodytimeout = 3\n", encoding="utf-8")
    result = cli("config", "--config", str(path), env={"MINICACHE_CONFIG": empty_config(tmp_path)})
    one_error_line(result, str(path), "unknown key 'limits.bodytimeout'", "body_timeout_s")


def test_solve_and_run_read_engine_options(spec):
    """An option that refuses every request shows that the option reached the engine."""
    result = cli(
        "solve",
        CURRENT_RATIO.ask(*CR_VALUES[0]),
        "--store",
        spec,
        "--engine-option",
        "max_question_chars=10",
    )
    one_error_line(result, "question")
    result = cli(
        "run",
        "--groups",
        "1",
        "--per-group",
        "2",
        "--store",
        spec,
        env={"MINICACHE_ENGINE_MAX_QUESTION_CHARS": "10"},
    )
    one_error_line(result, "the limit is 10")


def test_bench_checks_its_arguments(tmp_path):
    result = cli(
        "bench", "--dataset", "formula", "--methods", "pot,warp", "--out", str(tmp_path / "b")
    )
    assert result.exit_code == 2 and "unknown method(s) warp" in result.stderr
    result = cli("bench", "--dataset", "formula", "--subset", "pot:3", "--out", str(tmp_path / "b"))
    assert result.exit_code == 2 and "expected METHOD=N" in result.stderr
    result = cli(
        "bench", "--dataset", "formula", "--concurrency", "1,x", "--out", str(tmp_path / "b")
    )
    assert result.exit_code == 2 and "comma-separated integers" in result.stderr


def test_bench_runs_a_stream_on_the_runtimes_models(tmp_path):
    dataset = tmp_path / "cr.jsonl"
    rows = [
        {
            "id": f"cr{i}",
            "question": CURRENT_RATIO.ask(*v),
            "answer": CURRENT_RATIO.answer(*v),
            "group": "cr",
        }
        for i, v in enumerate(CR_VALUES[:5])
    ]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "bench"
    result = cli(
        "bench", "--dataset", str(dataset), "--methods", "pot,minicache", "--out", str(out)
    )
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert {(r["method"], r["correct"]) for r in lines} == {("pot", True), ("minicache", True)}
    assert len(lines) == 10 and (out / "report.md").read_text() in result.stdout


def test_bench_inline_builds_give_hits_at_fixed_places(tmp_path):
    """--inline-builds builds on the request that triggers the build, so the routes of a stream are the
    same on every run (the before/after comparisons of a refactor need that)."""
    dataset = tmp_path / "cr.jsonl"
    rows = [
        {
            "id": f"cr{i}",
            "question": CURRENT_RATIO.ask(*v),
            "answer": CURRENT_RATIO.answer(*v),
            "group": "cr",
        }
        for i, v in enumerate(CR_VALUES[:5])
    ]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "bench"
    result = cli(
        "bench",
        "--dataset",
        str(dataset),
        "--methods",
        "minicache",
        "--inline-builds",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    # the second miss builds early (its program and the first's back each other); the 3rd request is
    # the new entry's probation (answered by the miss path and compared), then hits
    assert [r["route"] for r in lines] == ["miss", "miss", "miss", "hit", "hit"]
    assert [r["detail"]["route"] for r in lines] == ["miss", "miss", "fallback", "hit", "hit"]
    assert json.loads((out / "results.json").read_text())["config"]["background_builds"] is False


# -- solve, run and stats on both stores ------------------------------------------------------------


def test_solve_misses_builds_and_hits_on_the_store(spec):
    routes = []
    for values in CR_VALUES[:4]:
        result = cli("solve", CURRENT_RATIO.ask(*values), "--group", "cr", "--store", spec)
        assert result.exit_code == 0, result.stderr
        assert float(result.stdout) == pytest.approx(CURRENT_RATIO.answer(*values))
        routes.append(re.search(r"^\[(\w+)\]", result.stderr, re.M).group(1))
    # built early on the second miss; the third is the new entry's probation: a miss, compared
    assert routes == ["miss", "miss", "fallback", "hit"]
    result = cli(
        "solve", CURRENT_RATIO.ask(*CR_VALUES[4]), "--group", "cr", "--json", "--store", spec
    )
    data = json.loads(result.stdout)
    assert data["route"] == "hit" and data["answer"] == pytest.approx(
        CURRENT_RATIO.answer(*CR_VALUES[4])
    )
    stats = json.loads(cli("stats", "--store", spec).stdout)
    assert (stats["requests"], stats["hits"], stats["misses"], stats["fallbacks"]) == (5, 2, 2, 1)
    assert (stats["entries_active"], stats["probations"], stats["probations_failed"]) == (1, 1, 0)
    assert stats["hit_rate"] == pytest.approx(0.4)
    assert list(Path.cwd().iterdir()) == []


def test_solve_reads_context_and_keeps_tenants_apart(spec, tmp_path):
    context = tmp_path / "ctx.txt"
    context.write_text("Figures are in dollars.", encoding="utf-8")
    result = cli(
        "solve",
        CURRENT_RATIO.ask(*CR_VALUES[0]),
        "--context",
        str(context),
        "--tenant",
        "a",
        "--store",
        spec,
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(cli("stats", "--store", spec, "--tenant", "a").stdout)["requests"] == 1
    empty = cli("stats", "--store", spec, "--tenant", "b")
    assert json.loads(empty.stdout)["requests"] == 0
    # All zeros comes with a hint that the requests may be counted under other tenants.
    assert empty.exit_code == 0
    assert "note: tenant 'b' has no requests or groups in this store; tenants with data: a " in (
        empty.stderr
    )
    assert "(use --tenant NAME)" in empty.stderr
    assert "note:" not in cli("stats", "--store", spec, "--tenant", "a").stderr
    context.write_bytes(b"\xff\xfe")
    result = cli("solve", "q?", "--context", str(context), "--store", spec)
    assert result.exit_code == 2 and "not UTF-8" in result.stderr


def test_solve_no_store_records_nothing(spec):
    assert cli("solve", CURRENT_RATIO.ask(*CR_VALUES[0]), "--store", spec).exit_code == 0
    before = cli("stats", "--store", spec).stdout
    assert (
        cli("solve", CURRENT_RATIO.ask(*CR_VALUES[1]), "--no-store", "--store", spec).exit_code == 0
    )
    assert cli("stats", "--store", spec).stdout == before


def test_solve_invalid_question_is_one_error_line(spec):
    one_error_line(cli("solve", "   ", "--store", spec), "question is empty")


def test_run_streams_formula_requests_into_the_given_store(spec, tmp_path):
    """The main job's plumbing on fakes: a target that answers every request with one constant
    program (its answers are wrong; routes, summary and the store are what is checked here)."""
    target = FakeBackend(lambda messages, options: "```python\ndef solve():\n    return 1.0\n```")
    out = tmp_path / "run.json"
    result = cli(
        "run",
        "--groups",
        "2",
        "--per-group",
        "2",
        "--store",
        spec,
        "--json",
        str(out),
        obj=Runtime(backends=lambda: (target, FakeSmall()), embedder=HashEmbedder),
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("requests 4: ")
    summary = json.loads(out.read_text())
    assert summary["requests"] == 4 and len(summary["rows"]) == 4
    assert json.loads(cli("stats", "--store", spec).stdout)["requests"] == 4


def test_run_without_a_store_uses_a_temporary_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = FakeBackend(lambda messages, options: "```python\ndef solve():\n    return 1.0\n```")
    result = cli(
        "run",
        "--groups",
        "1",
        "--per-group",
        "1",
        obj=Runtime(backends=lambda: (target, FakeSmall()), embedder=HashEmbedder),
    )
    assert result.exit_code == 0 and result.stdout.startswith("requests 1: ")
    assert list(tmp_path.iterdir()) == []


# -- entries: list, show, delete, export, import on both stores ------------------------------------


def test_entries_list_show_delete(spec):
    entry_id = seeded(spec)
    listed = cli("entries", "list", "--store", spec)
    assert listed.exit_code == 0
    assert re.match(
        rf"{entry_id}  active +v1  label:cr  hits 2 failures 0  \(current_assets, current_liabilities\)",
        listed.stdout,
    )
    shown = json.loads(cli("entries", "show", entry_id, "--store", spec).stdout)
    assert shown["id"] == entry_id and shown["validation"]["imported_from"] == "ent_file"
    assert cli("entries", "list", "--store", spec, "--tenant", "other").stdout == ""
    missing = cli("entries", "show", "ent_nope", "--store", spec)
    assert missing.exit_code == 1 and missing.stderr.startswith("error: no entry ent_nope")
    assert "Error:" not in missing.stderr
    deleted = cli("entries", "delete", entry_id, "--store", spec)
    assert deleted.exit_code == 0 and deleted.stdout.strip() == f"deleted {entry_id}"
    assert cli("entries", "list", "--store", spec).stdout == ""
    assert cli("entries", "delete", entry_id, "--store", spec).exit_code == 1


def test_entries_list_all_includes_superseded(spec):
    seeded(spec)
    seeded(spec)  # a second import of the group supersedes the first
    assert len(cli("entries", "list", "--store", spec).stdout.splitlines()) == 1
    lines = cli("entries", "list", "--all", "--store", spec).stdout.splitlines()
    assert sorted(line.split()[1] for line in lines) == ["active", "superseded"]


def test_stats_of_an_empty_store_says_no_tenant_has_data(spec):
    from minicache.store import open_store

    open_store(spec).close()
    result = cli("stats", "--store", spec)
    assert result.exit_code == 0 and json.loads(result.stdout)["requests"] == 0
    assert result.stderr.strip() == (
        "note: tenant 'default' has no requests or groups in this store; nor has any other tenant"
    )


def test_entries_export_then_import_into_another_tenant_serves_hits(spec):
    for values in CR_VALUES[:2]:  # two misses whose programs back each other: an early build
        assert (
            cli("solve", CURRENT_RATIO.ask(*values), "--tenant", "a", "--store", spec).exit_code
            == 0
        )
    exported = cli("entries", "export", "out.json", "--tenant", "a", "--store", spec)
    assert exported.exit_code == 0 and exported.stdout.strip() == "exported 1 entries to out.json"
    doc = json.loads(Path("out.json").read_text())
    assert len(doc) == 1 and len(doc[0]["examples"]) == 2 and parse_export(doc)
    imported = cli("entries", "import", "out.json", "--tenant", "b", "--store", spec)
    assert imported.exit_code == 0 and imported.stdout.strip() == "imported 1 entries into tenant b"
    # an unlabelled request in tenant b routes to the imported group by its examples; the entry, built
    # on probation and not yet compared, proves itself on its first request there, then hits
    routes = [
        json.loads(
            cli(
                "solve", CURRENT_RATIO.ask(*values), "--tenant", "b", "--json", "--store", spec
            ).stdout
        )["route"]
        for values in CR_VALUES[5:7]
    ]
    assert routes == ["fallback", "hit"]
    assert (
        cli(
            "entries", "export", "none.json", "--examples", "0", "--tenant", "a", "--store", spec
        ).exit_code
        == 0
    )
    assert json.loads(Path("none.json").read_text())[0]["examples"] == []


@pytest.mark.parametrize(
    "case",
    [
        "repeated id",
        "NaN",
        "hits 10**30",
        "NUL in group",
        "surrogate in question",
        "sandbox",
        "not a list",
    ],
)
def test_entries_import_of_an_invalid_file_writes_nothing(spec, case):
    good = export_doc()[0]
    second = dict(export_doc()[0], group_id="label:other")
    docs = {
        "repeated id": json.dumps([good, second]),
        "NaN": json.dumps([good, dict(second, hits=float("nan"))]),
        "hits 10**30": json.dumps([good, dict(second, hits=10**30)]),
        "NUL in group": json.dumps([good, dict(second, id="x", group_id="g\x00")]),
        "surrogate in question": json.dumps(
            [good, dict(second, id="x", examples=[dict(good["examples"][0], question="\ud800?")])]
        ),
        "sandbox": json.dumps(
            [
                good,
                dict(
                    second,
                    id="x",
                    program_hash=None,
                    program="import os\ndef solve(x=1):\n    return x\n",
                ),
            ]
        ),
        "not a list": json.dumps({"entries": [good]}),
    }
    Path("bad.json").write_text(docs[case], encoding="utf-8")
    result = cli("entries", "import", "bad.json", "--store", spec)
    one_error_line(result, "bad.json: ")
    if case != "not a list":
        assert "entry 1: " in result.stderr
    assert (
        not Path(spec).exists() if not spec.startswith("postgresql") else True
    )  # not even a store file
    s = open_store(spec)
    try:
        assert s.list_entries("default") == [] and s.list_groups("default") == []
    finally:
        s.close()


def test_entries_import_of_unreadable_files(spec):
    Path("bad.json").write_bytes(b"[\xff")
    one_error_line(
        cli("entries", "import", "bad.json", "--store", spec), "cannot read entries from bad.json"
    )
    assert cli("entries", "import", "missing.json", "--store", spec).exit_code == 2


def test_entries_export_to_an_unwritable_path_is_an_error(spec):
    seeded(spec)
    result = cli("entries", "export", "no/such/dir/out.json", "--store", spec)
    assert result.exit_code == 1 and "no/such/dir/out.json" in result.stderr


def test_entries_import_with_examples_needs_the_embedder_only_then(spec):
    def no_embedder():
        raise AssertionError("the embedder was loaded for a file without examples")

    Path("plain.json").write_text(
        json.dumps([dict(export_doc()[0], examples=[])]), encoding="utf-8"
    )
    result = cli(
        "entries", "import", "plain.json", "--store", spec, obj=Runtime(embedder=no_embedder)
    )
    assert result.exit_code == 0, result.stderr


# -- read-only commands never create; --store means the same store everywhere -----------------------


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
@pytest.mark.parametrize("store", ["typo.db", "nonexistent/dir/x.db"])
def test_read_only_commands_refuse_a_missing_sqlite_store_and_create_nothing(
    tmp_path, monkeypatch, command, store
):
    monkeypatch.chdir(tmp_path)
    result = cli(*command, "--store", store)
    one_error_line(result, "no MiniCache store at", "does not exist")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_read_only_commands_refuse_a_file_that_is_not_a_store(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    Path("notes.db").write_bytes(b"")
    one_error_line(cli(*command, "--store", "notes.db"), "not a MiniCache store")
    assert (
        sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]
        and Path("notes.db").read_bytes() == b""
    )


@pytest.mark.postgres
@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_read_only_commands_refuse_a_database_without_minicache_schema(
    pg_dsn, tmp_path, monkeypatch, command
):
    psycopg = pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    one_error_line(cli(*command, "--store", pg_dsn), "holds no MiniCache store")
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema='public'"
        ).fetchone()
    assert tables[0] == 0 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    READ_ONLY
    + [
        ["entries", "import", "in.json"],
        ["solve", "What is 1 + 1?"],
        ["run", "--groups", "1", "--per-group", "1"],
    ],
    ids=" ".join,
)
def test_an_unreachable_postgresql_url_is_a_clear_error_never_a_local_file(
    tmp_path, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)
    Path("in.json").write_text(json.dumps(export_doc()), encoding="utf-8")
    url = f"postgresql://user:s3cret@127.0.0.1:{closed_port()}/db"
    result = cli(*command, "--store", url)
    one_error_line(result, "cannot connect to the PostgreSQL store", "postgresql://user@127.0.0.1")
    assert "s3cret" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


def test_store_comes_from_the_environment_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_error_line(cli("stats", env={"MINICACHE_STORE": "from-env.db"}), "from-env.db")
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_store_fails_before_models_load(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def never():
        raise AssertionError("models were loaded before the store was opened")

    result = cli(
        "solve", "q?", "--store", "mysql://u@h/db", obj=Runtime(backends=never, embedder=never)
    )
    one_error_line(result, "not a store this MiniCache knows")


@pytest.mark.postgres
def test_postgresql_store_is_shared_by_solve_stats_and_entries(pg_dsn, tmp_path, monkeypatch):
    """The CLI reaches PostgreSQL: what solve writes there, stats and entries read back, and no
    local file appears."""
    monkeypatch.chdir(tmp_path)
    for values in CR_VALUES[:3]:
        assert (
            cli("solve", CURRENT_RATIO.ask(*values), "--group", "cr", "--store", pg_dsn).exit_code
            == 0
        )
    assert cli("solve", SIMPLE_INTEREST.ask(*(12000, 5, 3)), "--store", pg_dsn).exit_code == 0
    stats = json.loads(cli("stats", "--store", pg_dsn).stdout)
    assert (stats["requests"], stats["groups"], stats["entries_active"]) == (4, 2, 1)
    assert "label:cr" in cli("entries", "list", "--store", pg_dsn).stdout
    assert list(tmp_path.iterdir()) == []
