"""The ``minicache`` command line: the group every command joins, and ``serve``.

``models``, ``config`` and ``demo`` live in :mod:`minicache.cli.models`, :mod:`minicache.cli.config`
and :mod:`minicache.cli.demo`, the store commands (``stats``, ``entries ...``) in
:mod:`minicache.cli.store`, ``solve`` in :mod:`minicache.cli.engine`, and
:class:`~minicache.cli.options.Runtime` says where commands get their models (tests pass fakes).
The benchmark project adds ``run``, ``bench`` and ``bench-spec``
(``minicache_bench.cli``) through the ``minicache.commands`` entry point. Every command that
touches a store opens it with :func:`minicache.store.open_store`, as the engine and the server do.
"""

from __future__ import annotations

import sys

import click

from minicache import __version__
from minicache.cli.config import show_config
from minicache.cli.demo import demo
from minicache.cli.engine import engine_option, solve
from minicache.cli.models import models
from minicache.cli.options import Runtime
from minicache.cli.store import entries, stats
from minicache.errors import MiniCacheError

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
    """Serve MiniCache as an OpenAI-compatible API (/v1, /admin, /dashboard, /docs, /ready, /metrics).

    Models are the configured ones (`minicache config`). The engine's options are the config file's
    [engine], then --config's [engine], then MINICACHE_ENGINE_<KEY>, then --engine-option KEY=VALUE
    (e.g. --engine-option audit_rate=0.1 --engine-option verify.min_margin=1.5); all are checked
    before the models load. `minicache config --config FILE` shows what serve would use.

    Without API keys in --config, auth is off and the server refuses a non-loopback --host unless
    --insecure-no-auth is given; the admin endpoints always need an admin key.
    """
    from minicache.config.models import load_engine_config, load_settings, require_embedded
    from minicache.engine import MiniCache
    from minicache.server import serve as run_server
    from minicache.server.config import load_server_config, server_file_settings
    from minicache.server.runner import check_exposure
    from minicache.server.startup import banner, check_store

    # Everything is checked before any model loads; each problem is one "error:" line (_Group).
    check_store(store)
    settings = load_settings()
    if "embedded" in (settings.target.backend, settings.small.backend):
        require_embedded()
    server_config = load_server_config(config_file)
    from_file = server_file_settings(config_file) if config_file else []
    engine_config = load_engine_config(extra=from_file, options=engine_options)
    check_exposure(host, server_config, insecure_no_auth)
    click.echo("loading models...", err=True)
    engine = MiniCache.local(store, config=engine_config)
    try:
        click.echo(banner(host, port, store, server_config.auth_enabled, settings), err=True)
        run_server(
            host=host,
            port=port,
            store=store,
            config=server_config,
            engine=engine,
            log_level=log_level,
            insecure_no_auth=insecure_no_auth,
        )
    finally:
        engine.close()


def _plugin_commands() -> list[click.Command]:
    """Commands other installed projects add (the benchmark adds ``run``, ``bench`` and ``bench-spec``).

    Why an entry point: the core wheel carries no benchmark code or data, and ``import minicache``
    never loads it; a user who installs the benchmark project gets its commands on the same CLI."""
    from importlib.metadata import entry_points

    found: list[click.Command] = []
    for point in entry_points(group="minicache.commands"):
        found.extend(point.load())
    return found


for _command in (models, show_config, demo, solve, stats, entries, *_plugin_commands()):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
