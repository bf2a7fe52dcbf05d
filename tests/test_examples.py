"""Every example configuration file in examples/ loads and validates through the configuration layer."""

from pathlib import Path

import pytest

from minicache.config.models import load_engine_config, load_settings
from minicache.engine import EngineConfig
from minicache.server.config import ServerConfig, load_server_config, server_file_settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
# What each example configures: "models" files are MINICACHE_CONFIG files, "server" files serve --config.
KINDS = {"server.toml": "server", "models-at-scale.toml": "models"}


def test_every_example_file_is_checked_here():
    assert {p.name for p in EXAMPLES.glob("*.toml")} == set(KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_example_loads_and_validates(name, tmp_path):
    path = EXAMPLES / name
    if KINDS[name] == "server":
        assert isinstance(load_server_config(path, env={}), ServerConfig)
        engine = load_engine_config(tmp_path / "absent.toml", {}, extra=server_file_settings(path))
    else:
        load_settings(path, env={})
        engine = load_engine_config(path, {})
    assert isinstance(engine, EngineConfig)


def test_server_example_config_loads_with_two_tenants_and_an_admin_key():
    config = load_server_config(EXAMPLES / "server.toml", env={})
    assert set(config.api_keys.values()) == {"team-a", "team-b"}
    assert config.auth_enabled and len(config.admin_keys) == 1
    assert config.max_body_bytes == 1048576


def test_server_example_sets_every_server_limit_and_shows_an_engine_table():
    """The example documents each limit ServerConfig has, with its default value."""
    text = (EXAMPLES / "server.toml").read_text(encoding="utf-8")
    settings = {s.path: s.value for s in server_file_settings(EXAMPLES / "server.toml")}
    limits = {path[1] for path in settings if path[0] == "limits"}
    assert limits == {
        "max_body_bytes",
        "rate_per_s",
        "burst",
        "max_inflight",
        "max_inflight_per_caller",
        "body_timeout_s",
        "auth_fail_per_s",
        "auth_fail_burst",
    }
    default = ServerConfig()
    assert all(settings[("limits", name)] == getattr(default, name) for name in limits)
    engine = {path[1:]: value for path, value in settings.items() if path[0] == "engine"}
    assert engine and "[engine]" in text
    default_engine = EngineConfig()
    for (
        path,
        value,
    ) in engine.items():  # the example's engine values are the defaults it says they are
        node = default_engine
        for key in path:
            node = getattr(node, key)
        assert node == value, path


def test_models_at_scale_example_points_both_roles_at_vllm():
    settings = load_settings(EXAMPLES / "models-at-scale.toml", env={"VLLM_API_KEY": "secret"})
    assert settings.target.backend == settings.small.backend == "openai"
    assert settings.target.profile == settings.small.profile == "vllm"
    assert settings.target.api_key == "secret"
    assert settings.target.base_url.endswith("/v1") and "32B" in settings.target.model
