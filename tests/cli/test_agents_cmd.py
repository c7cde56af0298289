"""`agent-harness agents` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main

pytestmark = pytest.mark.unit


def test_agents_lists_presets_and_sees_which_are_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))

    assert main(["agents", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == {"claude", "codex", "gemini", "aider", "opencode"}
    assert rows["codex"]["installed"] is True
    assert rows["claude"]["installed"] is False
    assert rows["codex"]["command"] == (
        "codex exec --json --sandbox workspace-write [--model M] <prompt>"
    )
    assert "OPENAI_API_KEY" in rows["codex"]["env"]
    assert "GH_TOKEN" not in rows["codex"]["env"]


def test_agents_table_says_how_to_install_a_missing_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "60")  # narrower than any command line
    assert main(["agents"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # Each install command whole on one line, ready to paste, however narrow the terminal.
    assert "  gemini    npm install -g @google/gemini-cli" in lines
    assert "  claude    npm install -g @anthropic-ai/claude-code" in lines
    assert "  aider     python -m pip install aider-install && aider-install" in lines
    assert any(line.startswith("  codex     codex exec --json --sandbox") for line in lines)
