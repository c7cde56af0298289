"""The direct-API executor hears why its finished work came back: the reviewer's no revises its
plan (one more planner call, new steps), and the refused commit is never reviewed again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.implement.api import ApiImplementer
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunSettings
from agent_harness.testing.model_server import ModelServer, ScriptedCompletion, ScriptedResponder

from .conftest import Harness

pytestmark = pytest.mark.integration

NO = "notes/one.txt must say why, not only what"


def brain(body: object) -> ScriptedCompletion:
    text = json.dumps(body)
    if "You plan one work item" in text:
        path = "notes/why.txt" if NO in text else "notes/one.txt"
        first = 2 if NO in text else 1
        step = {
            "id": str(first),
            "description": f"write {path}",
            "check": {"kind": "file_exists", "path": path},
        }
        return ScriptedCompletion(text=json.dumps({"steps": [step]}))
    wanted = text.split("Your step (", 1)[1].split("\\n", 1)[0]
    path = wanted.rsplit(" ", 1)[-1]
    return ScriptedCompletion(text=f"{path}\n```\nwritten by the executor\n```\n")


def executor_pipeline(h: Harness, models: ModelServer) -> Pipeline:
    """A run of "### T1: One note" whose implementer is the direct-API executor on `models`."""
    route = Route("gpt-exec", f"{models.url}/v1", "anthropic", "openai", "TEST_EXEC_KEY")
    env = dict(h.env, TEST_EXEC_KEY="sk-exec")
    client = ModelClient({"planner": route, "implementer": route}, env=env, parking=h.store)
    settings = RunSettings(checks=[], lease_s=30.0, idle_poll_s=0.02)
    pipeline = h.pipeline("### T1: One note\n", settings=settings)
    pipeline.implementer = ApiImplementer(
        client, vendor="anthropic", name="executor:gpt-exec", budgets=_budgets()
    )
    return pipeline


def test_a_reviewers_no_revises_the_executors_plan_and_the_new_commit_is_reviewed(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    h = harness
    refusal = {"approved": False, "reasons": [NO], "permanent": False}
    h.model.enqueue_first(ScriptedCompletion(text=json.dumps(refusal)))
    with ModelServer([ScriptedResponder(brain)]) as models:
        [item] = executor_pipeline(h, models).run().items
        planner = [r for r in models.requests if "You plan one work item" in json.dumps(r.body)]
    assert item.state == "pr_open" and item.attempts == 2, item.reason
    assert len(planner) == 2 and NO in json.dumps(planner[1].body)
    reviewed = [e.payload.sha for e in h.store.all_events(item="T1") if e.kind == "review"]
    assert len(reviewed) == 2 and reviewed[0] != reviewed[1]  # each commit reviewed once

    # Every step is a typed event of the item, not an `agent_state` line.
    events = h.store.all_events(item="T1")
    kinds = [e.kind for e in events]
    assert "agent_state" not in kinds
    steps = [e.payload for e in events if e.kind.startswith("executor.")]
    assert [p.kind for p in steps] == [
        "executor.plan", "executor.step_started", "executor.step_done", "executor.done",
        "executor.resumed", "executor.replan", "executor.step_started", "executor.step_done",
        "executor.done",
    ]  # fmt: skip
    replan = steps[5]
    assert replan.sent_back is not None and NO in replan.sent_back  # type: ignore[attr-defined]

    # attach: no terminal to attach to, and the step log instead.
    db = str(h.tmp / "harness.sqlite")
    assert main(["attach", "T1", "--db", db]) == 0
    shown = capsys.readouterr()
    assert "direct-API executor (executor:gpt-exec): it has no terminal" in shown.err
    assert shown.out.splitlines() == [
        "planned 1 steps: 1. write notes/one.txt",
        "step 1: try 1",
        "step 1: done: edited notes/one.txt (rung edit-blocks); notes/one.txt exists",
        "done: all 1 steps",
        "resumed the saved plan (1 steps done)",
        "revision 1 (the work was sent back): 2. write notes/why.txt",
        "step 2: try 1",
        "step 2: done: edited notes/why.txt (rung edit-blocks); notes/why.txt exists",
        "done: all 2 steps",
    ]


def _budgets() -> object:
    from agent_harness.implement.executor import Budgets

    return Budgets(min_steps=1)


def test_the_executors_step_check_is_written_down_where_the_next_attempt_looks(
    harness: Harness, tmp_path: Path
) -> None:
    # The executor's step checks ran on a pipe with no note of their group: a run killed
    # during one left it working in the worktree, and the item's next attempt knew nothing of it.
    h = harness
    seen = tmp_path / "seen.json"

    def plan_with_a_command(body: object) -> ScriptedCompletion:
        text = json.dumps(body)
        if "You plan one work item" in text:
            group = pipeline.parts.item_dir("T1") / "check.group"  # made below
            check = {"kind": "command", "command": f"cat '{group}' > '{seen}'"}
            step = {"id": "1", "description": "write notes/one.txt", "check": check}
            return ScriptedCompletion(text=json.dumps({"steps": [step]}))
        return ScriptedCompletion(text="notes/one.txt\n```\nwritten by the executor\n```\n")

    with ModelServer([ScriptedResponder(plan_with_a_command)]) as models:
        pipeline = executor_pipeline(h, models)
        [item] = pipeline.run().items
    assert item.state == "pr_open", item.reason
    # While the check ran, the item's check.group named its process group, the file the
    # next attempt's `stop_leftover` reads; once the check ended, the note was gone.
    record = json.loads(seen.read_text())
    assert record["pgid"] > 1 and record["start"] is not None
    assert not (pipeline.parts.item_dir("T1") / "check.group").exists()
