"""Harness overhead per item: a full run vs the bare floor of git and tracker work it needs.

50 items, an agent that writes one file, a trivial check (`true`) and a scripted reviewer that
approves, with 1 and 4 workers. The floor, measured in the same run on a fresh repository, is
what any tool must do per item: `git worktree add`, a commit, `git push`, and the pull-request
requests. The figure is the harness's time per item as a ratio to the floor's (goal <= 2x).
Requests to the forge per item are counted at the forge.

    .venv/bin/python benchmarks/bench_run.py [--items 50]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_harness.agents.presets import preset_for
from agent_harness.git.worktrees import WorkRepo
from agent_harness.implement.cli_agent import CliImplementer
from agent_harness.models.client import ModelClient
from agent_harness.models.routes import Route
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunSettings
from agent_harness.plan.markdown import parse_plan
from agent_harness.review.model import ModelReviewer
from agent_harness.sessions.default import default_host
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.store.database import open_store
from agent_harness.testing.forge import TOKEN, running_forge
from agent_harness.testing.model_server import ModelServer, ScriptedCompletion
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.sync import sync_plan

APPROVE = '{"approved": true, "reasons": ["fine"], "permanent": false}'


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def seeded_clone(forge, name: str, root: Path) -> Path:  # type: ignore[no-untyped-def]
    forge.forge.create_repo("bench", name, auto_init=True)
    work = root / name
    git(root, "clone", "-q", forge.forge.clone_url("bench", name), str(work))
    return work


def floor(forge, root: Path, n: int, name: str = "floor") -> float:  # type: ignore[no-untyped-def]
    work = seeded_clone(forge, name, root)
    tracker = GitHubTracker(f"bench/{name}", TOKEN, forge.server.api_url, write_spacing_s=0)
    start = time.perf_counter()
    for i in range(1, n + 1):
        branch = f"agent-harness/T{i}-x"
        tree = root / f"{name}-trees" / f"T{i}"
        git(work, "worktree", "add", "-q", "-b", branch, str(tree), "origin/main")
        (tree / f"f{i}.txt").write_text("x\n")
        git(tree, "add", "--all")
        git(tree, "commit", "-qm", f"T{i}")
        git(tree, "push", "-q", "origin", f"refs/heads/{branch}:refs/heads/{branch}")
        if tracker.find_pull(branch) is None:
            tracker.create_pull(f"T{i}", "body", branch, "main")
    elapsed = time.perf_counter() - start
    tracker.close()
    return elapsed / n


def harness(forge, root: Path, n: int, workers: int, kind: str) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    name = f"run{workers}{kind}"
    work = seeded_clone(forge, name, root)
    text = "\n".join(f"- [ ] T{i} Item {i}" for i in range(1, n + 1))
    plan = parse_plan(text, source="PLAN.md")
    tracker = GitHubTracker(f"bench/{name}", TOKEN, forge.server.api_url, write_spacing_s=0)
    sync_plan(plan, tracker, "PLAN")  # issues exist beforehand: sync is benchmarked apart
    state = root / f"state-{name}"
    store = open_store(f"sqlite:///{root / (name + '.sqlite')}")
    env = dict(os.environ)
    env["BENCH_KEY"] = "k"
    with ModelServer() as model:
        from agent_harness.testing.model_server import ScriptedResponder

        model.enqueue(ScriptedResponder(lambda _body: ScriptedCompletion(text=APPROVE)))
        client = ModelClient(
            {"reviewer": Route("m", f"{model.url}/v1", "openai", "openai", "BENCH_KEY")},
            env=env,
            parking=store,
        )
        host = default_host(state) if kind == "tmux" else HeadlessHost(state)
        agent = preset_for(
            "sh -c " + shlex.quote('echo x > "f-$(date +%s%N).txt"; : "$0"') + " {prompt_file}"
        )
        pipeline = Pipeline(
            plan=plan,
            plan_key="PLAN",
            tracker=tracker,
            store=store,
            repo=WorkRepo(work, state),
            implementer=CliImplementer(host, agent, env, timeout_s=60, poll_s=0.02),
            reviewer=ModelReviewer(client, worker="bench"),
            settings=RunSettings(checks=["true"], workers=workers, lease_s=120, idle_poll_s=0.01),
            state_dir=state,
            env=env,
        )
        mark = forge.forge.mark()
        start = time.perf_counter()
        report = pipeline.run()
        elapsed = time.perf_counter() - start
        requests = sum(forge.forge.request_counts(mark).values())
    opened = sum(1 for item in report.items if item.state == "pr_open")
    assert opened == n, f"only {opened} of {n} items reached a pull request"
    tracker.close()
    store.close()
    return elapsed / n, requests / n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=50)
    n = parser.parse_args().items
    with tempfile.TemporaryDirectory() as tmp, running_forge(Path(tmp) / "forge") as forge:
        root = Path(tmp)
        # The floor is measured twice, before and after, on fresh repositories: the machine's
        # speed drifts during a run, and one floor would tilt every ratio the same way.
        before = floor(forge, root, n, "floor-before")
        after_runs: list[tuple[int, str, float, float]] = []
        kinds = ["headless", "tmux"] if shutil.which("tmux") else ["headless"]
        for kind in kinds:
            for workers in (1, 4):
                per_item, requests = harness(forge, root, n, workers, kind)
                after_runs.append((workers, kind, per_item, requests))
        base = (before + floor(forge, root, n, "floor-after")) / 2
        print(f"floor (worktree add + commit + push + PR requests): {base * 1000:.0f} ms/item")
        print(f"{'workers':>8} {'ms/item':>8} {'ratio':>6} {'requests/item':>14} {'host':>8}")
        for workers, kind, per_item, requests in after_runs:
            print(
                f"{workers:>8} {per_item * 1000:>8.0f} {per_item / base:>5.2f}x "
                f"{requests:>14.1f} {kind:>8}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
