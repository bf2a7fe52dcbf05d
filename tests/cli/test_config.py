"""The one configuration layer (minicache.config.settings): defaults < config file < environment < flags, for
the models, the engine and the server; every name that worked before still works; a bad value or an
unknown key is a ConfigError naming where it came from, the key and the reason."""

import pytest

from minicache import ConfigError
from minicache.config.models import MODEL_ENV, engine_env, load_engine_config, load_settings
from minicache.engine import EngineConfig
from minicache.server.config import ENV as SERVER_ENV
from minicache.server.config import ServerConfig, load_server_config, server_file_settings


def test_defaults_are_the_embedded_models(tmp_path):
    s = load_settings(tmp_path / "absent.toml", env={})
    assert s.target.backend == s.small.backend == "embedded" and s.speculative == "none"


def test_an_env_url_switches_a_role_to_an_openai_server(tmp_path):
    env = {
        "MINICACHE_TARGET_URL": "http://gpu:8000/v1",
        "MINICACHE_TARGET_MODEL": "m",
        "MINICACHE_TARGET_PROFILE": "sglang",
    }
    s = load_settings(tmp_path / "absent.toml", env=env)
    assert (s.target.backend, s.target.profile, s.small.backend) == ("openai", "sglang", "embedded")


def test_env_overrides_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        'speculative = "lookup"\n[small]\nbackend = "openai"\nbase_url = "http://a/v1"\nmodel = "x"\n'
    )
    s = load_settings(path, env={"MINICACHE_SMALL_MODEL": "y", "MINICACHE_SPECULATIVE": "none"})
    assert s.small.model == "y" and s.small.base_url == "http://a/v1" and s.speculative == "none"


@pytest.mark.parametrize(
    "text,env,message",
    [
        ("[target]\nbackend = 'openai'\n", {}, "needs base_url and model"),
        ("[target]\nbakend = 'openai'\n", {}, "unknown key"),
        ("[wat]\n", {}, "unknown section"),
        ("speculative = 'fast'\n", {}, "speculative must be one of"),
        (
            "[small]\nbackend = 'openai'\nbase_url='http://x'\nmodel='m'\nprofile='tgi'\n",
            {},
            "profile must be one of",
        ),
        ("not = [valid", {}, "not valid TOML"),
        ("", {"MINICACHE_TARGET_BACKEND": "gpu"}, "backend must be one of"),
    ],
)
def test_bad_settings_fail_with_a_specific_message(tmp_path, text, env, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path, env=env)


# -- the one layer: precedence, every name that worked before, errors that name key and source ----


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_engine_options_take_defaults_then_file_then_server_file_then_env_then_flags(tmp_path):
    """Each layer overrides the one below it key by key, and leaves the other keys alone."""
    user = write(
        tmp_path / "user.toml",
        "[engine]\nbuild_after = 4\naudit_rate = 0.2\nmiss_max_tokens = 100\n"
        "max_failures = 7\n[engine.verify]\nmin_margin = 2.0\n",
    )
    served = write(
        tmp_path / "server.toml",
        "[engine]\naudit_rate = 0.3\nmiss_max_tokens = 200\nmax_failures = 8\n",
    )
    env = {"MINICACHE_ENGINE_MISS_MAX_TOKENS": "300", "MINICACHE_ENGINE_MAX_FAILURES": "9"}
    config = load_engine_config(
        user, env, extra=server_file_settings(served), options=["max_failures=10"]
    )
    default = EngineConfig()
    assert config.validate_n == default.validate_n  # no layer sets it
    assert config.build_after == 4 and config.verify.min_margin == 2.0  # the file only
    assert (
        config.verify.value_range == default.verify.value_range
    )  # a nested table keeps its other defaults
    assert config.audit_rate == 0.3  # the server file over the file
    assert config.miss_max_tokens == 300  # the environment over both files
    assert config.max_failures == 10  # the flag over everything


