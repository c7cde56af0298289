"""The offline main job: the example plan mirrored to an embedded forge, end to end.

Everything runs in-process on loopback with state in one directory, so a fresh machine with
Python and git can see the whole loop with no account and no network. Re-running the sync
inside the demo shows the idempotence the product promises: the second pass writes nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_harness.backlog import load_plan
from agent_harness.errors import HarnessError
from agent_harness.sync import SyncReport, sync_plan

DEMO_REPO = "demo/tally"
STAMP = ".agent-harness-demo"


@dataclass
class DemoReport:
    """What the demo did, for the CLI to show."""

    workdir: Path
    api_url: str = ""
    repo: str = DEMO_REPO
    syncs: list[SyncReport] = field(default_factory=list)


def examples_dir() -> Path:
    """The examples/ folder of a source checkout (where the demo's plan and project live)."""
    here = Path(__file__).resolve().parents[1] / "examples"
    if not (here / "PLAN.md").is_file():
        raise HarnessError(
            "examples/PLAN.md not found: run the demo from a source checkout of agent-harness, "
            "or pass --plan"
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


def run_demo(
    workdir: Path,
    plan_path: Path | None = None,
    step: Callable[[str], None] = lambda _message: None,
) -> DemoReport:
    """Mirror the example plan to a fresh local forge twice; return what happened."""
    from agent_harness.github import GitHubTracker
    from agent_harness.local_forge import local_forge

    plan = load_plan(plan_path or examples_dir() / "PLAN.md")
    prepare_workdir(workdir)
    report = DemoReport(workdir=workdir)
    with local_forge(workdir) as forge:
        report.api_url = forge.api_url
        tracker = GitHubTracker(DEMO_REPO, forge.token, forge.api_url, write_spacing_s=0.0)
        try:
            tracker.ensure_repo(create=True)
            step("syncing the plan to the local forge")
            report.syncs.append(sync_plan(plan, tracker, "PLAN"))
            step("syncing again: nothing should change")
            report.syncs.append(sync_plan(plan, tracker, "PLAN"))
        finally:
            tracker.close()
    return report
