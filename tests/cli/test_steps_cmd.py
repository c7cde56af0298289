"""`agent-harness steps` through the real CLI entry point, on plans the executor saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.implement.steps import Check, Step, StepPlan, StepStatus, save_plan

pytestmark = pytest.mark.unit


def blocked_plan(path: Path) -> None:
    plan = StepPlan(
        goal="T1: Add a farewell",
        steps=[
            Step(id="1", description="notes", success_check=Check(kind="file_exists", path="n")),
            Step(
                id="2",
                description="farewell",
                success_check=Check(kind="regex", path="app.py", pattern="farewell"),
                depends_on=["1"],
            ),
        ],
        status="blocked",
        blocker="step 2 (farewell) failed: no match; no replans left (2 allowed)",
        blocking_step="2",
    )
    plan.steps[0].status = StepStatus.DONE
    plan.steps[1].status, plan.steps[1].attempts = StepStatus.FAILED, 2
    save_plan(plan, path)


def test_steps_shows_where_a_blocked_plan_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked_plan(tmp_path / "plan.json")
    assert main(["steps", str(tmp_path / "plan.json")]) == 3
    out = capsys.readouterr().out
    assert "/farewell/ matches in app.py" in out
    assert "blocked at step 2: step 2 (farewell) failed" in out


def test_steps_json_is_the_saved_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocked_plan(tmp_path / "plan.json")
    assert main(["steps", str(tmp_path / "plan.json"), "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in data["steps"]] == ["done", "failed"]


def test_steps_names_a_missing_plan_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["steps", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the step plan") and err.count("\n") == 1


def test_steps_names_a_plan_file_that_is_not_utf8_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bin.json"
    path.write_bytes(b'{"goal": "caf\xe9"}')
    assert main(["steps", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: cannot read the step plan")
    assert "not UTF-8 text (byte 0xe9 at offset 13)" in err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{", "not a step plan: the file: Invalid JSON: EOF while parsing"),
        ("[]", "not a step plan: the file: Input should be an object"),
        ('{"goal": "x", "status": "nope"}', "not a step plan: status: Input should be 'running'"),
        ("{}", "not a step plan: goal: Field required"),
    ],
)
def test_a_file_that_is_no_step_plan_is_told_what_is_wrong_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    (tmp_path / "plan.json").write_text(text)
    assert main(["steps", str(tmp_path / "plan.json")]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1


def test_text_in_a_saved_plan_is_shown_as_written_never_styled_or_sent_as_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The executor's plan holds what a model wrote: `[/nope]` once crashed rich's markup
    # (exit 70), `[bold]` was styled, and an escape sequence reached the terminal.
    plan = StepPlan(
        goal="T1 \x1b]0;pwned\x07[bold]x[/bold]",
        steps=[Step(id="1", description="d", success_check=Check(kind="file_exists", path="n"))],
        status="running",
    )
    plan.steps[0].result = "[bold]unclosed [/nope] \x1b[2J"
    save_plan(plan, tmp_path / "plan.json")
    assert main(["steps", str(tmp_path / "plan.json")]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "[bold]unclosed [/nope] \\x1b[2J" in out
    assert "T1 \\x1b]0;pwned\\x07[bold]x[/bold]" in out
