"""The example configuration files in examples/ load and validate."""

from pathlib import Path

from minicache.config import load_settings
from minicache.server.config import load_server_config

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_server_example_config_loads_with_two_tenants_and_an_admin_key():
    config = load_server_config(EXAMPLES / "server.toml")
    assert set(config.api_keys.values()) == {"team-a", "team-b"}
    assert config.auth_enabled and len(config.admin_keys) == 1
    assert config.max_body_bytes == 1048576


def test_models_at_scale_example_points_both_roles_at_vllm():
    settings = load_settings(EXAMPLES / "models-at-scale.toml", env={"VLLM_API_KEY": "secret"})
    assert settings.target.backend == settings.small.backend == "openai"
    assert settings.target.profile == settings.small.profile == "vllm"
    assert settings.target.api_key == "secret"
    assert settings.target.base_url.endswith("/v1") and "32B" in settings.target.model
