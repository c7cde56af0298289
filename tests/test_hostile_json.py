"""JSON written by someone else (an issue body, an agent's output, a plan file, an environment
variable) can hold a number too long for Python to read or nesting too deep for its decoder.
Both raise something other than a JSON syntax error; each reader treats them as unreadable
input, never as a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.agents.output import json_events, read_cli_report
from agent_harness.config import load_settings
from agent_harness.errors import ConfigError, InputError
from agent_harness.implement.plan_answer import PlanAnswerInvalid, parse_plan_answer
from agent_harness.plan.backlog import load_plan
from agent_harness.plan.markdown import parse_plan
from agent_harness.testing.tracker import MemoryTracker
from agent_harness.tracker.protocol import IssueDraft
from agent_harness.tracker.sync import DamagedMarker, read_marker, read_pull_marker, sync_plan

pytestmark = pytest.mark.unit

LONG_NUMBER = "9" * 5000  # past Python's 4300-digit limit for reading an integer
DEEP = "[" * 5000  # past the decoder's recursion limit


@pytest.mark.parametrize("inside", [f'"n": {LONG_NUMBER}', f'"n": {DEEP}'])
def test_a_hostile_marker_in_an_issue_is_damaged_not_a_crash(inside: str) -> None:
    body = f'Hello\n<!-- agent-harness {{"id": "T1", "plan": "PLAN", "hash": "h", {inside}}} -->'
    with pytest.raises(DamagedMarker):
        read_marker(body)
    assert read_pull_marker(f'<!-- agent-harness-pr {{"id": "T1", {inside}}} -->') is None


def test_a_sync_reports_a_hostile_issue_and_syncs_the_rest() -> None:
    tracker = MemoryTracker()
    hostile = f'<!-- agent-harness {{"id": "T1", "plan": "PLAN", "hash": "h", "n": {DEEP}}} -->'
    tracker.create_issue(IssueDraft("spam", hostile, (), None))
    plan = parse_plan("### T1: First\nDo it.\n", source="PLAN.md")

    report = sync_plan(plan, tracker, "PLAN")

    assert [(c.id, c.number) for c in report.created] == [("T1", 2)]
    assert report.problems == [
        "issue #1: the agent-harness marker is not valid JSON; left alone, fix it by hand"
    ]


@pytest.mark.parametrize("raw", [f"[{LONG_NUMBER}]", DEEP])
def test_an_environment_list_that_cannot_be_read_is_a_config_error(
    raw: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"^env AGENT_HARNESS_CHECKS__COMMANDS: "):
        load_settings(tmp_path, env={"AGENT_HARNESS_CHECKS__COMMANDS": raw})


def test_a_plan_file_with_a_number_too_long_to_read_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(f'{{"tasks": [{{"id": 8, "title": "b", "dependencies": [{LONG_NUMBER}]}}]}}')
    with pytest.raises(InputError, match=r"^.*tasks\.json is not valid JSON \(Exceeds the limit"):
        load_plan(path)


@pytest.mark.parametrize("line", ['{"type": "result", "n": ' + LONG_NUMBER + "}", '{"a": ' + DEEP])
def test_agent_output_lines_that_cannot_be_read_are_skipped(line: str) -> None:
    last = '{"type": "result", "is_error": true, "result": "out of credit"}'
    output = f"{line}\n{last}\n"
    assert [event["type"] for event in json_events(output)] == ["result"]
    assert read_cli_report(output).error == "out of credit"


def test_a_planner_answer_nested_too_deep_is_no_plan_not_a_crash() -> None:
    with pytest.raises(PlanAnswerInvalid):
        parse_plan_answer(f"Here is my plan:\n```json\n{DEEP}\n```\n{DEEP * 20}")
