"""Fixtures for the executor: a real git worktree and the real model client over loopback HTTP.

The planner is served in Anthropic's format and the implementer in OpenAI's, by one scripted
server; requests are told apart by the model they name. Backoff sleeps advance a fake clock.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_harness.implement.executor import Budgets, ExecutionResult, Executor
from agent_harness.models.client import ModelClient, RetryPolicy
from agent_harness.models.parking import MemoryParking
from agent_harness.models.routes import Route
from agent_harness.plan.model import WorkItem
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.model_server import (
    ModelServer,
    RecordedRequest,
    ScriptedCompletion,
)

KEY = "sk-test-executor-0123456789"
PLANNER_MODEL = "planner-model"
IMPLEMENTER_MODEL = "implementer-model"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def step(
    ident: str, description: str, check: Any, depends_on: list[str] | None = None
) -> dict[str, Any]:
    raw: dict[str, Any] = {"id": ident, "description": description, "check": check}
    if depends_on is not None:
        raw["depends_on"] = depends_on
    return raw


def exists(path: str) -> dict[str, str]:
    return {"kind": "file_exists", "path": path}


def matches(path: str, pattern: str) -> dict[str, str]:
    return {"kind": "regex", "path": path, "pattern": pattern}


def plan_answer(*steps: dict[str, Any]) -> ScriptedCompletion:
    """A planner answer the way models write them: prose, then fenced JSON."""
    body = json.dumps({"steps": list(steps)}, indent=2)
    return ScriptedCompletion(text=f"Here is the plan.\n\n```json\n{body}\n```\n")


def whole_file(path: str, content: str) -> ScriptedCompletion:
    return ScriptedCompletion(text=f"{path}\n```\n{content}```\n")


@dataclass
class Rig:
    server: ModelServer
    client: ModelClient
    worktree: Path
    state: Path
    item: WorkItem
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def plan_path(self) -> Path:
        return self.state / "plan.json"

    def executor(self, **budgets: Any) -> Executor:
        return Executor(
            self.client,
            budgets=Budgets(**budgets),
            events=lambda kind, payload: self.events.append((kind, payload)),
            worker="w1",
        )

    def run(self, resume: bool = False, **budgets: Any) -> ExecutionResult:
        return self.executor(**budgets).execute(
            self.item, self.worktree, self.plan_path, resume=resume
        )

    def requests(self, model: str) -> list[RecordedRequest]:
        return [r for r in self.server.requests if r.body.get("model") == model]

    @property
    def planner_requests(self) -> list[RecordedRequest]:
        return self.requests(PLANNER_MODEL)

    @property
    def implementer_requests(self) -> list[RecordedRequest]:
        return self.requests(IMPLEMENTER_MODEL)

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    git(origin, "config", "user.email", "test@example.invalid")
    git(origin, "config", "user.name", "test")
    (origin / "README.md").write_text("# demo\n")
    (origin / "app.py").write_text("def greet():\n    return 'hi'\n")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "start")
    worktree = tmp_path / "wt"
    git(origin, "worktree", "add", "-q", "-b", "item-T1", str(worktree))
    item = WorkItem(
        id="T1",
        title="Add a farewell",
        body="Add a farewell function next to greet.",
        success_check="app.py has farewell()",
        line=1,
        form="heading",
    )
    fake = FakeClock(start=1_767_225_600.0)
    with ModelServer(api_key=KEY) as server:
        routes = {
            "planner": Route(PLANNER_MODEL, server.url, "anthropic", "anthropic", "ANTH_KEY"),
            "implementer": Route(
                IMPLEMENTER_MODEL, server.url + "/v1", "openai", "openai", "OAI_KEY"
            ),
        }
        client = ModelClient(
            routes,
            env={"ANTH_KEY": KEY, "OAI_KEY": KEY},
            parking=MemoryParking(fake),
            clock=fake,
            sleep=fake.sleep,
            rng=random.Random(3),
            policy=RetryPolicy(max_attempts=2),
        )
        try:
            yield Rig(server, client, worktree, tmp_path / "state", item)
        finally:
            client.close()
