"""The offline main job: the example plan taken through the whole loop on an embedded forge.

Everything runs on this machine with no account and no network: the forge on loopback holds
the repository and issues, the example agent (a real program in examples/agent/) works in
terminal sessions, a scripted reviewer answers over OpenAI's wire format, and the demo plays the
person who merges approved pull requests. Re-running the sync shows the idempotence the
product promises: the second pass writes nothing.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_harness.demo.inception import InceptionDemo
from agent_harness.demo.rules import review_rules
from agent_harness.errors import HarnessError
from agent_harness.git.runner import GitError, run_git
from agent_harness.pipeline.report import RunReport
from agent_harness.pipeline.settings import Observer
from agent_harness.plan.backlog import load_plan
from agent_harness.plan.model import Plan, shown_path
from agent_harness.sessions.protocol import SessionHost
from agent_harness.store.database import Store
from agent_harness.tracker.sync import SyncReport, sync_plan

DEMO_REPO = "demo/tally"


PLAN_KEY = "PLAN"


STAMP = ".agent-harness-demo"


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
    inception: InceptionDemo | None = None  # when the plan came from a paragraph
    audit_db: Path | None = None  # the audit database the run was recorded in
    audit_problem: str | None = None  # why it could not be, when it could not
    ci_runs: list[dict[str, Any]] = field(default_factory=list)  # what the local CI said
    rounds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # item -> PR rounds

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
            row["rounds"] = self.rounds.get(item_id, [])
        return list(latest.values())


def examples_dir() -> Path:
    """The examples the demo's plan and project come from: shipped in the package (in a source
    checkout, `agent_harness/data/examples` links to the repository's `examples/`), so the
    demo runs from an installed package as from a clone."""
    here = Path(__file__).resolve().parents[1] / "data" / "examples"
    if not (here / "PLAN.md").is_file() or not (here / "project").is_dir():
        raise HarnessError(
            f"the demo's examples are missing from the installed package ({here}): "
            "install it again, or run the demo from a source checkout"
        )
    return here


def prepare_workdir(workdir: Path) -> int:
    """Start from a clean demo directory, deleting only what the demo itself made (or an
    empty folder), and hold it: the returned descriptor keeps a second demo of the same
    directory out (it deleted the first's files as it ran) until it is closed."""
    if workdir.is_symlink():
        # Deleting through a link would delete what it points at, which the demo never made.
        raise HarnessError(f"{shown_path(str(workdir))} is a symbolic link; choose another --dir")
    if workdir.exists() and not workdir.is_dir():
        raise HarnessError(f"{shown_path(str(workdir))} is not a folder; choose another --dir")
    if workdir.exists() and any(workdir.iterdir()) and not (workdir / STAMP).is_file():
        raise HarnessError(
            f"{shown_path(str(workdir))} exists and was not made by the demo; choose another --dir"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    held = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(held)
        raise HarnessError(
            f"another demo is running in {shown_path(str(workdir))}; wait for it to end, or "
            "choose another --dir"
        ) from None
    try:
        # Emptied, not removed: the folder is what is held.
        for child in workdir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        (workdir / STAMP).write_text("made by agent-harness demo; safe to delete\n", "utf-8")
    except BaseException:
        os.close(held)
        raise
    return held


def _git(cwd: Path, *args: str) -> None:
    try:
        run_git(cwd, "-c", "user.name=demo", "-c", "user.email=demo@localhost", *args)
    except GitError as exc:
        raise HarnessError(f"demo: {exc.message}") from exc


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
    max_passes: int = 8,
    inception: bool = False,
    host: SessionHost | None = None,
) -> DemoReport:
    """Sync the example plan twice, then run, merge and reconcile until nothing is left; with
    `inception`, the plan is first argued out of a paragraph. Agents run in `host`."""
    examples = examples_dir()
    plan = None if inception else load_plan(plan_path or examples / "PLAN.md")
    held = prepare_workdir(workdir)  # held until the demo is over
    try:
        return _demo_in(workdir.resolve(), plan, examples, step, observer, max_passes, host)
    finally:
        os.close(held)


def _demo_in(
    workdir: Path,
    plan: Plan | None,
    examples: Path,
    step: Callable[[str], None],
    observer: Observer | None,
    max_passes: int,
    host: SessionHost | None,
) -> DemoReport:
    """`run_demo` in its folder, made ready and held."""
    from agent_harness.demo.assembly import demo_pipeline
    from agent_harness.forge.local import local_forge
    from agent_harness.sessions.default import default_host
    from agent_harness.store.database import open_store
    from agent_harness.testing.model_server import ModelServer, ScriptedResponder
    from agent_harness.tracker.github import GitHubTracker

    report = DemoReport(workdir=workdir)
    with local_forge(workdir) as forge, ModelServer([ScriptedResponder(review_rules)]) as model:
        report.api_url = forge.api_url
        tracker = GitHubTracker(DEMO_REPO, forge.token, forge.api_url, write_spacing_s=0.0)
        store = open_store(f"sqlite:///{workdir / 'harness.sqlite'}")
        try:
            plan = plan or _plan_by_inception(report, store, step)
            tracker.ensure_repo(create=True, auto_init=False)
            step(f"created {DEMO_REPO} on the local forge at {forge.api_url}")
            seed_repository(examples / "project", tracker.repo_info().clone_url, workdir / "tally")
            step("syncing the plan to issues")
            report.syncs.append(sync_plan(plan, tracker, PLAN_KEY))
            step("syncing again: an unchanged plan writes nothing")
            report.syncs.append(sync_plan(plan, tracker, PLAN_KEY))
            host = host or default_host(workdir / "state")
            report.host = host.kind
            pipeline = demo_pipeline(
                plan=plan,
                plan_key=PLAN_KEY,
                tracker=tracker,
                store=store,
                host=host,
                workdir=workdir,
                agent_command=f"{sys.executable} {examples / 'agent' / 'tally_agent.py'} "
                "--prompt-file {prompt_file}",
                reviewer_url=f"{model.url}/v1",
                observer=observer,
            )

            merge = functools.partial(_merge_as_a_person, forge.api_url, forge.token)
            ci = _local_ci(forge, examples)
            _run_and_merge(pipeline.run, merge, report, step, max_passes, ci.scan_once)
            report.rounds = _rounds(store, pipeline.project)
            _finish(report, model.requests, store, step)
        finally:
            tracker.close()
            store.close()
    return report


def _plan_by_inception(report: DemoReport, store: Store, step: Callable[[str], None]) -> Plan:
    from agent_harness.demo.inception import plan_by_inception

    report.inception = plan_by_inception(report.workdir, store, step)
    return load_plan(report.inception.plan_path)


def _finish(
    report: DemoReport, requests: list[Any], store: Store, step: Callable[[str], None]
) -> None:
    """Count the reviews the model server answered, and record the run in the audit."""
    from agent_harness.audit.observe import observe

    report.reviews = sum(1 for r in requests if r.path.endswith("completions"))
    step("recording the run in the audit database")
    target = report.workdir / "audit.sqlite"
    recorded = observe(store, str(target))
    if isinstance(recorded, str):
        report.audit_problem = recorded
    else:
        report.audit_db = target


def _local_ci(forge: Any, examples: Path) -> Any:
    """The example project's CI, run by the forge on each pull request head."""
    from agent_harness.forge.ci import LocalCI

    assert forge.forge is not None
    return LocalCI(forge.forge, f"{sys.executable} {examples / 'ci' / 'tally_ci.py'}")


def _run_and_merge(
    run_pass: Callable[[], RunReport],
    merge: Callable[[int], None],
    report: DemoReport,
    step: Callable[[str], None],
    max_passes: int,
    ci: Callable[[], list[Any]],
) -> None:
    """Run passes until one opens no pull request. After each, the project's CI runs on the
    new heads; what it passed is merged (as a person would), what it failed is left for the
    next pass, which sends it back to its agent as a PR round."""
    for number in range(1, max_passes + 1):
        step(f"run pass {number}: working every ready item")
        run = run_pass()
        report.passes.append(run)
        opened = [item for item in run.items if item.state == "pr_open"]
        if not opened:
            break
        said = {result.pull: result for result in ci()}
        report.ci_runs += [
            {"pr": r.pull, "sha": r.sha, "conclusion": r.conclusion} for r in said.values()
        ]
        for item in opened:
            assert item.pr_number is not None
            verdict = said.get(item.pr_number)
            if verdict is not None and verdict.conclusion != "success":
                step(
                    f"CI failed on PR #{item.pr_number} ({item.id}); the next pass sends it "
                    "back to its agent"
                )
                continue
            merge(item.pr_number)
            report.merged.append((item.id, item.pr_number))
        step(
            "merged the approved pull requests CI passed, as a person would; the next pass "
            "reconciles the merges and unblocks what depended on them"
        )


def _rounds(store: Any, project: str) -> dict[str, list[dict[str, Any]]]:
    """Each item's PR rounds: when CI, a reviewer or the base sent it back, and why."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event in store.all_events(project=project):
        if event.kind == "pr_round" and event.item:
            said = event.payload.as_dict()
            keep = ("round", "trigger", "action", "pr", "summary")
            out.setdefault(event.item, []).append({k: said.get(k) for k in keep})
    return out


def _merge_as_a_person(api_url: str, token: str, number: int) -> None:
    from agent_harness.testing.forge import make_client

    client = make_client(api_url, token)
    try:
        client.get_repo(DEMO_REPO).get_pull(number).merge(merge_method="merge")
    finally:
        client.close()
