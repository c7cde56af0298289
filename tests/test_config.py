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


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    with pytest.raises(ConfigError, match=r"env AGENT_HARNESS_BUDGETS__LEASE_S: budgets\.lease_s"):
        load_settings(cwd=tmp_path, env={"AGENT_HARNESS_BUDGETS__LEASE_S": "-1"})