def test_engine_options_from_env_and_flags_are_parsed_by_the_fields_type(tmp_path):
    env = {
        "MINICACHE_ENGINE_FROZEN": "yes",
        "MINICACHE_ENGINE_ROUTE_THRESHOLD": "0.9",
        "MINICACHE_ENGINE_STEP__CANDIDATES": "6",
        "MINICACHE_ENGINE_ADMISSION__ENABLED": "off",
    }
    config = load_engine_config(
        tmp_path / "absent.toml", env, options=["verify.reorder_check=true", "build_lease_s=5"]
    )
    assert config.frozen is True and config.route_threshold == 0.9 and config.step.candidates == 6
    assert (
        config.admission.enabled is False
        and config.verify.reorder_check is True
        and config.build_lease_s == 5.0
    )
    assert isinstance(config.build_lease_s, float) and isinstance(config.step.candidates, int)


def test_every_engine_field_has_an_env_var_named_after_its_key():
    names = engine_env()
    assert names["MINICACHE_ENGINE_BUILD_AFTER"] == ("engine", "build_after")
    assert names["MINICACHE_ENGINE_VERIFY__MIN_MARGIN"] == ("engine", "verify", "min_margin")
    assert names["MINICACHE_ENGINE_ADMISSION__BACKOFF_S"] == ("engine", "admission", "backoff_s")
    leaves = list(names.values())
    assert len(leaves) == len(set(leaves)) and ("engine", "background_builds") in leaves


@pytest.mark.parametrize(
    "text,env,options,message",
    [
        ("[engine]\nbuild_afterr = 5\n", {}, [], "unknown key 'engine.build_afterr'"),
        (
            "[engine.verify]\nmargin = 1\n",
            {},
            [],
            "unknown key 'engine.verify.margin' (keys in [engine.verify]: align,",
        ),
        ("", {}, ["bild_after=5"], "--engine-option bild_after=5: unknown key 'engine.bild_after'"),
        (
            "[engine]\nbuild_after = 2.5\n",
            {},
            [],
            "engine.build_after: Input should be a valid integer",
        ),
        (
            "[engine]\nbuild_after = true\n",
            {},
            [],
            "engine.build_after: Input should be a valid integer",
        ),
        (
            "[engine]\nfrozen = 'yes'\n",
            {},
            [],
            "engine.frozen: Input should be a valid boolean",
        ),  # a file is typed
        ("[engine]\nverify = 1\n", {}, [], "engine.verify must be a table"),
        ("engine = 3\n", {}, [], "engine must be a table"),
        (
            "",
            {"MINICACHE_ENGINE_BUILD_AFTER": "many"},
            [],
            "MINICACHE_ENGINE_BUILD_AFTER: engine.build_after: Input should"
            " be a valid integer, unable to parse string as an integer, "
            "got 'many'",
        ),
        ("", {}, ["frozen"], "expected KEY=VALUE"),
        ("", {}, ["verify=1"], "engine.verify is a table; set one of its keys (align,"),
        ("", {}, ["audit_rate=1.5"], "audit_rate is a share and must be between 0 and 1, not 1.5"),
        (
            "",
            {},
            ["verify.audit_rate_max=2"],
            "verify.audit_rate_max is a share and must be between 0 and 1, not 2",
        ),
        ("", {}, ["build_agreement=1.2"], "build_agreement is a share and must be between 0 and 1"),
        ("", {}, ["miss_max_tokens=-1"], "miss_max_tokens must not be negative"),
        ("", {}, ["admission.backoff_s=-1"], "admission.backoff_s must not be negative"),
        ("", {}, ["validate_min=4"], "validate_min (4) must not exceed validate_n (3)"),
    ],
)
def test_bad_engine_options_name_their_source_key_and_reason(tmp_path, text, env, options, message):
    path = write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError) as info:
        load_engine_config(path, env, options=options)
    assert message in str(info.value)
    if text:  # the file's errors name the file
        assert str(info.value).startswith(f"{path}: ")


def test_the_model_sections_ignore_the_engine_table_and_the_engine_ignores_the_models(tmp_path):
    path = write(tmp_path / "c.toml", "n_ctx = 2048\n[engine]\nbuild_after = 6\n")
    assert load_settings(path, env={}).n_ctx == 2048
    assert load_engine_config(path, {}).build_after == 6


