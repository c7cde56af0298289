"""The offline main job: the example plan taken through the whole loop on an embedded forge.

Everything runs on this machine with no account and no network: the forge on loopback holds
the repository and issues, the example agent (a real program in examples/agent/) works in
terminal sessions, a scripted reviewer answers over OpenAI's wire format, and the demo plays the
person who merges approved pull requests. Re-running the sync shows the idempotence the
product promises: the second pass writes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_harness.demo.rules import review_rules
from agent_harness.errors import HarnessError
from agent_harness.pipeline.run import Observer, RunReport
from agent_harness.plan.backlog import load_plan
from agent_harness.secrets.process import process_env
from agent_harness.tracker.sync import SyncReport, sync_plan

DEMO_REPO = "demo/tally"


PLAN_KEY = "PLAN"


STAMP = ".agent-harness-demo"


REVIEWER_KEY_ENV = "AGENT_HARNESS_DEMO_REVIEWER_KEY"


@dataclass
class DemoReport:
    """What the demo did, for the CLI to show."""

    workdir: Path
    api_url: str = ""
    repo: str = DEMO_REPO
    host: str = ""
    syncs: list[SyncReport] = field(default_factory=list)
    passes: list[RunReport] = field(default_factory=list)
    merged: list[tuple[str, int]] = field(default_factory=list)
    reviews: int = 0

    def final_items(self) -> list[dict[str, Any]]:
        if not self.passes:
            return []
        latest: dict[str, dict[str, Any]] = {}
        for report in self.passes:
            for item in report.items:
                row = vars(item).copy()
                previous = latest.get(item.id)
                if previous and previous.get("pr_url") and not row.get("pr_url"):
                    row["pr_url"], row["pr_number"] = previous["pr_url"], previous["pr_number"]
                latest[item.id] = row
        merged = {item_id for item_id, _ in self.merged}
        for item_id, row in latest.items():
            if item_id in merged:
                row["state"] = "merged"
        return list(latest.values())


def examples_dir() -> Path:
    """The examples/ folder of a source checkout (where the demo's plan and project live)."""
    here = Path(__file__).resolve().parents[2] / "examples"
    if not (here / "PLAN.md").is_file() or not (here / "project").is_dir():
        raise HarnessError(
            "examples/ not found beside the package: run the demo from a source checkout"
        )
    return here


def prepare_workdir(workdir: Path) -> None:
    """Start from a clean demo directory, deleting only one the demo itself made."""
    if workdir.exists():
        if not (workdir / STAMP).is_file():
            raise HarnessError(
                f"{workdir} exists and was not made by the demo; choose another --dir"
            )
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / STAMP).write_text("made by agent-harness demo; safe to delete\n", encoding="utf-8")


