"""``minicache bench --engine-option KEY=VALUE``: the minicache method's engine gets the options over
the benchmark's own settings, results.json and the report name them, a bad one is refused before any
model loads, and a folder is resumed only with the options its rows were recorded with."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from minicache.cli.main import Runtime, main
from minicache.config.engine import AdmissionConfig
from minicache.errors import ConfigError
from minicache.sandbox import SandboxPool
from minicache_bench.engine_options import refuse_other_options
from minicache_bench.methods import build_method
from tests.fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path, monkeypatch):
    """No config file and no MINICACHE_ENGINE_* or audit rate from the machine running the tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    for name in ("MINICACHE_CONFIG", "MINICACHE_AUDIT_RATE", "MINICACHE_ENGINE_MERGE_GROUPS"):
        monkeypatch.delenv(name, raising=False)


def _stream(tmp_path):
    path = tmp_path / "stream.jsonl"
    lines = [
        {"id": f"cr{i}", "question": CURRENT_RATIO.ask(*v), "answer": CURRENT_RATIO.answer(*v)}
        for i, v in enumerate(CR_VALUES[:3])
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    return path


def _models(loaded: list[str]) -> Runtime:
    def backends():
        loaded.append("models")
        return FakeTarget(), FakeSmall()

    return Runtime(backends=backends, embedder=HashEmbedder)


def _bench(tmp_path, loaded, *options):
    args = ["bench", "--dataset", str(_stream(tmp_path)), "--methods", "minicache"]
    args += ["--inline-builds", "--out", str(tmp_path / "run")]
    for option in options:
        args += ["--engine-option", option]
    return CliRunner().invoke(main, args, obj=_models(loaded))


def test_an_engine_option_reaches_the_minicache_engine_and_keeps_the_benchmarks_other_settings(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("MINICACHE_AUDIT_RATE", "0.25")
    options = ["merge_groups=true", "admission.backoff_s=5"]
    with SandboxPool(size=1) as sandbox:
        method = build_method(
            "minicache",
            FakeTarget(),
            FakeSmall(),
            sandbox,
            HashEmbedder(),
            str(tmp_path / "minicache.db"),
            background_builds=False,
            admission=AdmissionConfig(warmup_requests=1000),
            engine_options=options,
        )
        config = method.engine.config  # type: ignore[attr-defined]
        method.engine.close()  # type: ignore[attr-defined]
    assert config.merge_groups is True and config.admission.backoff_s == 5.0
    # What the options do not name stays the benchmark's: inline builds, the audit rate from the
    # environment, and the rest of the admission it was given.
    assert config.background_builds is False and config.audit_rate == 0.25
    assert config.admission.warmup_requests == 1000


def test_an_engine_option_overrides_the_benchmarks_own_setting_when_it_names_it(tmp_path):
    with SandboxPool(size=1) as sandbox:
        method = build_method(
            "minicache",
            FakeTarget(),
            FakeSmall(),
            sandbox,
            HashEmbedder(),
            str(tmp_path / "minicache.db"),
            background_builds=True,
            engine_options=["background_builds=false", "audit_rate=0.5"],
        )
        config = method.engine.config  # type: ignore[attr-defined]
        method.engine.close()  # type: ignore[attr-defined]
    assert config.background_builds is False and config.audit_rate == 0.5


def test_bench_records_its_engine_options_in_results_and_the_reports_title(tmp_path):
    loaded: list[str] = []
    result = _bench(tmp_path, loaded, "merge_groups=true", "verify.min_margin=1.5")
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "run" / "results.json").read_text())["config"]
    assert config["engine_options"] == {"merge_groups": True, "verify.min_margin": 1.5}
    title = (tmp_path / "run" / "report.md").read_text().splitlines()[0]
    assert title.endswith("; minicache engine options: merge_groups=true, verify.min_margin=1.5")


def test_a_run_without_engine_options_records_none_and_keeps_its_title(tmp_path):
    result = _bench(tmp_path, [])
    assert result.exit_code == 0, result.stderr
    config = json.loads((tmp_path / "run" / "results.json").read_text())["config"]
    assert config["engine_options"] == {}
    assert "engine options" not in (tmp_path / "run" / "report.md").read_text().splitlines()[0]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            "merge_group=true",
            "error: --engine-option merge_group=true: unknown key 'engine.merge_group'",
        ),
        ("merge_groups", "error: --engine-option 'merge_groups': expected KEY=VALUE"),
        (
            "build_agreement=2",
            "error: engine option build_agreement is a share and must be between",
        ),
    ],
)
def test_a_bad_engine_option_is_one_error_line_before_any_model_loads(tmp_path, option, message):
    loaded: list[str] = []
    result = _bench(tmp_path, loaded, option)
    assert result.exit_code == 1
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert loaded == [] and not (tmp_path / "run").exists()


def test_a_resume_with_other_engine_options_is_refused_before_any_model_loads(tmp_path):
    assert _bench(tmp_path, [], "merge_groups=true").exit_code == 0
    rows = (tmp_path / "run" / "requests.jsonl").read_text()
    for other in ([], ["merge_groups=false"], ["merge_groups=true", "route_word_slots=true"]):
        loaded: list[str] = []
        result = _bench(tmp_path, loaded, *other)
        assert result.exit_code == 1
        assert "holds a run with engine options merge_groups=true, not " in result.stderr
        assert "a resumed run uses the --engine-option values its rows were recorded with" in (
            result.stderr
        )
        assert loaded == []
    assert (tmp_path / "run" / "requests.jsonl").read_text() == rows
    # The same options, however they are spelled, resume: the rows are read back.
    loaded = []
    result = _bench(tmp_path, loaded, "merge_groups=True")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "run" / "requests.jsonl").read_text() == rows


def test_results_written_before_options_were_recorded_resume_only_without_options(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"config": {"dataset": "formula"}}))
    refuse_other_options([tmp_path], {})
    with pytest.raises(ConfigError, match=r"engine options \(none\), not merge_groups=true"):
        refuse_other_options([tmp_path], {"merge_groups": True})
