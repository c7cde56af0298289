"""JSON written by someone else (an issue body, an agent's output, a plan file, an environment
variable) can hold a number too long for Python to read or nesting too deep for its decoder.
Both raise something other than a JSON syntax error; each reader treats them as unreadable
input, never as a crash. Python's reader also takes what JSON has not: `NaN`, `Infinity` and
`1e400` (infinite) are unreadable too. Half a surrogate pair (`"\\ud800"`, which no UTF-8 text
can hold, so whatever stores or prints it later failed) is read as U+FFFD: agents' CLIs write
them when they cut text mid-character, and the rest of such a line must not be lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.agents.output import json_events, read_cli_report, usage_of
from agent_harness.config import load_settings
from agent_harness.errors import ConfigError, InputError
from agent_harness.implement.plan_answer import PlanAnswerInvalid, parse_plan_answer
from agent_harness.plan.backlog import load_plan
from agent_harness.plan.markdown import parse_plan
from agent_harness.testing.tracker import MemoryTracker
from agent_harness.tracker.markers import DamagedMarker, read_marker, read_pull_marker
from agent_harness.tracker.protocol import IssueDraft
from agent_harness.tracker.sync import sync_plan

pytestmark = pytest.mark.unit

LONG_NUMBER = "9" * 5000  # past Python's 4300-digit limit for reading an integer
DEEP = "[" * 5000  # past the decoder's recursion limit
SURROGATE = '"\\ud800"'  # the six characters of an escape JSON allows and UTF-8 cannot hold


@pytest.mark.parametrize(
    "inside",
    [f'"n": {LONG_NUMBER}', f'"n": {DEEP}', '"n": NaN', '"n": -Infinity', '"n": 1e400'],
)
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


@pytest.mark.parametrize("raw", [f"[{LONG_NUMBER}]", DEEP, "[-1e400]"])
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


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "1e400"])
def test_a_plan_file_with_a_number_json_has_not_is_an_input_error(
    tmp_path: Path, number: str
) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(f'{{"tasks": [{{"id": 8, "title": "t", "priority": {number}}}]}}')
    with pytest.raises(InputError, match=r"tasks\.json is not valid JSON \(.* number"):
        load_plan(path)


def test_half_a_surrogate_pair_in_a_plan_file_reads_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    # It was read as it came, and `agent-harness plan` then failed printing the title: an
    # internal error (exit 70).
    path = tmp_path / "tasks.json"
    path.write_text(f'{{"tasks": [{{"id": 8, "title": "Fix {SURROGATE[1:-1]} now"}}]}}')
    [item] = load_plan(path).items
    assert item.title == "Fix \ufffd now"
    item.title.encode("utf-8")  # whatever stores or prints it can


def test_a_whole_pair_of_surrogates_is_an_ordinary_character(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text('{"tasks": [{"id": 8, "title": "Fix \\ud83d\\ude00", "dependencies": []}]}')
    assert [item.title for item in load_plan(path).items] == ["Fix \U0001f600"]


@pytest.mark.parametrize(
    "line",
    [
        '{"type": "result", "n": ' + LONG_NUMBER + "}",
        '{"a": ' + DEEP,
        '{"type": "result", "total_cost_usd": NaN}',  # would pass every budget check
        '{"type": "result", "total_cost_usd": -1e400}',  # minus infinity: the same
    ],
)
def test_agent_output_lines_that_cannot_be_read_are_skipped(line: str) -> None:
    last = '{"type": "result", "is_error": true, "result": "out of credit"}'
    output = f"{line}\n{last}\n"
    assert [event["type"] for event in json_events(output)] == ["result"]
    assert read_cli_report(output).error == "out of credit"


def test_a_planner_answer_nested_too_deep_is_no_plan_not_a_crash() -> None:
    with pytest.raises(PlanAnswerInvalid):
        parse_plan_answer(f"Here is my plan:\n```json\n{DEEP}\n```\n{DEEP * 20}")


def test_a_cli_report_cut_mid_character_keeps_its_cost_and_tokens() -> None:
    # Claude Code (Node's JSON.stringify) writes half a pair as an escape when it cuts text;
    # refusing the line would lose the run's cost and tokens, and its error.
    line = (
        '{"type": "result", "is_error": true, "result": "cut here \\ud83d",'
        ' "total_cost_usd": 1.25, "usage": {"input_tokens": 10, "output_tokens": 5}}'
    )
    report = read_cli_report(line + "\n")
    assert report.error == "cut here \ufffd"
    assert usage_of(line + "\n") == (10, 5, 1.25)


@pytest.mark.parametrize("cost", ["-5", "1e308", "true", '"12.5"', "-0.01"])
def test_a_reported_cost_no_run_can_cost_is_unknown_never_counted(cost: str) -> None:
    # A negative figure gave budget back; 1e308 refused every later call of the project for good.
    claude = f'{{"type": "result", "total_cost_usd": {cost}}}\n'
    assert usage_of(claude) == (None, None, None)
    # opencode adds its steps' prices up: one that is no price leaves the sum unknown.
    steps = (
        '{"type": "step_finish", "part": {"cost": 0.25, "tokens": {"input": 10, "output": 2}}}\n'
        f'{{"type": "step_finish", "part": {{"cost": {cost}}}}}\n'
    )
    assert usage_of(steps) == (10, 2, None)
    fine = '{"type": "result", "total_cost_usd": 0}\n'
    assert usage_of(fine) == (None, None, 0.0)
