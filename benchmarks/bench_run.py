"""Harness overhead per item: a full run vs the bare floor of the work it cannot avoid.

50 items, an agent that writes one file, a trivial check (`true`) and a scripted reviewer that
approves, with 1 and 4 workers, on each session host this machine has (headless; tmux when
installed). The harness side is `Pipeline.run()`: plan items -> leased claim -> worktree ->
the agent in a session -> commit -> check -> reviewer -> push -> pull request, on the embedded
forge, with the plan's issues made beforehand (sync is benchmarked apart).

The floor, measured in the same run on fresh repositories of the same forge, is what any tool
must do per item, written as plainly as possible, with the same number of workers (threads,
each item start to end on one of them):

- `git worktree add -b <branch> <dir> origin/main` in a clone of the repository (one at a
  time: git refuses two at once in one repository);
- the prompt written to a file, and the same agent program the harness starts (the same
  `sh -c ...` command line, in the worktree, with the prompt file as its argument) started
  and waited for: with headless, as a plain child process; with tmux, in a detached session
  of a private tmux server kept up for the whole floor (`new-session -d`, then a blocking
  read of a named pipe the command writes its exit status to when it ends), which is what
  an attachable terminal costs any tool;
- `git add --all`, `git commit`, `git push` of the branch;
- the pull-request requests: look for an open pull request of the branch, then create it
  (2 requests; its issue already exists).

It runs no check, no review and keeps no record: those, like the harness's leases, events,
worktree checks and pull-request watching, are the overhead measured. Each figure is the
harness's time per item as a ratio to the floor of the same host kind and worker count.
Both are measured in `--rounds` rounds (default 3), floor and run taking turns within each,
on fresh repositories; each side's best round is kept, as `bench_queue.py` does: on a shared
machine another tenant's work only ever adds time, so the best round is the one it disturbed
least. Requests to the forge per item are counted at the forge, for both, and so is CPU time
per item (this process, forge included, and the children it waited for; of the kept round),
which is what bounds more workers than cores.
The forge and the reviewer's scripted model server run in a process of their own
(`services.py`), as GitHub and a provider would: served from this process, their request
handling took the interpreter lock from the harness's worker threads. Their CPU (and their
git's) is still counted in each side's CPU column.
`--phases` adds where the harness's time per item goes, from its own events' timestamps (of
the kept round).

    .venv/bin/python benchmarks/bench_run.py [--items 50] [--rounds 3] [--phases]
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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
from agent_harness.testing.forge import TOKEN
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.sync import sync_plan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from services import Services


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def seeded_clone(forge: Services, name: str, root: Path) -> Path:
    forge.forge.create_repo("bench", name, auto_init=True)
    work = root / name
    git(root, "clone", "-q", forge.forge.clone_url("bench", name), str(work))
    return work


AGENT = "sh -c " + shlex.quote('echo x > "f-$(date +%s%N).txt"; : "$0"') + " {prompt_file}"


def cpu_seconds(services: Services) -> float:
    """CPU time of this process, of the children it has waited for (git, the session wrappers
    and their agents; not a tmux server's), and of the servers' process and its git."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + services.cpu_seconds()


TMUX = ["tmux", "-L", f"bench-floor-{os.getpid()}"]


def run_agent_plainly(argv: list[str], tree: Path, kind: str, name: str) -> None:
    """The agent program, started and waited for as a tool without the harness would."""
    if kind != "tmux":
        subprocess.run(argv, cwd=tree, check=True, capture_output=True)
        return
    # It says it ended through a named pipe, which this side blocks on: no polling.
    ended = tree.parent / f"{name}.ended"
    os.mkfifo(ended)
    command = f"{shlex.join(argv)}; echo $? > {shlex.quote(str(ended))}"
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", name, "-c", str(tree), "sh", "-c", command],
        check=True,
        capture_output=True,
    )
    with open(ended, encoding="utf-8") as pipe:
        code = pipe.read().strip()
    ended.unlink()
    if code != "0":
        raise RuntimeError(f"the agent of {name} exited {code}")


