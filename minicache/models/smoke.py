"""Does the llama.cpp build actually run on this CPU? A one-token decode in a child process.

A llama.cpp build can compile kernels that crash on another machine of the same CPU family (the
native build's AMX matmul segfaults on some Sapphire Rapids VMs; an AVX-512 build dies with SIGILL
on a CPU without it). In the user's own process that is a bare ``Segmentation fault`` with no hint.
So setup and ``minicache models`` load each embedded model and decode one token in a *child*
process: a crash there is reported as a clear error that names the likely cause and the fix.

The child also reports what llama.cpp was built with (``llama_print_system_info``), so
``minicache models --json`` can show the build's CPU features next to the machine's.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from minicache.errors import SmokeCheckError  # re-exported

SMOKE_TIMEOUT_S = 180.0

# Runs in the child: load the model, decode one token, print one JSON line.
_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import llama_cpp
info = llama_cpp.llama_print_system_info()
info = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
path = sys.argv[1]
if path == "-":
    print(json.dumps({"system_info": info, "version": llama_cpp.__version__}), flush=True)
    sys.exit(0)
llm = llama_cpp.Llama(model_path=path, n_ctx=128, n_threads=1, n_batch=32, verbose=False)
out = llm("def add(a, b):", max_tokens=1, temperature=0.0)
print(json.dumps({"system_info": info, "version": llama_cpp.__version__, "text": out["choices"][0]["text"],
                  "seconds": time.perf_counter() - t0}), flush=True)
"""

FIX = (
    "Rebuild llama-cpp-python as the portable CPU variant (AVX2/FMA/F16C, no AMX or AVX-512): "
    "`rm -rf .venv ~/.cache/minicache/wheels && make setup` (do not set MINICACHE_LLAMA_BUILD=native "
    "or CMAKE_ARGS). See README, 'Portable build'."
)


@dataclass
class SmokeResult:
    """What one child process reported. ``ok`` is False when it crashed, failed or timed out."""

    ok: bool
    seconds: float
    model: str
    version: str = ""
    build_features: list[str] = field(default_factory=list)
    error: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def parse_system_info(info: str) -> list[str]:
    """The features set to 1 in llama.cpp's system info (``"AVX2 = 1 | AMX_INT8 = 1 | ..."``)."""
    return sorted({m.group(1) for m in re.finditer(r"([A-Za-z0-9_]+)\s*=\s*1\b", info)})


def cpu_flags() -> set[str]:
    """This CPU's feature flags as Linux reports them (empty where /proc/cpuinfo is unreadable)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# llama.cpp's feature names that a CPU must report for the build to be safe to run.
_NEEDS_FLAG = {
    "AVX": "avx",
    "AVX2": "avx2",
    "FMA": "fma",
    "F16C": "f16c",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
    "AVX_VNNI": "avx_vnni",
    "BMI2": "bmi2",
}


def missing_cpu_features(build_features: list[str], flags: set[str] | None = None) -> list[str]:
    """Build features this CPU does not report: running such a build ends in SIGILL."""
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return []
    return [f for f in build_features if f in _NEEDS_FLAG and _NEEDS_FLAG[f] not in flags]


def _describe_crash(returncode: int, stderr: str) -> str:
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    cause = {
        "SIGILL": "the build uses CPU instructions this machine does not have",
        "SIGSEGV": "a CPU kernel of this llama.cpp build crashed (native builds with AMX do this on some CPUs)",
        "SIGBUS": "a CPU kernel of this llama.cpp build crashed",
        "SIGKILL": "the child was killed (out of memory?)",
    }.get(name, "the native llama.cpp library crashed")
    tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    return f"llama.cpp crashed with {name}: {cause}." + (
        f" Last stderr line: {tail[0]}" if tail else ""
    )


def run_child(
    model: str | Path,
    *,
    python: str = sys.executable,
    script: str | None = None,
    timeout_s: float = SMOKE_TIMEOUT_S,
) -> SmokeResult:
    """Load ``model`` and decode one token in a fresh interpreter (``"-"``: only read the build info).

    ``python`` and ``script`` are seams for tests, which stand in a child that crashes.
    """
    model = str(model)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [python, "-c", script or _CHILD, model],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return SmokeResult(
            False,
            time.perf_counter() - start,
            model,
            error=f"loading the model and decoding one token took over {timeout_s:.0f} s",
        )
    seconds = time.perf_counter() - start
    if proc.returncode < 0:
        return SmokeResult(
            False, seconds, model, error=_describe_crash(proc.returncode, proc.stderr)
        )
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    try:
        report = json.loads(last[0]) if last else None
    except json.JSONDecodeError:
        report = None
    if proc.returncode != 0 or not isinstance(report, dict):
        err = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return SmokeResult(False, seconds, model, error=f"the smoke decode failed: {err[0]}")
    features = parse_system_info(str(report.get("system_info", "")))
    return SmokeResult(
        True, seconds, model, version=str(report.get("version", "")), build_features=features
    )


def build_info(**kwargs: object) -> SmokeResult:
    """The llama.cpp build's version and CPU features, read in a child process."""
    return run_child("-", **kwargs)  # type: ignore[arg-type]


def check_models(paths: dict[str, str | Path], **kwargs: object) -> dict[str, SmokeResult]:
    """Smoke-decode each model; raise :class:`SmokeCheckError` naming the cause and the fix on failure."""
    results = {key: run_child(path, **kwargs) for key, path in paths.items()}  # type: ignore[arg-type]
    failed = [f"{key}: {r.error}" for key, r in results.items() if not r.ok]
    if failed:
        raise SmokeCheckError(
            "the llama.cpp build cannot run the embedded models on this machine. "
            + " ".join(failed)
            + " "
            + FIX,
            results,
        )
    return results