def test_a_file_value_keeps_its_type_checks_and_env_text_is_parsed(tmp_path):
    path = write(tmp_path / "c.toml", "n_ctx = '2048'\n")
    with pytest.raises(ConfigError, match="n_ctx: Input should be a valid integer"):
        load_settings(path, env={})
    path = write(
        tmp_path / "c.toml", "[target]\ntimeout_s = 30\n"
    )  # an integer is a valid number of seconds
    assert load_settings(path, env={}).target.timeout_s == 30.0


@pytest.mark.parametrize(
    "name,value,role,attr,expected",
    [
        ("MINICACHE_TARGET_BACKEND", "embedded", "target", "backend", "embedded"),
        ("MINICACHE_SMALL_URL", "http://s:1/v1", "small", "base_url", "http://s:1/v1"),
        ("MINICACHE_SMALL_MODEL", "m", "small", "model", "m"),
        ("MINICACHE_SMALL_PROFILE", "ollama", "small", "profile", "ollama"),
        ("MINICACHE_TARGET_API_KEY", "sk-x", "target", "api_key", "sk-x"),
    ],
)
def test_every_model_env_var_that_worked_before_still_works(
    tmp_path, name, value, role, attr, expected
):
    env = {"MINICACHE_SMALL_URL": "http://s:1/v1", "MINICACHE_SMALL_MODEL": "m", name: value}
    assert (
        getattr(getattr(load_settings(tmp_path / "absent.toml", env=env), role), attr) == expected
    )
    assert set(MODEL_ENV) >= {name} or name.endswith("_API_KEY")


def test_the_key_named_by_api_key_env_is_read_and_the_direct_env_var_wins(tmp_path):
    path = write(
        tmp_path / "c.toml",
        "[target]\nbackend='openai'\nbase_url='http://t/v1'\nmodel='m'\napi_key_env='MY_KEY'\n",
    )
    assert load_settings(path, env={"MY_KEY": "from-named"}).target.api_key == "from-named"
    env = {"MY_KEY": "from-named", "MINICACHE_TARGET_API_KEY": "direct"}
    assert load_settings(path, env=env).target.api_key == "direct"
    with pytest.raises(
        ConfigError, match="unknown key 'target.api_key'"
    ):  # keys never go in the file
        load_settings(write(tmp_path / "k.toml", "[target]\napi_key = 'sk-in-a-file'\n"), env={})


@pytest.mark.parametrize(
    "name,value,attr,expected",
    [
        (
            "MINICACHE_SERVER_API_KEYS",
            "sk-aaaaaaaa=a, sk-bbbbbbbb=b",
            "api_keys",
            {"sk-aaaaaaaa": "a", "sk-bbbbbbbb": "b"},
        ),
        (
            "MINICACHE_SERVER_ADMIN_KEYS",
            "sk-admin-1,sk-admin-2",
            "admin_keys",
            {"sk-admin-1", "sk-admin-2"},
        ),
        ("MINICACHE_SERVER_MAX_BODY_BYTES", "4096", "max_body_bytes", 4096),
        ("MINICACHE_SERVER_RATE_PER_S", "2.5", "rate_per_s", 2.5),
        ("MINICACHE_SERVER_BURST", "3", "burst", 3),
        ("MINICACHE_SERVER_MAX_INFLIGHT", "8", "max_inflight", 8),
        ("MINICACHE_SERVER_MAX_INFLIGHT_PER_CALLER", "2", "max_inflight_per_caller", 2),
        ("MINICACHE_SERVER_BODY_TIMEOUT_S", "1.5", "body_timeout_s", 1.5),
        ("MINICACHE_SERVER_AUTH_FAIL_PER_S", "0", "auth_fail_per_s", 0.0),
        ("MINICACHE_SERVER_AUTH_FAIL_BURST", "4", "auth_fail_burst", 4),
        ("MINICACHE_SERVER_PUBLIC_METRICS", "1", "public_metrics", True),
        ("MINICACHE_SERVER_PUBLIC_METRICS", "false", "public_metrics", False),
        ("MINICACHE_SERVER_MODEL_NAME", "my-cache", "model_name", "my-cache"),
    ],
)
def test_every_server_env_var_sets_its_key_over_the_file(tmp_path, name, value, attr, expected):
    path = write(
        tmp_path / "s.toml",
        '[api_keys]\n"sk-file-key-1" = "f"\n[limits]\nburst = 9\nmax_inflight = 9\n',
    )
    assert getattr(load_server_config(path, env={name: value}), attr) == expected
    assert name in SERVER_ENV


