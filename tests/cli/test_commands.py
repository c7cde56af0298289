"""The CLI as a user meets it: exit codes, one-line errors, JSON for scripts, helpful --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_harness.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "PLAN.md")


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_HARNESS_")}
    return subprocess.run(
        [sys.executable, "-m", "agent_harness", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=60,
    )


@pytest.mark.acceptance
def test_plan_table_shows_items_and_report() -> None:
    result = run_cli("plan", EXAMPLE)
    assert result.returncode == 0, result.stderr
    for item_id in ("T1", "T2", "T3", "T4", "T5", "T6", "T7"):
        assert item_id in result.stdout
    assert "checkbox has no item id" in result.stdout
    assert "7 items (1 done), 1 line not read; no success check: T6" in result.stdout


@pytest.mark.unit
def test_plan_json_for_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", EXAMPLE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [i["id"] for i in data["items"]] == ["T1", "T2", "T3", "T4", "T5", "T6", "T7"]
    assert data["unread"][0]["line"] == 36


@pytest.mark.unit
def test_backlog_to_stdout_and_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", EXAMPLE, "--backlog", "-"]) == 0
    path = tmp_path / "backlog.json"
    path.write_text(capsys.readouterr().out)
    assert main(["plan", str(path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["items"]) == 7


@pytest.mark.acceptance
@pytest.mark.parametrize(
    ("content", "code", "message"),
    [
        ("### T1: a\n### T1: b\n", 3, "item id T1 is used twice (lines 1 and 2)"),
        ("- [ ] T1 a\n  - depends on: T2\n- [ ] T2 b\n  - depends on: T1\n", 3, "cycle"),
        (None, 2, "plan file not found"),
    ],
)
def test_refusals_are_one_line_and_non_zero(
    tmp_path: Path, content: str | None, code: int, message: str
) -> None:
    path = tmp_path / "PLAN.md"
    if content is not None:
        path.write_text(content)
    result = run_cli("plan", str(path))
    assert result.returncode == code
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


@pytest.mark.acceptance
def test_unwritable_backlog_target_is_a_clean_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_cli("plan", EXAMPLE, "--backlog", str(blocker / "backlog.json"))
    assert result.returncode == 2 and "cannot write" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.acceptance
def test_config_bad_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text("[budgets]\nnope = 1\n")
    result = run_cli("config", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("unknown key 'budgets.nope'")


def _every_command() -> list[list[str]]:
    """Each command's words, subcommands of a group (`audit cost`, `work retry`) included."""
    import importlib

    import click

    found = []
    for name, (module, attr, _help) in sorted(COMMANDS.items()):
        command = getattr(importlib.import_module(module), attr)
        found.append([name])
        if isinstance(command, click.Group):
            found += [[name, sub] for sub in sorted(command.commands)]
    return found


@pytest.mark.unit
@pytest.mark.parametrize("words", _every_command(), ids=" ".join)
def test_every_command_has_help_with_an_example(
    words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*words, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage:" in out and "Example" in out


@pytest.mark.unit
def test_top_level_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


@pytest.mark.unit
def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nonsense"]) == 2
    assert "No such command" in capsys.readouterr().err


@pytest.mark.unit
def test_config_shows_values_set_by_flags_as_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "agent-harness.toml").write_text("[budgets]\nmax_attempts = 4\n")
    monkeypatch.chdir(tmp_path)
    assert main(["config", "--json", "--max-attempts", "5", "--check", "pytest -q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["budgets.max_attempts"] == {"value": 5, "source": "flag"}
    assert data["checks.commands"] == {"value": ["pytest -q"], "source": "flag"}
    assert data["budgets.max_replans"]["source"] == "default"


@pytest.mark.unit
def test_config_warns_about_a_token_in_the_file_without_printing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".git").mkdir()
    token = "ghp_" + "k" * 36
    (tmp_path / "agent-harness.toml").write_text(f"[tracker]\ntoken = '{token}'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["config"]) == 0
    said = capsys.readouterr()
    assert said.err.startswith("warning: tracker.token is written in ")
    assert "set GH_TOKEN" in said.err
    assert token not in said.out + said.err
