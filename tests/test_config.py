"""Settings: file, then environment, then validation with clear errors."""

import pytest

from minicache import ConfigError
from minicache.config import load_settings


def test_defaults_are_the_embedded_models(tmp_path):
    s = load_settings(tmp_path / "absent.toml", env={})
    assert s.target.backend == s.small.backend == "embedded" and s.speculative == "none"


def test_an_env_url_switches_a_role_to_an_openai_server(tmp_path):
    s = load_settings(tmp_path / "absent.toml", env={"MINICACHE_TARGET_URL": "http://gpu:8000/v1",
                                                     "MINICACHE_TARGET_MODEL": "m", "MINICACHE_TARGET_PROFILE": "sglang"})
    assert (s.target.backend, s.target.profile, s.small.backend) == ("openai", "sglang", "embedded")


def test_env_overrides_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('speculative = "lookup"\n[small]\nbackend = "openai"\nbase_url = "http://a/v1"\nmodel = "x"\n')
    s = load_settings(path, env={"MINICACHE_SMALL_MODEL": "y", "MINICACHE_SPECULATIVE": "none"})
    assert s.small.model == "y" and s.small.base_url == "http://a/v1" and s.speculative == "none"


@pytest.mark.parametrize("text,env,message", [
    ("[target]\nbackend = 'openai'\n", {}, "needs base_url and model"),
    ("[target]\nbakend = 'openai'\n", {}, "unknown key"),
    ("[wat]\n", {}, "unknown section"),
    ("speculative = 'fast'\n", {}, "speculative must be one of"),
    ("[small]\nbackend = 'openai'\nbase_url='http://x'\nmodel='m'\nprofile='tgi'\n", {}, "profile must be one of"),
    ("not = [valid", {}, "not valid TOML"),
    ("", {"MINICACHE_TARGET_BACKEND": "gpu"}, "backend must be one of"),
])
def test_bad_settings_fail_with_a_specific_message(tmp_path, text, env, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path, env=env)