def test_server_file_keys_and_defaults(tmp_path):
    text = (
        'admin_keys = ["sk-admin-xxxxxxxx"]\npublic_metrics = true\nmodel_name = "m"\n[api_keys]\n'
        '"sk-a-xxxxxxxxxxxx" = "a"\n[limits]\nbody_timeout_s = 3\nauth_fail_burst = 2\n[engine]\nbuild_after = 9\n'
    )
    config = load_server_config(write(tmp_path / "s.toml", text), env={})
    assert config == ServerConfig(
        api_keys={"sk-a-xxxxxxxxxxxx": "a"},
        admin_keys={"sk-admin-xxxxxxxx"},
        public_metrics=True,
        model_name="m",
        body_timeout_s=3.0,
        auth_fail_burst=2,
    )
    assert (
        load_engine_config(
            tmp_path / "absent.toml", {}, extra=server_file_settings(tmp_path / "s.toml")
        ).build_after
        == 9
    )


@pytest.mark.parametrize(
    "text,env,message",
    [
        (
            "[limits]\nmax_bodybytes = 1\n",
            {},
            "unknown key 'limits.max_bodybytes' (keys in [limits]: auth_fail_burst,",
        ),
        (
            "[target]\nbackend = 'openai'\n",
            {},
            "unknown section 'target' (keys in the top level: admin_keys, api_keys,",
        ),
        ("limits = 5\n", {}, "limits must be a table"),
        ("[limits]\nrate_per_s = true\n", {}, "limits.rate_per_s: Input should be a valid number"),
        ("[limits]\nburst = 1.5\n", {}, "limits.burst: Input should be a valid integer"),
        ("admin_keys = 'sk-admin-xxxxxxxx'\n", {}, "admin_keys: Input should be a valid list"),
        ("public_metrics = 'yes'\n", {}, "public_metrics: Input should be a valid boolean"),
        ("model_name = ''\n", {}, "model_name: String should have at least 1 character"),
        (
            "[api_keys]\n'sk-aaaaaaaa' = 3\n",
            {},
            "api_keys: ['sk-aaaaaaaa']: Input should be a valid string",
        ),
        (
            "",
            {"MINICACHE_SERVER_BURST": "lots"},
            "MINICACHE_SERVER_BURST: limits.burst: Input should be a valid integer",
        ),
        (
            "",
            {"MINICACHE_SERVER_API_KEYS": "sk-aaaaaaaa"},
            "MINICACHE_SERVER_API_KEYS: must be 'key=tenant,key=tenant'",
        ),
        (
            "",
            {"MINICACHE_SERVER_PUBLIC_METRICS": "maybe"},
            "MINICACHE_SERVER_PUBLIC_METRICS: public_metrics: Input should",
        ),
        ("[limits]\nmax_body_bytes = 10\n", {}, "max_body_bytes must be at least 1024"),
        (
            "[engine]\nbuild_after = 'x'\n",
            {},
            "engine.build_after: Input should be a valid integer",
        ),
        ("nope = [\n", {}, "not valid TOML"),
    ],
)
def test_bad_server_settings_name_their_source_key_and_reason(tmp_path, text, env, message):
    path = write(tmp_path / "s.toml", text)
    with pytest.raises(ConfigError) as info:
        load_server_config(path, env=env)
        server_file_settings(path)  # the [engine] table is checked when read for the engine
        load_engine_config(tmp_path / "absent.toml", env, extra=server_file_settings(path))
    assert message in str(info.value)


def test_a_missing_server_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file .*absent.toml"):
        load_server_config(tmp_path / "absent.toml", env={})
