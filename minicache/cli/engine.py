"""``minicache solve`` and ``minicache run``, and :class:`Runtime`: where commands get their models.

The engine's store is opened before the models load, so a wrong ``--store`` fails in a second
rather than after minutes of loading.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from minicache.cli.options import Runtime
from minicache.cli.store import store_option, tenant_option

if TYPE_CHECKING:
    from minicache.engine import MiniCache


ENGINE_OPTION_HELP = (
    "Set an engine option (a field of minicache.engine.EngineConfig), KEY=VALUE; repeatable. "
    "Nested tables with dots: verify.min_margin=1.5. Overrides [engine] in the config file "
    "and MINICACHE_ENGINE_<KEY> (see `minicache config --help`)."
)


def engine_option(command: Callable) -> Callable:
    """``--engine-option KEY=VALUE`` (repeatable): the command-line layer of the engine's options."""
    return click.option(
        "--engine-option",
        "engine_options",
        multiple=True,
        metavar="KEY=VALUE",
        help=ENGINE_OPTION_HELP,
    )(command)


def engine_from_options(
    runtime: Runtime, store: str, options: tuple[str, ...] = (), **fixed
) -> MiniCache:
    """The engine on ``store``, opened first: a wrong --store fails before the models load. Its
    options come from the configuration layer (config file, MINICACHE_ENGINE_*, ``options``), checked
    before anything opens; ``fixed`` ones are what the command needs whatever the layer says."""
    from dataclasses import replace

    from minicache.config.models import load_engine_config
    from minicache.engine import MiniCache
    from minicache.store import open_store

    config = replace(load_engine_config(options=options), **fixed)
    opened = open_store(store)
    try:
        click.echo("loading models...", err=True)
        target, small = runtime.backends()
        embedder = (
            runtime.embedder() if runtime.embedder is not None else None
        )  # None: config.route_embedder
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
        raise click.BadParameter(
            f"{path} is not UTF-8 text (byte {exc.start})", param_hint="--context"
        ) from None


@click.command()
@click.argument("question")
@click.option(
    "--context",
    "context_file",
    type=click.Path(allow_dash=True),
    help="File with context (a table, a document); - reads stdin.",
)
@click.option(
    "--group", help="Optional group label; without it the request is routed automatically."
)
@click.option("--no-cache", is_flag=True, help="Do not look the request up (still records it).")
@click.option("--no-store", is_flag=True, help="Record nothing about this request.")
@click.option(
    "--mode",
    type=click.Choice(["auto", "program", "step"]),
    default="auto",
    show_default=True,
    help="program: the program cache; step: StepCache (a linear equation to solve in steps, or a JSON "
    "object with typed keys); auto: StepCache for such requests, programs for the rest.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON.")
@store_option
@tenant_option
@engine_option
@click.pass_obj
def solve(
    runtime: Runtime,
    question: str,
    context_file: str | None,
    group: str | None,
    no_cache: bool,
    no_store: bool,
    mode: str,
    as_json: bool,
    store: str,
    tenant: str,
    engine_options: tuple[str, ...],
) -> None:
    """Answer one QUESTION through the cache (hit, or step reuse) or the target model (miss).

    A build this request makes possible runs before the command exits (background_builds is off
    here whatever the configuration says: a one-shot process would lose it)."""
    context = _read_context(context_file)
    with engine_from_options(runtime, store, engine_options, background_builds=False) as mc:
        r = mc.solve(
            question,
            context,
            group=group,
            tenant=tenant,
            no_cache=no_cache,
            no_store=no_store,
            mode=mode,
        )
    if as_json:
        click.echo(json.dumps(r.to_dict(), indent=2, default=str))
        return
    click.echo(r.answer_text)
    timing = ", ".join(f"{k[:-2]} {v:.2f}s" for k, v in r.timings.items())
    if r.solver_fallback:
        click.echo(
            "(written by the deterministic solver: the model's steps failed their checks)", err=True
        )
    click.echo(
        f"[{r.route}] group {r.group}"
        + (f", entry {r.entry_id}" if r.entry_id else "")
        + f"; {timing}; tokens target {r.tokens['target']}, small {r.tokens['small']}",
        err=True,
    )
