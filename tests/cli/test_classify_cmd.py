"""`agent-harness classify` through the real CLI entry point."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_harness.cli import main

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
