"""Real agent CLIs from npm, a real forge and clone, and scripted providers on loopback."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.presets import PRESETS
from agent_harness.demo.run import seed_repository
from agent_harness.git.worktrees import WorkRepo
from agent_harness.implement.cli_agent import CliImplementer
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunSettings
from agent_harness.plan.markdown import parse_plan
from agent_harness.review.agent import CliReviewer
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.store.database import Store, open_store
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.testing.npm_agents import NpmUnavailable, install_pinned
from agent_harness.testing.pip_agents import PipUnavailable
from agent_harness.testing.pip_agents import install_pinned as install_pip_pinned
from agent_harness.testing.provider import Say, ScriptedProvider
from agent_harness.tracker.github import GitHubTracker

ROOT = Path(__file__).resolve().parents[2]
REPO = "octo/tally"
# A slug Codex knows: for an unknown one it offers no apply_patch tool (only exec_command). Its
# default model gets its tools another way ("code mode"), tried in its own test.
CODEX_MODEL = "gpt-5.5"


# The model each CLI is told to use: Codex's (see CODEX_MODEL), Gemini CLI's (its default,
# "auto", first asks a router model for a JSON score), opencode's provider/model, aider's.
MODELS = {
    "codex": CODEX_MODEL,
    "gemini": "gemini-2.5-flash",
    "opencode": "claude-sonnet-4-5",
    "aider": "gpt-4o",
}


@pytest.fixture(scope="session")
def agent_bins() -> list[Path]:
    try:
        return install_pinned(("claude", "codex"))
    except NpmUnavailable as exc:
        pytest.skip(f"npm registry unreachable, so the real agent CLIs are absent: {exc}")


@pytest.fixture(scope="session")
def other_agent_bins(agent_bins: list[Path]) -> list[Path]:
    """Gemini CLI and opencode from npm, aider from PyPI, beside Claude Code and Codex."""
    try:
        npm = install_pinned(("gemini", "opencode"))
    except NpmUnavailable as exc:
        pytest.skip(f"npm registry unreachable, so the real agent CLIs are absent: {exc}")
    try:
        pip = install_pip_pinned(("aider",))
    except PipUnavailable as exc:
        pytest.skip(f"aider is absent (PyPI unreachable, or its install failed): {exc}")
    return [*agent_bins, *npm, *pip]


@dataclass
class Rig:
    tmp: Path
    forge: RunningForge
    anthropic: ScriptedProvider
    openai: ScriptedProvider
    store: Store
    work: Path
    env: dict[str, str]
    google: ScriptedProvider | None = None
    timeout_s: float = 60.0
    pipelines: list[Pipeline] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return self.tmp / "state"

    def agent(self, name: str, *, reviewer: bool = False, its_default_model: bool = False) -> Any:
        """A CLI implementer or reviewer; Codex gets `CODEX_MODEL` unless `its_default_model`."""
        host = HeadlessHost(self.state_dir / "sessions")
        model = None if its_default_model else MODELS.get(name)
        timeout = self.timeout_s
        if reviewer:
            return CliReviewer(
                host, PRESETS[name], self.env, self.state_dir, timeout_s=timeout, poll_s=0.05,
                model=model,
            )  # fmt: skip
        return CliImplementer(
            host, PRESETS[name], self.env, timeout_s=timeout, idle_s=timeout, poll_s=0.05,
            model=model,
        )  # fmt: skip

    def pipeline(
        self,
        plan: str,
        *,
        implementer: Any,
        reviewer: Any,
        max_attempts: int = 3,
        workers: int = 1,
    ) -> Pipeline:
        pipeline = Pipeline(
            plan=parse_plan(plan, source="PLAN.md"),
            plan_key="PLAN",
            tracker=GitHubTracker(REPO, TOKEN, self.forge.server.api_url, write_spacing_s=0.0),
            store=self.store,
            repo=WorkRepo(self.work, self.state_dir),
            implementer=implementer,
            reviewer=reviewer,
            settings=RunSettings(
                checks=[],
                check_timeout_s=30.0,
                lease_s=60.0,
                workers=workers,
                idle_poll_s=0.02,
                max_attempts=max_attempts,
            ),
            state_dir=self.state_dir,
            env=self.env,
        )
        self.pipelines.append(pipeline)
        return pipeline

    def pulls(self) -> list[Any]:
        return list(self.forge.github.get_repo(REPO).get_pulls(state="all"))

    def events(self, pipeline: Pipeline, item: str, kind: str) -> list[dict[str, Any]]:
        return [
            e.payload.as_dict()
            for e in self.store.all_events(project=pipeline.project, item=item)
            if e.kind == kind
        ]


@pytest.fixture
def rig(tmp_path: Path, agent_bins: list[Path]) -> Iterator[Rig]:
    yield from _rig(tmp_path, agent_bins)


@pytest.fixture
def other_rig(tmp_path: Path, other_agent_bins: list[Path]) -> Iterator[Rig]:
    """The rig with Gemini CLI, opencode and aider on PATH, and a Gemini endpoint."""
    with ScriptedProvider(lambda _: Say("No scenario set.")) as google:
        for rig in _rig(tmp_path, other_agent_bins):
            rig.google = google
            rig.env["GEMINI_API_KEY"] = "gemini-scripted-key"
            rig.env["GOOGLE_GEMINI_BASE_URL"] = google.url
            rig.timeout_s = 240.0  # opencode alone takes half a minute to start on a busy box
            yield rig


def _rig(tmp_path: Path, agent_bins: list[Path]) -> Iterator[Rig]:
    with (
        running_forge(tmp_path / "forge") as forge,
        ScriptedProvider(lambda _: Say("No scenario set.")) as anthropic,
        ScriptedProvider(lambda _: Say("No scenario set.")) as openai,
    ):
        forge.forge.create_repo("octo", "tally", auto_init=False)
        work = tmp_path / "clones" / "tally"
        work.parent.mkdir()
        seed_repository(ROOT / "examples" / "project", forge.forge.clone_url("octo", "tally"), work)
        path = [*map(str, agent_bins), str(Path(sys.executable).parent), os.environ["PATH"]]
        (tmp_path / "machine-tmp").mkdir()
        env = {
            "TMPDIR": str(tmp_path / "machine-tmp"),  # the machine's; agents leave nothing here
            "PATH": os.pathsep.join(path),
            "HOME": str(tmp_path / "user-home"),  # the user's; agents must not write here
            "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": anthropic.url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted",
            "OPENAI_BASE_URL": f"{openai.url}/v1",
            "OPENAI_API_KEY": "sk-scripted",
            "GH_TOKEN": "ghp_must_never_reach_an_agent",
        }
        store = open_store(f"sqlite:///{tmp_path / 'harness.sqlite'}")
        rig = Rig(tmp_path, forge, anthropic, openai, store, work, env)
        try:
            yield rig
        finally:
            for pipeline in rig.pipelines:
                close = getattr(pipeline.tracker, "close", None)
                if close:
                    close()
            store.close()
