"""The pipeline's stages over in-package fakes: no process, no socket, a SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_harness.pipeline.parts import RunParts
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunSettings
from agent_harness.plan.markdown import parse_plan
from agent_harness.plan.model import Plan
from agent_harness.queue import items, leases
from agent_harness.queue.leases import Lease
from agent_harness.store.database import Store, open_store
from agent_harness.store.events import Payload
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.scripted import (
    ScriptedChecks,
    ScriptedImplementer,
    ScriptedReviewer,
    Step,
    verdict,
)
from agent_harness.testing.tracker import MemoryTracker
from agent_harness.testing.workspace import MemoryWorkspace

PLAN = "### T1: Count words\nMake it.\n\ncheck: `python -m unittest`\n"


@dataclass
class Rig:
    tmp: Path
    store: Store
    clock: FakeClock
    tracker: MemoryTracker = field(default_factory=MemoryTracker)
    implementer: ScriptedImplementer = field(
        default_factory=lambda: ScriptedImplementer([Step(files={"words.py": "N = 1\n"})])
    )
    reviewer: ScriptedReviewer = field(default_factory=lambda: ScriptedReviewer([verdict(True)]))
    checks: ScriptedChecks = field(default_factory=ScriptedChecks)
    settings: RunSettings = field(
        default_factory=lambda: RunSettings(checks=["pytest -q"], lease_s=60.0)
    )
    env: dict[str, str] = field(default_factory=dict)
    heard: list[tuple[str, str, Payload]] = field(default_factory=list)
    workspace: MemoryWorkspace | None = None

    def __post_init__(self) -> None:
        # The programs the scripted checks name exist on the checks' PATH, as the run's setup
        # looks them up there (it never starts them: the checks are scripted).
        tools = self.tmp / "bin"
        tools.mkdir(exist_ok=True)
        for name in ("pytest", "python"):
            (tools / name).write_text("#!/bin/sh\nexit 0\n")
            (tools / name).chmod(0o755)
        self.env.setdefault("PATH", str(tools))
        self.env.setdefault("LANG", "C")

    def parts(self) -> RunParts:
        if self.workspace is None:
            self.workspace = MemoryWorkspace(self.tmp / "repo")
        return RunParts(
            plan_key="PLAN",
            tracker=self.tracker,
            store=self.store,
            repo=self.workspace,
            implementer=self.implementer,
            reviewer=self.reviewer,
            settings=self.settings,
            state_dir=self.tmp / "state",
            env=self.env,
            observer=lambda kind, item, payload: self.heard.append((kind, item, payload)),
            check_runner=self.checks,
            clock=self.clock,
        )

    def pipeline(self, plan: Plan | str, plan_key: str = "PLAN") -> Pipeline:
        """A whole run's pipeline over this rig's fakes, polling fast, its workers `test/...`."""
        self.settings.idle_poll_s = 0.01
        self.settings.worker_prefix = "test"
        parts = self.parts()
        return Pipeline(
            plan=parse_plan(plan) if isinstance(plan, str) else plan,
            plan_key=plan_key,
            tracker=self.tracker,
            store=self.store,
            repo=parts.repo,
            implementer=self.implementer,
            reviewer=self.reviewer,
            settings=self.settings,
            state_dir=self.tmp / "state",
            env=self.env,
            clock=self.clock,
            check_runner=self.checks,
        )

    def claim(self, plan: Plan | str = PLAN, item: str = "T1") -> tuple[Plan, Lease]:
        plan = parse_plan(plan) if isinstance(plan, str) else plan
        project = f"{self.tracker.repo}:PLAN"
        items.enqueue(self.store, project, plan.items, max_attempts=self.settings.max_attempts)
        lease = leases.claim_next(self.store, project, "w1", self.settings.lease_s)
        assert lease is not None and lease.item_id == item
        return plan, lease

    def kinds(self, item: str = "T1") -> list[str]:
        return [e.kind for e in self.store.all_events(project="octo/app:PLAN", item=item)]

    def state(self, item: str = "T1") -> Any:
        return items.get_item(self.store, "octo/app:PLAN", item)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    clock = FakeClock()
    store = open_store(str(tmp_path / "harness.sqlite"), clock=clock)
    try:
        yield Rig(tmp_path, store, clock)
    finally:
        store.close()
