"""The direct-API executor hears why its finished work came back: the reviewer's no revises its
plan (one more planner call, new steps), and the refused commit is never reviewed again."""

from __future__ import annotations

import json

import pytest

from agent_harness.implement.api import ApiImplementer
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
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


def test_a_reviewers_no_revises_the_executors_plan_and_the_new_commit_is_reviewed(
    harness: Harness,
) -> None:
    h = harness
    refusal = {"approved": False, "reasons": [NO], "permanent": False}
    h.model.enqueue_first(ScriptedCompletion(text=json.dumps(refusal)))
    with ModelServer([ScriptedResponder(brain)]) as models:
        route = Route("gpt-exec", f"{models.url}/v1", "anthropic", "openai", "TEST_EXEC_KEY")
        env = dict(h.env, TEST_EXEC_KEY="sk-exec")
        client = ModelClient({"planner": route, "implementer": route}, env=env, parking=h.store)
        settings = RunSettings(checks=[], lease_s=30.0, idle_poll_s=0.02)
        pipeline = h.pipeline("### T1: One note\n", settings=settings)
        pipeline.implementer = ApiImplementer(
            client,
            vendor="anthropic",
            name="executor:gpt-exec",
            budgets=_budgets(),
        )
        [item] = pipeline.run().items
        planner = [r for r in models.requests if "You plan one work item" in json.dumps(r.body)]
    assert item.state == "pr_open" and item.attempts == 2, item.reason
    assert len(planner) == 2 and NO in json.dumps(planner[1].body)
    reviewed = [e.payload.sha for e in h.store.all_events(item="T1") if e.kind == "review"]
    assert len(reviewed) == 2 and reviewed[0] != reviewed[1]  # each commit reviewed once


def _budgets() -> object:
    from agent_harness.implement.executor import Budgets

    return Budgets(min_steps=1)
