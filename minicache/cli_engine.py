"""``minicache solve`` and ``minicache run``, and :class:`Runtime`: where commands get their models.

The engine's store is opened before the models load, so a wrong ``--store`` fails in a second
rather than after minutes of loading.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from .cli_store import store_option, tenant_option

if TYPE_CHECKING:
    from .engine import MiniCache
    from .models.base import ModelBackend
    from .routing import Embedder


def _configured_backends() -> tuple[ModelBackend, ModelBackend]:
    from .config import build_backends

    return build_backends()


@dataclass
class Runtime:
    """Where the commands that run models get them: the configured (target, small) backends and
    the routing embedder. Both are factories, called only by a command that needs them; no
    embedder factory means the one the engine options name (``route_embedder``). Tests pass a
    Runtime of fakes as ``CliRunner.invoke(main, ..., obj=Runtime(...))``."""

    backends: Callable[[], tuple[ModelBackend, ModelBackend]] = _configured_backends
    embedder: Callable[[], Embedder] | None = None

    def route_embedder(self) -> Callable[[], Embedder]:
        """The factory of the embedder routing uses: the test's, or the configured one."""
        if self.embedder is not None:
            return self.embedder

        def configured() -> Embedder:
            from .config import load_engine_config
            from .routing import route_embedder

            return route_embedder(load_engine_config().route_embedder)

        return configured


ENGINE_OPTION_HELP = ("Set an engine option (a field of minicache.engine.EngineConfig), KEY=VALUE; repeatable. "
                      "Nested tables with dots: verify.min_margin=1.5. Overrides [engine] in the config file "
                      "and MINICACHE_ENGINE_<KEY> (see `minicache config --help`).")


def engine_option(command: Callable) -> Callable:
    """``--engine-option KEY=VALUE`` (repeatable): the command-line layer of the engine's options."""
    return click.option("--engine-option", "engine_options", multiple=True, metavar="KEY=VALUE",
                        help=ENGINE_OPTION_HELP)(command)


def _engine(runtime: Runtime, store: str, options: tuple[str, ...] = (), **fixed) -> MiniCache:
    """The engine on ``store``, opened first: a wrong --store fails before the models load. Its
    options come from the configuration layer (config file, MINICACHE_ENGINE_*, ``options``), checked
    before anything opens; ``fixed`` ones are what the command needs whatever the layer says."""
    from dataclasses import replace

    from .config import load_engine_config
    from .engine import MiniCache
    from .store import open_store

    config = replace(load_engine_config(options=options), **fixed)
    opened = open_store(store)
    try:
        click.echo("loading models...", err=True)
        target, small = runtime.backends()
        embedder = runtime.embedder() if runtime.embedder is not None else None  # None: config.route_embedder
        return MiniCache(target, small, opened, embedder=embedder, config=config)
    except BaseException:
        opened.close()
        raise


def _read_context(path: str | None) -> str | None:
    if path is None:
        return None
    data = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"{path} is not UTF-8 text (byte {exc.start})", param_hint="--context") from None


@click.command()
@click.argument("question")
@click.option("--context", "context_file", type=click.Path(allow_dash=True),
              help="File with context (a table, a document); - reads stdin.")
@click.option("--group", help="Optional group label; without it the request is routed automatically.")
@click.option("--no-cache", is_flag=True, help="Do not look the request up (still records it).")
@click.option("--no-store", is_flag=True, help="Record nothing about this request.")
@click.option("--mode", type=click.Choice(["auto", "program", "step"]), default="auto", show_default=True,
              help="program: the program cache; step: StepCache (a linear equation to solve in steps, or a JSON "
                   "object with typed keys); auto: StepCache for such requests, programs for the rest.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@store_option
@tenant_option
@engine_option
@click.pass_obj
def solve(runtime: Runtime, question: str, context_file: str | None, group: str | None, no_cache: bool,
          no_store: bool, mode: str, as_json: bool, store: str, tenant: str, engine_options: tuple[str, ...]) -> None:
    """Answer one QUESTION through the cache (hit, or step reuse) or the target model (miss).

    A build this request makes possible runs before the command exits (background_builds is off
    here whatever the configuration says: a one-shot process would lose it)."""
    context = _read_context(context_file)
    with _engine(runtime, store, engine_options, background_builds=False) as mc:
        r = mc.solve(question, context, group=group, tenant=tenant, no_cache=no_cache, no_store=no_store, mode=mode)
    if as_json:
        click.echo(json.dumps(r.to_dict(), indent=2, default=str))
        return
    click.echo(r.answer_text)
    timing = ", ".join(f"{k[:-2]} {v:.2f}s" for k, v in r.timings.items())
    if r.solver_fallback:
        click.echo("(written by the deterministic solver: the model's steps failed their checks)", err=True)
    click.echo(f"[{r.route}] group {r.group}" + (f", entry {r.entry_id}" if r.entry_id else "") +
               f"; {timing}; tokens target {r.tokens['target']}, small {r.tokens['small']}", err=True)


@click.command()
@click.option("--groups", default=5, show_default=True, help="How many Formula groups (formulas) to stream.")
@click.option("--per-group", default=6, show_default=True, help="Requests per group.")
@click.option("--seed", default=0, show_default=True, help="Shuffle seed of the stream.")
@click.option("--store", default=None, help="SQLite file or postgresql:// URL (default: a fresh temporary SQLite "
                                            "file, so the run starts cold).")
@click.option("--json", "as_json", type=click.Path(),
              help="Also write the summary and per-request rows to this JSON file.")
@engine_option
@click.pass_obj
def run(runtime: Runtime, groups: int, per_group: int, seed: int, store: str | None, as_json: str | None,
        engine_options: tuple[str, ...]) -> None:
    """The main job: a shuffled stream of FinLoRA Formula requests through MiniCache on the configured models.

    Shows each request's route (miss / hit / fallback), latency and correctness against gold, and each
    build as it happens; ends with hit rate, accuracy and mean latency of hits and misses. Gold
    answers are FinLoRA's as published (a few NPV/PV golds are wrong; see docs/data.md).
    """
    import tempfile

    from .mainjob import format_summary, formula_stream, serve_and_show

    with tempfile.TemporaryDirectory() as tmp:
        with _engine(runtime, store or f"{tmp}/minicache.db", engine_options) as mc:
            stream = formula_stream(groups, per_group, seed=seed)
            click.echo(f"streaming {len(stream)} requests from {groups} formulas (cold cache)...", err=True)
            summary = serve_and_show(mc, stream)
    click.echo(format_summary(summary))
    if as_json:
        with open(as_json, "w") as fh:
            json.dump(summary, fh, indent=2, default=str)
