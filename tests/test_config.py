"""Layered configuration: defaults < file < environment < flags, with sources and masking."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.config import load_settings
from agent_harness.errors import ConfigError

pytestmark = pytest.mark.unit


def test_defaults_with_no_file(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    loaded = load_settings(cwd=tmp_path, env={})
    assert loaded.file is None
    assert loaded.settings.budgets.max_attempts == 3
    assert dict((k, s) for k, _, s in loaded.rows())["budgets.max_attempts"] == "default"


def test_layers_and_sources(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text(
        "[budgets]\nmax_attempts = 5\nmax_replans = 1\n[tracker]\ntoken = 'ghp_secret'\n"
    )
    env = {
        "AGENT_HARNESS_BUDGETS__MAX_REPLANS": "4",
        "AGENT_HARNESS_DB": "sqlite:///x.db",
        "AGENT_HARNESS_CHECKS__COMMANDS": "ruff check ., pytest -q",
    }
    loaded = load_settings(cwd=tmp_path, env=env, flags={"budgets.max_attempts": 7})
    s = loaded.settings
    assert (s.budgets.max_attempts, s.budgets.max_replans) == (7, 4)
    assert s.store.db == "sqlite:///x.db"
    assert s.checks.commands == ["ruff check .", "pytest -q"]
    rows = {key: (value, source) for key, value, source in loaded.rows()}
    assert rows["budgets.max_attempts"] == ("7", "flag")
    assert rows["budgets.max_replans"] == ("4", "env AGENT_HARNESS_BUDGETS__MAX_REPLANS")
    assert rows["tracker.token"] == ("********", "file agent-harness.toml")
    assert "ghp_secret" not in repr(loaded.rows()) + repr(loaded.as_json())


def test_a_token_set_nowhere_in_the_config_says_where_a_run_takes_it(tmp_path: Path) -> None:
    # It said "default" with GH_TOKEN set, as if a run would have no token.
    def source(env: dict[str, str]) -> str:
        rows = load_settings(cwd=tmp_path, env=env).rows()
        return next(source for key, _, source in rows if key == "tracker.token")

    assert source({"GH_TOKEN": "ghp_x"}) == "a run takes env GH_TOKEN"
    assert source({"GITHUB_TOKEN": "ghp_x"}) == "a run takes env GITHUB_TOKEN"
    assert source({}) == "a run asks gh"


def test_pyproject_section_is_read(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.agent-harness.checks]\ntimeout_s = 9\n")
    assert load_settings(cwd=tmp_path, env={}).settings.checks.timeout_s == 9


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[budgets]\nmax_atempts = 5\n", "unknown key 'budgets.max_atempts'"),
        (
            "[budgets]\nmax_attempts = 'many'\n",
            "budgets.max_attempts: Input should be a valid integer",
        ),
        ("colour = 1\n", "unknown key 'colour'"),
        ("[budgets\n", "not valid TOML"),
    ],
)
def test_bad_files_name_the_file_and_key(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(cwd=tmp_path, env={})
    assert "agent-harness.toml" in str(info.value)


@pytest.mark.parametrize("key", ["my plan", "caf\udce9", "", "x" * 65, "a\n"])
def test_a_plan_key_no_issue_marker_can_hold_is_refused(tmp_path: Path, key: str) -> None:
    (tmp_path / ".git").mkdir()
    with pytest.raises(
        ConfigError, match=r"env AGENT_HARNESS_TRACKER__PLAN_KEY: tracker\.plan_key: "
    ):
        load_settings(cwd=tmp_path, env={"AGENT_HARNESS_TRACKER__PLAN_KEY": key})


@pytest.mark.parametrize("name", ["agent-harness.toml", "pyproject.toml"])
def test_a_settings_file_that_is_not_utf8_is_named_with_its_odd_byte(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_bytes(b"# caf\xe9\n[budgets]\nmax_attempts = 5\n")
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, env={})
    assert info.value.message == (
        f"{tmp_path / name}: not valid TOML (byte 0xe9 at offset 5 is not UTF-8)"
    )
    with pytest.raises(ConfigError, match="byte 0xe9 at offset 5"):
        load_settings(cwd=tmp_path / "..", env={}, config_file=tmp_path / name)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("TRACKER__REQUEST_TIMEOUT_S", "inf", "Input should be a finite number"),
        ("TRACKER__REQUEST_TIMEOUT_S", "1e308", "less than or equal to 31622400"),
        ("TRACKER__WRITE_SPACING_S", "1e308", "less than or equal to 31622400"),
        ("BUDGETS__AGENT_TIMEOUT_S", "nan", "Input should be a finite number"),
        ("BUDGETS__ITEM_COST_USD", "inf", "Input should be a finite number"),
        ("CHECKS__TIMEOUT_S", "1e12", "less than or equal to 31622400"),
    ],
)
def test_an_endless_or_overflowing_number_is_refused_where_it_is_set(
    tmp_path: Path, name: str, value: str, said: str
) -> None:
    # Taken, these overflowed the socket or clock they were handed to, as a traceback later.
    (tmp_path / ".git").mkdir()
    with pytest.raises(ConfigError, match=f"env AGENT_HARNESS_{name}: .*{said}"):
        load_settings(cwd=tmp_path, env={f"AGENT_HARNESS_{name}": value})


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    with pytest.raises(ConfigError, match=r"env AGENT_HARNESS_BUDGETS__LEASE_S: budgets\.lease_s"):
        load_settings(cwd=tmp_path, env={"AGENT_HARNESS_BUDGETS__LEASE_S": "-1"})


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[budgets]\nmax_atempts = 5\n", "did you mean 'budgets.max_attempts'?"),
        ("[budget]\nmax_attempts = 5\n", "unknown key 'budget'; did you mean 'budgets'?"),
        ("statedir = 'x'\n", "unknown key 'statedir'; did you mean 'state_dir'?"),
        ("[budgets]\nprotected_paths = ['x']\n", "did you mean 'protected_paths'?"),
        ("[protected_paths]\nrepalce = true\n", "did you mean 'protected_paths.replace'?"),
    ],
)
def test_an_unknown_key_names_the_nearest_valid_one(
    tmp_path: Path, toml: str, message: str
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, env={})
    assert message in info.value.message


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("AGENT_HARNESS_BUDGET__MAX_ATTEMPTS", "AGENT_HARNESS_BUDGETS__MAX_ATTEMPTS"),
        ("AGENT_HARNESS_BUDGETS__MAX_ATEMPTS", "AGENT_HARNESS_BUDGETS__MAX_ATTEMPTS"),
        ("AGENT_HARNESS_MAX_ATTEMPTS", "AGENT_HARNESS_BUDGETS__MAX_ATTEMPTS"),
        ("AGENT_HARNESS_STATEDIR", "AGENT_HARNESS_STATE_DIR"),
        ("AGENT_HARNESS_SESSIONS__HOSTS", "AGENT_HARNESS_SESSIONS__HOST"),
    ],
)
def test_a_misspelt_variable_is_an_error_naming_the_nearest(
    tmp_path: Path, name: str, nearest: str
) -> None:
    (tmp_path / ".git").mkdir()
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, env={name: "5"})
    assert info.value.message == f"env {name}: no such setting; did you mean {nearest}?"


def test_the_harness_s_other_variables_are_not_settings_and_pass(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    env = {"AGENT_HARNESS_DEBUG": "1", "AGENT_HARNESS_TEST_PG": "postgresql://x", "HOME": "/h"}
    assert load_settings(cwd=tmp_path, env=env).settings.budgets.max_attempts == 3


def test_roles_are_a_valid_table_of_vendor_model_routes(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text(
        "[roles]\nreviewer = 'openai:gpt-4.1'\nimplementer = 'anthropic:claude-sonnet-4'\n"
    )
    loaded = load_settings(cwd=tmp_path, env={})
    assert loaded.settings.roles == {
        "reviewer": "openai:gpt-4.1",
        "implementer": "anthropic:claude-sonnet-4",
    }
    rows = {key: (value, source) for key, value, source in loaded.rows()}
    assert rows["roles"] == (
        "reviewer = openai:gpt-4.1, implementer = anthropic:claude-sonnet-4",
        "file agent-harness.toml",
    )


@pytest.mark.parametrize(
    ("toml", "env", "paths", "source"),
    [
        (
            "protected_paths = ['secrets/**']\n",
            {},
            [".github/**", "agent-harness.toml", "secrets/**"],
            "default + file agent-harness.toml",
        ),
        (
            "[protected_paths]\npaths = ['secrets/**', '.github/**']\n",
            {},
            [".github/**", "agent-harness.toml", "secrets/**"],
            "default + file agent-harness.toml",
        ),
        (
            "[protected_paths]\npaths = ['secrets/**']\nreplace = true\n",
            {},
            ["secrets/**"],
            "file agent-harness.toml",
        ),
        (
            "",
            {"AGENT_HARNESS_PROTECTED_PATHS": "secrets/**,infra/*.tf"},
            [".github/**", "agent-harness.toml", "secrets/**", "infra/*.tf"],
            "default + env AGENT_HARNESS_PROTECTED_PATHS",
        ),
    ],
)
def test_configured_protected_paths_add_to_the_defaults_unless_they_replace_them(
    tmp_path: Path, toml: str, env: dict[str, str], paths: list[str], source: str
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text(toml)
    loaded = load_settings(cwd=tmp_path, env=env)
    assert loaded.settings.protected_paths == paths
    assert loaded.sources["protected_paths"] == source


def test_replace_without_paths_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text("[protected_paths]\nreplace = true\n")
    with pytest.raises(ConfigError, match="replace is true but no paths are given"):
        load_settings(cwd=tmp_path, env={})


def test_a_token_written_in_the_file_is_warned_about_without_its_value(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text("[tracker]\ntoken = 'ghp_written_down'\n")
    loaded = load_settings(cwd=tmp_path, env={})
    [warning] = loaded.warnings
    assert "tracker.token is written in" in warning and "agent-harness.toml" in warning
    assert "ghp_written_down" not in warning
    # The same token from the environment is how it should be given: no warning.
    (tmp_path / "agent-harness.toml").write_text("")
    from_env = load_settings(cwd=tmp_path, env={"AGENT_HARNESS_TRACKER__TOKEN": "ghp_x"})
    assert from_env.warnings == []


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("budgets = 5\n", "'budgets' is a section, not a value: write [budgets]"),
        (
            "[budgets]\nmax_attempts = true\n",
            "budgets.max_attempts: Value error, a number is wanted",
        ),
        ("[roles]\nimplementer = 5\n", "roles.implementer: Input should be a valid string"),
    ],
)
def test_a_config_slip_is_named_in_the_files_own_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent-harness.toml").write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert said in refused.value.message