def floor(
    forge: Services, root: Path, n: int, workers: int, kind: str, name: str
) -> tuple[float, float, float]:
    """Seconds per item of the bare work (see the module's docstring), requests per item, and
    CPU seconds per item."""
    work = seeded_clone(forge, name, root)
    agent = preset_for(AGENT)
    local = threading.local()
    adding = threading.Lock()
    trackers: list[GitHubTracker] = []

    def tracker() -> GitHubTracker:
        if not hasattr(local, "tracker"):
            local.tracker = GitHubTracker(
                f"bench/{name}", TOKEN, forge.server.api_url, write_spacing_s=0
            )
            trackers.append(local.tracker)
        return local.tracker  # type: ignore[no-any-return]

    def one(i: int) -> None:
        branch = f"agent-harness/T{i}-x"
        tree = root / f"{name}-trees" / f"T{i}"
        with adding:  # git cannot add two worktrees to one repository at the same moment
            git(work, "worktree", "add", "-q", "-b", branch, str(tree), "origin/main")
        prompt = root / f"{name}-prompts" / f"T{i}.md"
        prompt.parent.mkdir(parents=True, exist_ok=True)
        prompt.write_text(f"T{i}: Item {i}\n")
        run_agent_plainly(agent.command(prompt, tree, None), tree, kind, f"{name}-T{i}")
        git(tree, "add", "--all")
        git(tree, "commit", "-qm", f"T{i}")
        git(tree, "push", "-q", "origin", f"refs/heads/{branch}:refs/heads/{branch}")
        if tracker().find_pull(branch) is None:
            tracker().create_pull(f"T{i}", "body", branch, "main")

    if kind == "tmux":  # one server for the whole floor, as a tool would keep
        subprocess.run([*TMUX, "new-session", "-d", "-s", "hold", "cat"], check=True)
    mark = forge.forge.mark()
    cpu, start = cpu_seconds(forge), time.perf_counter()
    try:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(1, n + 1)))
    finally:
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(forge) - cpu
        if kind == "tmux":
            subprocess.run([*TMUX, "kill-server"], check=False, capture_output=True)
            # tmux leaves its socket behind; the private one is ours to remove.
            sockets = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
            (sockets / TMUX[2]).unlink(missing_ok=True)
    requests = sum(forge.forge.request_counts(mark).values())
    for each in trackers:
        each.close()
    return elapsed / n, requests / n, cpu / n


def harness(
    forge: Services, root: Path, n: int, workers: int, kind: str, name: str = ""
) -> tuple[float, float, float, list[tuple[str, float]]]:
    """Seconds per item of a whole run, requests per item, CPU seconds per item, and the time
    between its events."""
    name = name or f"run{workers}{kind}"
    work = seeded_clone(forge, name, root)
    text = "\n".join(f"- [ ] T{i} Item {i}" for i in range(1, n + 1))
    plan = parse_plan(text, source="PLAN.md")
    tracker = GitHubTracker(f"bench/{name}", TOKEN, forge.server.api_url, write_spacing_s=0)
    sync_plan(plan, tracker, "PLAN")  # issues exist beforehand: sync is benchmarked apart
    state = root / f"state-{name}"
    store = open_store(f"sqlite:///{root / (name + '.sqlite')}")
    env = dict(os.environ)
    env["BENCH_KEY"] = "k"
    # The reviewer's model server answers every review with an approval (services.py).
    client = ModelClient(
        {"reviewer": Route("m", f"{forge.model_url}/v1", "openai", "openai", "BENCH_KEY")},
        env=env,
        parking=store,
    )
    host = default_host(state) if kind == "tmux" else HeadlessHost(state)
    agent = preset_for(AGENT)
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
    began, cpu, start = time.time(), cpu_seconds(forge), time.perf_counter()
    report = pipeline.run()
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(forge) - cpu
    requests = sum(forge.forge.request_counts(mark).values())
    opened = sum(1 for item in report.items if item.state == "pr_open")
    assert opened == n, f"only {opened} of {n} items reached a pull request"
    spent = phases(store, pipeline.project, n, began, began + elapsed)
    tracker.close()
    store.close()
    return elapsed / n, requests / n, cpu / n, spent


