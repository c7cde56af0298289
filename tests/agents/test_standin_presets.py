"""Gemini CLI, aider and opencode presets, run through a real session with stand-in programs.

Each stand-in is an executable of the tool's own name on PATH that records the arguments,
environment and stdin it was started with. The command lines follow each tool's documentation:
Gemini CLI's headless reference (`-p`, `--output-format stream-json`, `--yolo`), aider's
scripting page (`--message-file`, `--yes-always`, `--no-auto-commits`) and `opencode run`
(`--model provider/model`, `--format json`, the message as arguments).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import PRESETS
from agent_harness.agents.runner import AgentState, run_agent
from agent_harness.agents.setup import agent_setup
from agent_harness.sessions.headless import HeadlessHost

PROMPT = '# Work item A1: Shout helper\n\nIt\'s "quoted" and has $DOLLARS; no shell sees it.\n'
RECORDER = """\
#!{python}
import json, os, sys
stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
with open({out!r}, "w") as f:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(),
               "stdin": stdin}}, f)
print(json.dumps({{"type": "result", "response": "ok"}}))
"""


def run_standin(tmp_path: Path, name: str, model: str) -> tuple[dict[str, Any], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record.json"
    program = bin_dir / name
    program.write_text(RECORDER.format(python=sys.executable, out=str(record)))
    program.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    state = tmp_path / "state"
    source = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path / "user-home"),
        "GEMINI_API_KEY": "g-key",
        "OPENAI_API_KEY": "o-key",
        "OPENAI_API_BASE": "http://127.0.0.1:9/v1",
        "ANTHROPIC_API_KEY": "a-key",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",  # Claude Code's form: no /v1
        "GH_TOKEN": "ghp_never",
        "AGENT_HARNESS_SERVICE_TOKEN": "never",
    }
    setup = agent_setup(PRESETS[name], state / "agent-home" / name, source, model=model)
    outcome = run_agent(
        HeadlessHost(state / "sessions"),
        setup.preset or PRESETS[name],
        session=f"standin-{name}",
        worktree=work,
        prompt=PROMPT,
        state_dir=state,
        env_source=setup.env,
        timeout_s=30,
        poll_s=0.02,
        model=setup.model,
        extra_env_allow=setup.allow,
    )
    assert outcome.state is AgentState.DONE, outcome.reason
    recorded: dict[str, Any] = json.loads(record.read_text())
    assert Path(recorded["cwd"]).resolve() == work.resolve()
    assert (
        "GH_TOKEN" not in recorded["env"] and "AGENT_HARNESS_SERVICE_TOKEN" not in recorded["env"]
    )
    assert recorded["env"]["HOME"] == str(state / "agent-home" / name)
    return recorded, state


@pytest.mark.integration
def test_gemini_runs_headless_with_its_prompt_its_key_and_no_stdin(tmp_path: Path) -> None:
    recorded, _ = run_standin(tmp_path, "gemini", "gemini-2.5-pro")
    assert recorded["argv"] == [
        "--model", "gemini-2.5-pro", "--yolo", "--skip-trust", "--output-format", "stream-json",
        "-p", PROMPT,
    ]  # fmt: skip
    assert recorded["env"]["GEMINI_API_KEY"] == "g-key"
    # Its settings live in a home of the run's own, choosing key auth and a single attempt.
    gemini_home = Path(recorded["env"]["GEMINI_CLI_HOME"])
    assert gemini_home.is_relative_to(tmp_path / "state")
    settings = json.loads((gemini_home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["general"]["maxAttempts"] == 1
    assert recorded["stdin"] == ""  # a piped stdin would be read to its end before starting
    assert "OPENAI_API_KEY" not in recorded["env"] and "ANTHROPIC_API_KEY" not in recorded["env"]


@pytest.mark.integration
def test_aider_reads_its_message_file_and_gets_no_stdin(tmp_path: Path) -> None:
    recorded, state = run_standin(tmp_path, "aider", "gpt-4.1")
    argv = recorded["argv"]
    assert argv[:-1] == [
        "--model", "openai/gpt-4.1", "--yes-always", "--no-auto-commits", "--no-pretty",
        "--no-check-update", "--no-show-release-notes", "--analytics-disable", "--no-gitignore",
        "--message-file",
    ]  # fmt: skip
    # Its histories go to the run's directory, not the worktree.
    assert Path(recorded["env"]["AIDER_CHAT_HISTORY_FILE"]).is_relative_to(state)
    assert Path(argv[-1]).read_text() == PROMPT and Path(argv[-1]).is_relative_to(state)
    assert recorded["stdin"] == ""  # /dev/null: aider never waits on a question
    assert recorded["env"]["OPENAI_API_BASE"] == "http://127.0.0.1:9/v1"
    assert recorded["env"]["OPENAI_API_KEY"] == "o-key"


@pytest.mark.integration
def test_opencode_run_gets_the_message_as_an_argument(tmp_path: Path) -> None:
    # A bare model name becomes opencode's provider/model.
    recorded, _ = run_standin(tmp_path, "opencode", "claude-sonnet-4-5")
    assert recorded["argv"] == [
        "run", "--model", "anthropic/claude-sonnet-4-5", "--format", "json", "--print-logs",
        "--log-level", "ERROR", PROMPT,
    ]  # fmt: skip
    assert recorded["stdin"] == ""
    assert recorded["env"]["ANTHROPIC_API_KEY"] == "a-key"
    assert "GEMINI_API_KEY" not in recorded["env"]
    # Not Claude Code's ANTHROPIC_BASE_URL: its own config, with the /v1 its SDK wants.
    assert "ANTHROPIC_BASE_URL" not in recorded["env"]
    config = json.loads(recorded["env"]["OPENCODE_CONFIG_CONTENT"])
    assert config["provider"]["anthropic"]["options"]["baseURL"] == "http://127.0.0.1:9/v1"
    assert config["autoupdate"] is False


@pytest.mark.unit
@pytest.mark.parametrize("name", ["gemini", "aider", "opencode"])
def test_a_missing_binary_says_how_to_install_it(tmp_path: Path, name: str) -> None:
    outcome = run_agent(
        HeadlessHost(tmp_path / "sessions"),
        PRESETS[name],
        session=f"missing-{name}",
        worktree=tmp_path,
        prompt=PROMPT,
        state_dir=tmp_path / "state",
        env_source={"PATH": str(tmp_path / "empty")},
        timeout_s=5,
    )
    assert outcome.state is AgentState.MISSING_BINARY
    assert PRESETS[name].install_hint in outcome.reason
