"""The scripted agents behave as documented when run as plain programs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent_harness.models.agent_output import classify_agent_output
from agent_harness.models.failures import FailureKind
from agent_harness.testing.agents import write_scripted_agent

pytestmark = pytest.mark.integration


def run_in(work: Path, argv: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=work, input=stdin, capture_output=True, text=True, timeout=30, check=False
    )


def test_done_writes_its_file_and_exits_zero(tmp_path: Path, work: Path) -> None:
    done = run_in(work, write_scripted_agent(tmp_path, "done"))
    assert done.returncode == 0
    assert done.stdout == "working on it\n"
    assert (work / "DONE.txt").read_text() == "done\n"


def test_crash_exits_with_its_code(tmp_path: Path, work: Path) -> None:
    assert run_in(work, write_scripted_agent(tmp_path, "crash")).returncode == 3


def test_ask_prints_the_question_and_records_the_answer(tmp_path: Path, work: Path) -> None:
    done = run_in(work, write_scripted_agent(tmp_path, "ask"), stdin="sure\n")
    assert "Apply these changes? [y/N] answer: sure" in done.stdout
    assert (work / "answer.txt").read_text() == "sure"


def test_rate_limit_outputs_classify_as_the_vendors_limits(tmp_path: Path, work: Path) -> None:
    claude = run_in(work, write_scripted_agent(tmp_path, "claude_rate_limit"))
    found = classify_agent_output("claude", claude.stdout, now=0.0)
    assert claude.returncode == 1
    assert found is not None and found.kind is FailureKind.WINDOW
    assert found.raw_code == "five_hour"

    codex = run_in(work, write_scripted_agent(tmp_path, "codex_usage_limit"))
    found = classify_agent_output("codex", codex.stdout, now=100.0)
    assert found is not None and found.kind is FailureKind.WINDOW
    assert found.reset_at == 100.0 + 7200


def test_custom_steps_run_in_order(tmp_path: Path, work: Path) -> None:
    argv = write_scripted_agent(
        tmp_path,
        {
            "steps": [
                {"print": ["a", "b"]},
                {"write_file": {"path": "out.txt", "content": "x"}},
                {"argv_dump": "argv.json"},
                {"env_dump": str(work / "env.json")},
            ],
            "exit": 9,
        },
    )
    done = run_in(work, [*argv, "extra arg"])
    assert (done.returncode, done.stdout) == (9, "a\nb\n")
    assert (work / "out.txt").read_text() == "x"
    assert json.loads((work / "argv.json").read_text()) == ["extra arg"]
    assert "PATH" in json.loads((work / "env.json").read_text())


def test_two_agents_in_one_directory_keep_their_own_behaviour(tmp_path: Path, work: Path) -> None:
    first = write_scripted_agent(tmp_path, "crash")
    second = write_scripted_agent(tmp_path, "done")
    assert run_in(work, first).returncode == 3
    assert run_in(work, second).returncode == 0


def test_unknown_behaviours_and_steps_are_refused(tmp_path: Path, work: Path) -> None:
    with pytest.raises(ValueError, match="unknown scripted behaviour"):
        write_scripted_agent(tmp_path, "dance")
    bad = run_in(work, write_scripted_agent(tmp_path, {"steps": [{"dance": 1}]}))
    assert bad.returncode == 70
    assert "unknown step" in bad.stderr
