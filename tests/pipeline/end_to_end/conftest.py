"""A real forge, a real clone, a scripted reviewer on loopback, and a pipeline builder."""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import preset_for
from agent_harness.demo.rules import review_rules
from agent_harness.demo.run import seed_repository
from agent_harness.git.worktrees import WorkRepo
from agent_harness.implement.cli_agent import CliImplementer
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunSettings
from agent_harness.plan.markdown import parse_plan, parse_plan_file
from agent_harness.plan.model import Plan
from agent_harness.review.model import ModelReviewer
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.sessions.protocol import SessionHost
from agent_harness.store.database import Store, open_store
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.tracker.github import GitHubTracker

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
REPO = "octo/tally"
KEY_ENV = "TEST_REVIEWER_KEY"


@dataclass
class Harness:
    tmp: Path
    forge: RunningForge
    model: ModelServer
    store: Store
    work: Path
    env: dict[str, str]
    pipelines: list[Pipeline] = field(default_factory=list)
    # Tests move the harness's clock forward instead of sleeping. It starts at the time of
    # the run, not at a fixed instant, because the CLI and the forge read the same database
    # and repositories on the real clock: leases and events must not look a year ahead.
    clock: FakeClock = field(default_factory=lambda: FakeClock(start=time.time()))

    @property
    def state_dir(self) -> Path:
        return self.tmp / "state"

    def tracker(self) -> GitHubTracker:
        return GitHubTracker(REPO, TOKEN, self.forge.server.api_url, write_spacing_s=0.0)

    def agent_command(self) -> str:
        return shlex.join([sys.executable, str(EXAMPLES / "agent" / "tally_agent.py")]) + (
            " --prompt-file {prompt_file}"
        )

    def pipeline(
        self,
        plan: Plan | str | None = None,
        *,
        agent: str | None = None,
        host: SessionHost | None = None,
        settings: RunSettings | None = None,
        reviewer_vendor: str = "openai",
        observer: Callable[[str, str, dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> Pipeline:
        if plan is None:
            plan = parse_plan_file(EXAMPLES / "PLAN.md")
        elif isinstance(plan, str):
            plan = parse_plan(plan, source="PLAN.md")
        implementer = CliImplementer(
            host or HeadlessHost(self.state_dir / "sessions"),
            preset_for(agent or self.agent_command()),
            self.env,
            timeout_s=30.0,
            idle_s=30.0,
            poll_s=0.05,
        )
        client = ModelClient(
            {
                "reviewer": Route(
                    "gpt-test", f"{self.model.url}/v1", reviewer_vendor, "openai", KEY_ENV
                )
            },
            env=self.env,
            parking=self.store,
            clock=self.clock,
        )
        pipeline = Pipeline(
            plan=plan,
            plan_key="PLAN",
            tracker=self.tracker(),
            store=self.store,
            repo=WorkRepo(self.work, self.state_dir),
            implementer=implementer,
            reviewer=ModelReviewer(client, worker="test"),
            settings=settings
            or RunSettings(
                checks=["python -m unittest"],
                check_timeout_s=30.0,
                lease_s=30.0,
                workers=1,
                idle_poll_s=0.02,
            ),
            state_dir=self.state_dir,
            env=self.env,
            observer=observer,
            clock=clock,
        )
        self.pipelines.append(pipeline)
        return pipeline

    def reviews(self) -> list[Any]:
        return [r for r in self.model.requests if r.path.endswith("/chat/completions")]

    def pulls(self) -> list[Any]:
        return list(self.forge.github.get_repo(REPO).get_pulls(state="all"))

    def merge(self, number: int) -> None:
        self.forge.github.get_repo(REPO).get_pull(number).merge(merge_method="merge")


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    with (
        running_forge(tmp_path / "forge") as forge,
        ModelServer([ScriptedResponder(review_rules)]) as model,
    ):
        forge.forge.create_repo("octo", "tally", auto_init=False)
        work = tmp_path / "clones" / "tally"
        work.parent.mkdir()
        seed_repository(EXAMPLES / "project", forge.forge.clone_url("octo", "tally"), work)
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env[KEY_ENV] = "sk-test-reviewer"
        env["GH_TOKEN"] = "ghp_must_never_reach_an_agent"
        h = Harness(tmp_path, forge, model, None, work, env)  # type: ignore[arg-type]
        store = open_store(f"sqlite:///{tmp_path / 'harness.sqlite'}", clock=h.clock)
        h.store = store
        try:
            yield h
        finally:
            for pipeline in h.pipelines:
                close = getattr(pipeline.tracker, "close", None)
                if close:
                    close()
            store.close()


def use_the_cli(h: Harness, where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`agent-harness` run in-process from `where` reaches this forge and model server, with
    sessions headless."""
    monkeypatch.chdir(where)
    monkeypatch.setenv("GH_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", h.forge.server.api_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{h.model.url}/v1")
    monkeypatch.setenv("AGENT_HARNESS_SESSIONS__HOST", "headless")