def phases(store, project: str, n: int, began: float, ended: float) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    """Mean seconds per item between each of an item's events and the next, by the pair of
    kinds, in the order they happen; then the run's time outside every item's attempt (from
    its claim to its last event), before the first, between and after the last."""
    with store.transaction(write=False) as tx:
        rows = tx.all(
            "SELECT item, kind, ts FROM events WHERE project = ? AND item IS NOT NULL ORDER BY id",
            (project,),
        )
    last: dict[str, tuple[str, float]] = {}
    spent: dict[str, float] = {}
    spans: dict[str, list[float]] = {}
    for item, kind, ts in rows:
        if item in last:
            step = f"{last[item][0]} -> {kind}"
            spent[step] = spent.get(step, 0.0) + float(ts) - last[item][1]
        last[item] = (kind, float(ts))
        if kind == "claimed":
            spans[item] = [float(ts), float(ts)]
        elif item in spans:
            spans[item][1] = float(ts)
    out = [(step, total / n) for step, total in spent.items() if step != "enqueued -> claimed"]
    busy = sorted(spans.values())
    if busy:
        between, reach = 0.0, busy[0][1]
        for first, end in busy[1:]:
            between += max(first - reach, 0.0)
            reach = max(reach, end)
        out += [
            ("(run) start -> first claim", (busy[0][0] - began) / n),
            ("(run) between attempts, no item in hand", between / n),
            ("(run) last item event -> end", (ended - reach) / n),
        ]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure, best kept")
    parser.add_argument("--phases", action="store_true")
    args = parser.parse_args()
    n = args.items
    kinds = ["headless", "tmux"] if shutil.which("tmux") else ["headless"]
    configs = [(workers, kind) for kind in kinds for workers in (1, 4)]
    with tempfile.TemporaryDirectory() as tmp, Services(Path(tmp) / "forge") as forge:
        root = Path(tmp)
        floors: dict[tuple[int, str], tuple[float, float, float]] = {}
        runs: dict[tuple[int, str], tuple[float, float, float, list[tuple[str, float]]]] = {}
        for round_no in range(max(args.rounds, 1)):
            for workers, kind in configs:
                # Floor and run take turns, each on fresh repositories; the best of each stays.
                name = f"floor-{round_no}-{workers}{kind}"
                measured = floor(forge, root, n, workers, kind, name)
                if (workers, kind) not in floors or measured[0] < floors[(workers, kind)][0]:
                    floors[(workers, kind)] = measured
                ran = harness(forge, root, n, workers, kind, f"run{round_no}-{workers}{kind}")
                if (workers, kind) not in runs or ran[0] < runs[(workers, kind)][0]:
                    runs[(workers, kind)] = ran
        print(
            f"{'workers':>8} {'host':>8} {'floor ms':>9} {'run ms':>7} {'ratio':>6} "
            f"{'floor req':>10} {'run req':>8} {'floor cpu':>10} {'run cpu':>8} {'ratio':>6}"
            f"   (per item; cpu in ms; best of {max(args.rounds, 1)} rounds each)"
        )
        for workers, kind in configs:
            base, base_requests, base_cpu = floors[(workers, kind)]
            per_item, requests, cpu, spent = runs[(workers, kind)]
            print(
                f"{workers:>8} {kind:>8} {base * 1000:>9.0f} {per_item * 1000:>7.0f} "
                f"{per_item / base:>5.2f}x {base_requests:>10.1f} {requests:>8.1f} "
                f"{base_cpu * 1000:>10.0f} {cpu * 1000:>8.0f} {cpu / base_cpu:>5.2f}x"
            )
            if args.phases:
                for step, seconds in spent:
                    print(f"{'':>10}{seconds * 1000:>7.1f} ms {seconds / base:>5.2f}x  {step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
