"""`agent-harness classify` through the real CLI entry point, over recorded agent output."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_harness.cli import main

RECORDED = Path(__file__).parents[1] / "models" / "cli_outputs.json"


def recorded_log(tmp_path: Path, agent: str, starts: str) -> Path:
    """A log holding what the agent printed, from the recorded outputs."""
    rows = json.loads(RECORDED.read_text(encoding="utf-8"))
    [row] = [r for r in rows if r["agent"] == agent and r["output"].startswith(starts)]
    log = tmp_path / f"{agent}.jsonl"
    log.write_text("\n".join(row["lines"]) + "\n", encoding="utf-8")
    return log


pytestmark = pytest.mark.unit


def test_classify_reports_a_rejected_window_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reset = int(time.time()) + 3600
    log = tmp_path / "run.jsonl"
    event = {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "resetsAt": reset, "rateLimitType": "five_hour"},
    }
    log.write_text(json.dumps(event) + "\n", encoding="utf-8")
    assert main(["classify", "--agent", "claude", str(log), "--json"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "window" and out["reset_at"] == reset and out["raw_code"] == "five_hour"


def test_classify_says_nothing_was_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "run.log"
    log.write_text("All tests passed.\n", encoding="utf-8")
    assert main(["classify", str(log)]) == 0
    assert "no limit or failure" in capsys.readouterr().out


def test_classify_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify", "--help"]) == 0
    assert "agent-harness classify --agent codex" in capsys.readouterr().out


def test_classify_names_codexs_plain_429_a_burst(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = recorded_log(tmp_path, "codex", '`turn.failed`: "exceeded')
    assert main(["classify", "--agent", "codex", str(log)]) == 4
    out = capsys.readouterr().out
    assert out.startswith("burst from codex 429: exceeded retry limit, last status: 429")
    assert out.splitlines()[1] == "policy: retry"
    # Codex shows no wait: a run starts it again after the default minute.
    assert out.splitlines()[2].startswith("a run starts the agent again from ")
    assert out.splitlines()[2].endswith(" (in 60s)")


def test_classify_names_codexs_401_auth_which_the_policy_escalates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = recorded_log(tmp_path, "codex", '`turn.failed`: "unexpected status 401')
    assert main(["classify", "--agent", "codex", str(log), "--json"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert (out["kind"], out["policy"], out["agent"]) == ("auth", "escalate", "codex")
    assert out["message"].startswith("unexpected status 401 Unauthorized: Incorrect API key")


@pytest.mark.parametrize(
    ("agent", "starts", "exit_code", "kind"),
    [
        ("gemini", "exit 173 (429) and a `result` with", 173, "burst"),
        ("gemini", "exit 145 (401)", 145, "auth"),
        ("gemini", 'exit 173 (429) and a `result`: "[API Error: You have exhausted', 173, "window"),
        ("aider", 'exit 0, "litellm.AuthenticationError', None, "auth"),
        ("aider", "exit 0 after its own retries", None, "burst"),
        ("opencode", "exit 1, `error` event: `APIError` 429", None, "burst"),
        ("opencode", "exit 1, `error` event: `APIError` 401", None, "auth"),
    ],
)
def test_classify_names_the_other_three_agents_failures(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    agent: str,
    starts: str,
    exit_code: int | None,
    kind: str,
) -> None:
    log = recorded_log(tmp_path, agent, starts)
    code = [] if exit_code is None else ["--exit-code", str(exit_code)]
    assert main(["classify", "--agent", agent, *code, str(log), "--json"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert (out["kind"], out["agent"]) == (kind, agent)


def test_gemini_s_exit_code_names_the_status_its_words_do_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "[API Error: Resource has been exhausted (e.g. check quota).]" names no status; 173 does.
    log = recorded_log(tmp_path, "gemini", "exit 173 (429) and a `result` with")
    assert main(["classify", "--agent", "gemini", str(log)]) == 0
    capsys.readouterr()
    assert main(["classify", "--agent", "gemini", "--exit-code", "173", str(log)]) == 4
    assert capsys.readouterr().out.startswith("burst from gemini 429")


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "aider", "opencode"])
def test_the_models_own_words_about_a_limit_are_no_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    rows = json.loads(RECORDED.read_text(encoding="utf-8"))
    [row] = [r for r in rows if r["agent"] == agent and r["kind"] == "none"]
    log = recorded_log(tmp_path, agent, row["output"])
    assert main(["classify", "--agent", agent, str(log)]) == 0
    assert "no limit or failure" in capsys.readouterr().out


def test_an_escape_sequence_in_an_agents_message_is_spelt_out_not_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "run.log"
    log.write_text("Error: You exceeded your current quota \x1b]0;pwned\x07\x1b[31mRED\n")
    assert main(["classify", str(log)]) == 4
    out = capsys.readouterr().out
    assert "\x1b" not in out and "quota \\x1b]0;pwned\\x07\\x1b[31mRED" in out
