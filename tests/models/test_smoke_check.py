"""The llama.cpp smoke check: a build that crashes on this CPU is reported, never propagated."""

from __future__ import annotations

import json
import os

import pytest

from minicache.models import smoke

SEGFAULT = "import ctypes; ctypes.string_at(0)"
SIGILL = "import os, signal; os.kill(os.getpid(), signal.SIGILL)"
FAILS = "import sys; sys.stderr.write('llama_model_load: error loading model\\n'); sys.exit(1)"
REPORTS = (
    "import json; print(json.dumps({'system_info': 'CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | "
    "AMX_INT8 = 0 | FMA = 1 |', 'version': '0.3.36', 'text': ' return'}))"
)


def test_system_info_features_are_the_ones_set_to_one():
    info = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | AMX_INT8 = 1 | LLAMAFILE = 1 |"
    assert smoke.parse_system_info(info) == [
        "AMX_INT8",
        "AVX",
        "AVX2",
        "LLAMAFILE",
        "SSE3",
        "SSSE3",
    ]


def test_a_child_that_segfaults_is_reported_with_cause_and_not_propagated():
    result = smoke.run_child("model.gguf", script=SEGFAULT)
    assert not result.ok
    assert "SIGSEGV" in result.error and "AMX" in result.error


def test_a_child_killed_by_sigill_names_missing_instructions():
    result = smoke.run_child("model.gguf", script=SIGILL)
    assert not result.ok
    assert "SIGILL" in result.error and "instructions this machine does not have" in result.error


def test_a_child_that_exits_with_an_error_reports_its_last_stderr_line():
    result = smoke.run_child("model.gguf", script=FAILS)
    assert not result.ok
    assert result.error == "the smoke decode failed: llama_model_load: error loading model"


def test_check_models_raises_one_error_naming_each_failed_model_and_the_fix(monkeypatch):
    monkeypatch.setattr(smoke, "_CHILD", SEGFAULT)
    with pytest.raises(smoke.SmokeCheckError) as info:
        smoke.check_models({"target": "t.gguf", "small": "s.gguf"})
    message = str(info.value)
    assert (
        "target: llama.cpp crashed with SIGSEGV" in message
        and "small: llama.cpp crashed" in message
    )
    assert "make setup" in message and "MINICACHE_LLAMA_BUILD=native" in message
    assert set(info.value.results) == {"target", "small"}


def test_a_healthy_child_reports_version_and_build_features():
    result = smoke.run_child("model.gguf", script=REPORTS)
    assert result.ok and result.version == "0.3.36"
    assert result.build_features == ["AVX", "AVX2", "FMA", "SSE3"]


def test_build_features_the_cpu_lacks_are_named():
    assert smoke.missing_cpu_features(["AVX2", "AMX_INT8", "AVX512"], {"avx2", "fma"}) == [
        "AMX_INT8",
        "AVX512",
    ]
    assert smoke.missing_cpu_features(["AVX2", "FMA", "SSE3"], {"avx2", "fma"}) == []


def test_models_command_reports_a_crashing_build_in_its_json_and_fails(monkeypatch):
    from minicache.cli.models import llama_build_status

    calls = []
    real_child = smoke.run_child

    def fake_child(model, **kwargs):
        calls.append(str(model))
        return real_child(model, script=REPORTS if str(model) == "-" else SEGFAULT)

    monkeypatch.setattr(smoke, "run_child", fake_child)
    status = {
        "target": {"path": "/m/t.gguf", "verified": True},
        "small": {"path": "/m/s.gguf", "verified": False},
        "embedder": {"path": "/m/e", "verified": True},
    }
    llama = llama_build_status(status, smoke=True)
    assert calls == ["-", "/m/t.gguf"]  # only verified GGUF models are decoded
    assert not llama["ok"] and "SIGSEGV" in llama["error"]
    assert llama["smoke"]["target"]["ok"] is False
    json.dumps(llama)  # the --json output must serialize


@pytest.mark.real_model
def test_the_installed_build_decodes_one_token_of_each_embedded_model_and_is_portable():
    from minicache.models import fetch

    paths = {
        key: fetch.model_path(model, fetch.models_dir()) for key, model in fetch.EMBEDDED.items()
    }
    results = smoke.check_models(paths)
    for result in results.values():
        assert result.ok, result.error
        assert smoke.missing_cpu_features(result.build_features) == []
        if os.environ.get("MINICACHE_LLAMA_BUILD", "portable") == "portable" and not os.environ.get(
            "CMAKE_ARGS"
        ):
            # setup's default build is portable: never AMX or AVX-512, whatever this CPU has.
            assert not {"AMX_INT8", "AVX512", "AVX512_VNNI", "AVX512_BF16"} & set(
                result.build_features
            )
