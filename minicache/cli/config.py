"""``minicache config``: the effective settings of every configuration layer, as JSON (keys hidden)."""

from __future__ import annotations

import json

import click

from minicache.cli.engine import engine_option


@click.command("config")
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