def _git(cwd: Path, *args: str) -> None:
    done = subprocess.run(
        ["git", "-c", "user.name=demo", "-c", "user.email=demo@localhost", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise HarnessError(f"demo: git {args[0]} failed: {last}")


def seed_repository(project: Path, clone_url: str, work: Path) -> None:
    """Push the example project as the repository's first commit, and clone it as --work."""
    seed = work.parent / "seed"
    shutil.copytree(project, seed)
    _git(seed, "init", "--quiet", "--initial-branch=main")
    _git(seed, "add", "--all")
    _git(seed, "commit", "--quiet", "-m", "tally: project skeleton")
    _git(seed, "push", "--quiet", clone_url, "main:main")
    shutil.rmtree(seed)
    _git(work.parent, "clone", "--quiet", clone_url, str(work))


def run_demo(
    workdir: Path,
    plan_path: Path | None = None,
    step: Callable[[str], None] = lambda _message: None,
    observer: Observer | None = None,
    max_passes: int = 6,
) -> DemoReport:
    """Sync the example plan twice, then run, merge and reconcile until nothing is left."""
    from agent_harness.agents.presets import preset_for
    from agent_harness.forge.local import local_forge
    from agent_harness.git.worktrees import WorkRepo
    from agent_harness.implement.cli_agent import CliImplementer
    from agent_harness.models.client import ModelClient
    from agent_harness.models.routes import Route
    from agent_harness.pipeline.run import Pipeline, RunSettings
    from agent_harness.review.model import ModelReviewer
    from agent_harness.sessions.default import default_host
    from agent_harness.store.database import open_store
    from agent_harness.testing.model_server import ModelServer, ScriptedResponder
    from agent_harness.tracker.github import GitHubTracker

    examples = examples_dir()
    plan = load_plan(plan_path or examples / "PLAN.md")
    prepare_workdir(workdir)
    workdir = workdir.resolve()
    report = DemoReport(workdir=workdir)
    state_dir = workdir / "state"
    with local_forge(workdir) as forge, ModelServer([ScriptedResponder(review_rules)]) as model:
        report.api_url = forge.api_url
        tracker = GitHubTracker(DEMO_REPO, forge.token, forge.api_url, write_spacing_s=0.0)
        store = open_store(f"sqlite:///{workdir / 'harness.sqlite'}")
        try:
            tracker.ensure_repo(create=True, auto_init=False)
            step(f"created {DEMO_REPO} on the local forge at {forge.api_url}")
            seed_repository(examples / "project", tracker.repo_info().clone_url, workdir / "tally")
            step("syncing the plan to issues")
            report.syncs.append(sync_plan(plan, tracker, PLAN_KEY))
            step("syncing again: an unchanged plan writes nothing")
            report.syncs.append(sync_plan(plan, tracker, PLAN_KEY))

            env = process_env()
            # The checks say `python`; make it this interpreter, whatever the machine calls it.
            env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
            env[REVIEWER_KEY_ENV] = "demo-key"
            host = default_host(state_dir)
            report.host = host.kind
            agent = preset_for(
                f"{sys.executable} {examples / 'agent' / 'tally_agent.py'} "
                "--prompt-file {prompt_file}"
            )
            implementer = CliImplementer(host, agent, env, timeout_s=60.0, idle_s=30.0, poll_s=0.05)
            client = ModelClient(
                {
                    "reviewer": Route(
                        "gpt-demo-reviewer", f"{model.url}/v1", "openai", "openai", REVIEWER_KEY_ENV
                    )
                },
                env=env,
                parking=store,
            )
            settings = RunSettings(
                checks=["python -m unittest"],
                check_timeout_s=60.0,
                lease_s=60.0,
                workers=2,
                idle_poll_s=0.05,
            )
            pipeline = Pipeline(
                plan=plan,
                plan_key=PLAN_KEY,
                tracker=tracker,
                store=store,
                repo=WorkRepo(workdir / "tally", state_dir),
                implementer=implementer,
                reviewer=ModelReviewer(client, worker="demo"),
                settings=settings,
                state_dir=state_dir,
                env=env,
                observer=observer,
            )
            for number in range(1, max_passes + 1):
                step(f"run pass {number}: working every ready item")
                run = pipeline.run()
                report.passes.append(run)
                opened = [item for item in run.items if item.state == "pr_open"]
                if not opened:
                    break
                for item in opened:
                    assert item.pr_number is not None
                    _merge_as_a_person(forge.api_url, forge.token, item.pr_number)
                    report.merged.append((item.id, item.pr_number))
                step(
                    "merged the approved pull requests, as a person would; the next pass "
                    "reconciles the merges and unblocks what depended on them"
                )
            report.reviews = sum(1 for r in model.requests if r.path.endswith("completions"))
        finally:
            tracker.close()
            store.close()
    return report


def _merge_as_a_person(api_url: str, token: str, number: int) -> None:
    from agent_harness.testing.forge import make_client

    client = make_client(api_url, token)
    try:
        client.get_repo(DEMO_REPO).get_pull(number).merge(merge_method="merge")
    finally:
        client.close()
