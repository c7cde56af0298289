"""Reliability under a bad day: kills, forge faults, hostile plans, hosts together, secrets.

Each trial does the adverse thing for real against the code as it is now and counts what went
wrong; nothing is timed except where time is the fault (a retry-after honoured, a read that
must not hang). One line per figure: what was tried, how many times, what was counted, and
whether it holds. docs/RELIABILITY.md records a run of it.

    .venv/bin/python benchmarks/reliability.py                # everything (~10 min, 2 cores)
    .venv/bin/python benchmarks/reliability.py --quick        # fewer kills and repeats
    .venv/bin/python benchmarks/reliability.py --only plans   # one trial kind

Trial kinds: sync (SIGKILLs of `plan --repo`), run (SIGKILLs of `run`), faults (the forge's
rate limits, held and failed creates, marker-like text), plans (hostile inputs to `plan`),
hosts (processes on one PostgreSQL database), secrets (an agent hunting for credentials).
PostgreSQL is read from AGENT_HARNESS_TEST_PG (default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import multiprocessing
import os
import random
import resource
import secrets
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_harness.demo.rules import review_rules
from agent_harness.demo.run import seed_repository
from agent_harness.forge import FaultKind, Forge, ForgeServer
from agent_harness.plan.markdown import parse_plan
from agent_harness.queue.items import list_items
from agent_harness.store.database import open_store
from agent_harness.testing.agents import write_scripted_agent
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.markers import DamagedMarker, read_marker, read_pull_marker
from agent_harness.tracker.sync import sync_plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PY = sys.executable
CREATES = "POST /repos/{owner}/{repo}/issues"
LISTINGS = "GET /repos/{owner}/{repo}/issues"
# Variables of the calling shell that would steer the harness under test somewhere else.
SCRUBBED = ("GH_", "GITHUB_", "AGENT_HARNESS_", "OPENAI_", "ANTHROPIC_", "TMUX")


# -- reporting -------------------------------------------------------------------------------


@dataclass
class Figure:
    trial: str
    tried: str
    counted: str
    holds: bool
    details: list[str] = field(default_factory=list)


def show(figure: Figure) -> Figure:
    verdict = "holds" if figure.holds else "DOES NOT HOLD"
    print(f"[{figure.trial}] {figure.tried}: {figure.counted} -> {verdict}", flush=True)
    for line in figure.details:
        print(f"      {line}", flush=True)
    return figure


def tally(counter: collections.Counter[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in counter.most_common()) or "none"


# -- shared pieces ---------------------------------------------------------------------------


def harness(*args: str) -> list[str]:
    return [PY, "-m", "agent_harness", *args]


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED)}
    env["PATH"] = os.pathsep.join([str(Path(PY).parent), env.get("PATH", "/usr/bin:/bin")])
    env["AGENT_HARNESS_TRACKER__WRITE_SPACING_S"] = "0"  # loopback: pacing protects nothing
    return env | extra


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def kill_when(proc: subprocess.Popen[Any], ready: Callable[[], bool], limit_s: float = 180) -> bool:
    """SIGKILL `proc` as soon as `ready()`; False when it ended on its own first."""
    deadline = time.monotonic() + limit_s
    while proc.poll() is None:
        if ready() or time.monotonic() > deadline:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    return proc.wait() == -signal.SIGKILL


def after_seconds(seconds: float) -> Callable[[], bool]:
    at = time.monotonic() + seconds
    return lambda: time.monotonic() >= at


def after_requests(
    rf: RunningForge, key: str, mark: int, n: int, then_s: float
) -> Callable[[], bool]:
    """True `then_s` after the forge has seen `n` requests of `key` (any, if empty) since
    `mark`."""
    reached: list[float] = []

    def seen() -> int:
        counts = rf.forge.request_counts(mark)
        return counts.get(key, 0) if key else sum(counts.values())

    def ready() -> bool:
        if not reached and seen() >= n:
            reached.append(time.monotonic())
        return bool(reached) and time.monotonic() - reached[0] >= then_s

    return ready


def marked_issues(rf: RunningForge, repo: str) -> tuple[collections.Counter[str], int]:
    """Issues per item id, by the marker in their bodies; and issues with no readable marker."""
    per_item: collections.Counter[str] = collections.Counter()
    unmarked = 0
    for issue in rf.github.get_repo(repo).get_issues(state="all"):
        if issue.pull_request is not None:
            continue
        try:
            marker = read_marker(issue.body or "")
        except DamagedMarker:
            marker = None
        if marker is None:
            unmarked += 1
        else:
            per_item[marker.item_id] += 1
    return per_item, unmarked


def twins(per_item: collections.Counter[str]) -> int:
    return sum(n - 1 for n in per_item.values() if n > 1)


@contextmanager
def private_tmux(directory: Path) -> Iterator[dict[str, str]]:
    """TMUX_TMPDIR for a tmux server of this trial alone, stopped on the way out."""
    directory.mkdir(parents=True, exist_ok=True)
    env = {"TMUX_TMPDIR": str(directory)}
    try:
        yield env
    finally:
        if shutil.which("tmux"):
            subprocess.run(
                ["tmux", "-L", "agent-harness", "kill-server"],
                env=base_env(**env),
                capture_output=True,
                check=False,
            )


@contextmanager
def forge_noise(details: list[str]) -> Iterator[None]:
    """Hold what the forge's HTTP server prints while clients are being killed: Python's
    socketserver prints a traceback for every connection a killed client reset. Counted, and
    anything else it printed is passed on."""
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    finally:
        text = held.getvalue()
        _pass_on_noise(text, details)


def _pass_on_noise(text: str, details: list[str]) -> None:
    blocks = [b for b in text.split("-" * 40) if b.strip()]
    resets = [b for b in blocks if "ConnectionResetError" in b or "BrokenPipeError" in b]
    if resets:
        details.append(
            f"the forge's HTTP server printed {len(resets)} tracebacks of connections reset "
            "by killed clients (socketserver's default handle_error)"
        )
    for block in blocks:
        if block not in resets:
            sys.stderr.write(block)


# -- 1. sync kills ---------------------------------------------------------------------------

LABELS = ("api", "ui", "docs", "infra", "tests")


def big_plan(n: int) -> str:
    lines: list[str] = []
    for i in range(1, n + 1):
        if i % 50 == 1:
            lines += [f"## Milestone: M{i // 50 + 1}", ""]
        lines += [f"### T{i}: Item {i}", f"Do the work of item {i}.", f"labels: {LABELS[i % 5]}"]
        if i % 3 == 0:
            lines.append(f"depends on: T{i - 1}")
        lines += [f"check: `test -f item{i}.txt`", ""]
    return "\n".join(lines)


def trial_sync(args: argparse.Namespace, rng: random.Random) -> list[Figure]:
    kills, n_items = args.sync_kills, 200
    wanted = {f"T{i}" for i in range(1, n_items + 1)}
    landed, rounds, dup, missing, unmarked, dup_milestones = 0, 0, 0, 0, 0, 0
    where: collections.Counter[str] = collections.Counter()
    bad_exits: list[str] = []
    noise: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="ah-rel-sync-") as name,
        running_forge(Path(name) / "forge") as rf,
        forge_noise(noise),
    ):
        tmp = Path(name)
        (tmp / "PLAN.md").write_text(big_plan(n_items))
        # Creates take 20 ms at the forge, so a kill often lands while one is in flight: the
        # forge finishes it for a client that is gone, and the rerun must find it.
        rf.forge.faults.inject(FaultKind.LATENCY, "POST", "*/issues", delay_s=0.02, count=None)
        env = base_env(GH_TOKEN=TOKEN, GITHUB_API_URL=rf.server.api_url)
        while landed < kills:
            rounds += 1
            repo = f"rel/sync{rounds}"
            rf.forge.create_repo("rel", f"sync{rounds}", auto_init=True)
            argv = harness("plan", "PLAN.md", "--repo", repo)
            for _ in range(min(10, kills - landed)):
                mark = rf.forge.mark()
                if rng.random() < 0.2:  # anywhere from start-up to listing and labels
                    ready = after_seconds(rng.uniform(0.3, 1.5))
                else:
                    target, then = rng.randint(1, 40), rng.choice([0.0, rng.uniform(0, 0.03)])
                    ready = after_requests(rf, CREATES, mark, target, then)
                proc = subprocess.Popen(
                    argv, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
                if not kill_when(proc, ready):
                    break  # this pass finished before its moment came: the round is complete
                landed += 1
                made = rf.forge.request_counts(mark).get(CREATES, 0)
                where["before any create" if made == 0 else "among the creates"] += 1
            done = subprocess.run(
                [*argv, "--json"], cwd=tmp, env=env, capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                bad_exits.append(f"round {rounds}: exit {done.returncode}: {done.stderr[-300:]}")
            per_item, stray = marked_issues(rf, repo)
            dup += twins(per_item)
            missing += len(wanted - set(per_item))
            unmarked += stray
            titles = [m.title for m in rf.github.get_repo(repo).get_milestones(state="all")]
            dup_milestones += len(titles) - len(set(titles))
        bad_exits += [f"forge error: {exc!r}" for exc in rf.forge.server_errors]
    holds = dup == missing == unmarked == dup_milestones == 0 and not bad_exits
    figure = Figure(
        "sync",
        f"{landed} SIGKILLs of `plan PLAN.md --repo` syncing {n_items} items "
        f"({rounds} rounds, each finished by a clean run)",
        f"duplicate issues {dup}, missing items {missing}, unmarked issues {unmarked}, "
        f"duplicate milestones {dup_milestones}, failed final runs {len(bad_exits)}",
        holds,
        [f"kills landed: {tally(where)}", *bad_exits, *noise],
    )
    return [show(figure)]


# -- 2. run kills ----------------------------------------------------------------------------

# Attempts each example item needs: the example agent gets T2 (a failing check) and T4 (a
# refused review) wrong once on purpose; T3 is already done in the plan.
NEEDED = {"T1": 1, "T2": 2, "T4": 2, "T5": 1, "T6": 1, "T7": 1}
MAX_PASSES = 14


@dataclass
class RunTrial:
    host: str
    kills: int = 0
    passes: int = 0
    duplicate_prs: int = 0
    main_writes: int = 0
    main_moved: int = 0
    failed: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)
    stages: collections.Counter[str] = field(default_factory=collections.Counter)


def last_event(cwd: Path) -> str:
    db = cwd / ".agent-harness" / "harness.sqlite"
    if not db.exists():
        return "(before the database)"
    store = open_store(str(db))
    try:
        events = [e for e in store.all_events() if e.kind != "model.call"]
    finally:
        store.close()
    if not events:
        return "(no event yet)"
    to = events[-1].payload.as_dict().get("to")
    return events[-1].kind + (f" to {to}" if to else "")


def pull_item(pull: Any) -> str:
    """The item a pull request is for: its marker, else its branch."""
    marker = read_pull_marker(pull.body or "")
    return marker.item_id if marker else str(pull.head.ref)


def final_report(out: Path) -> dict[str, Any] | None:
    for line in reversed(out.read_text().splitlines()):
        if line.startswith("{"):
            data = json.loads(line)
            if data.get("event") == "run_finished":
                return data  # type: ignore[no-any-return]
    return None


def one_run_trial(
    rf: RunningForge, model: ModelServer, root: Path, index: int, host: str, kills: int,
    rng: random.Random,
) -> RunTrial:  # fmt: skip
    name = f"tally{index}"
    repo_name = f"rel/{name}"
    result = RunTrial(host)
    rf.forge.create_repo("rel", name, auto_init=False)
    work = root / "clones" / name
    work.parent.mkdir(parents=True)
    seed_repository(EXAMPLES / "project", rf.forge.clone_url("rel", name), work)
    bare = rf.forge.repo_path("rel", name)
    known = git("--git-dir", str(bare), "rev-parse", "refs/heads/main")
    ours = {known}  # the seed, then every merge a person made
    cwd = root / "cwd"
    cwd.mkdir()
    (cwd / "PLAN.md").write_text((EXAMPLES / "PLAN.md").read_text())
    agent = shlex.join([PY, str(EXAMPLES / "agent" / "tally_agent.py")])
    argv = harness(
        "run", "--repo", repo_name, "--work", str(work), "--plan", "PLAN.md",
        "--agent", agent + " --prompt-file {prompt_file}", "--reviewer", "openai:gpt-test",
        "--json",
    )  # fmt: skip
    repo = rf.github.get_repo(repo_name)
    final = None
    with private_tmux(root / "tmux") as tmux_env:
        env = base_env(
            GH_TOKEN=TOKEN,
            GITHUB_API_URL=rf.server.api_url,
            OPENAI_BASE_URL=f"{model.url}/v1",
            OPENAI_API_KEY="sk-reliability-reviewer",
            AGENT_HARNESS_SESSIONS__HOST=host,
            **tmux_env,
        )
        while result.passes < MAX_PASSES:
            result.passes += 1
            out = root / f"pass{result.passes}.jsonl"
            # A moment anywhere in the pass's work: from its first request to the forge (the
            # plan's sync) on through agents, checks, reviews, pushes and pull requests.
            moment = after_requests(rf, "", rf.forge.mark(), 1, rng.uniform(0, 3.0))
            with open(out, "w") as sink:
                proc = subprocess.Popen(
                    argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.DEVNULL
                )
                if result.kills < kills:
                    killed = kill_when(proc, moment)
                else:
                    killed = proc.wait(timeout=600) == -signal.SIGKILL
            if killed:
                result.kills += 1
                result.stages[last_event(cwd)] += 1
            head = git("--git-dir", str(bare), "rev-parse", "refs/heads/main")
            if head != known:
                result.main_moved += 1  # main moved, and not by a merge we made
                known = head
            opened = list(repo.get_pulls(state="open"))
            for pull in opened:  # a person merges what was opened, as the demo does
                known = str(pull.merge(merge_method="merge").sha)
                ours.add(known)
            if killed:
                continue
            report = final_report(out)
            states = [i["state"] for i in (report or {}).get("items", [])]
            if report is not None and "pr_open" not in states and not opened:
                final = report
                break
    result.duplicate_prs = twins(collections.Counter(map(pull_item, repo.get_pulls(state="all"))))
    line = git("--git-dir", str(bare), "rev-list", "--first-parent", "refs/heads/main")
    result.main_writes = len([sha for sha in line.split() if sha not in ours])
    if final is None:
        result.unfinished.append(f"no clean final pass within {MAX_PASSES} passes")
        return result
    for item in final["items"]:
        if item["state"] == "failed":
            result.failed.append(f"{item['id']}: {item.get('reason')}")
        elif item["state"] not in ("merged", "done"):
            result.unfinished.append(f"{item['id']} {item['state']}")
        if item["id"] in NEEDED:
            result.attempts[item["id"]] = int(item["attempts"])
    return result


def trial_run(args: argparse.Namespace, rng: random.Random) -> list[Figure]:
    trials = args.run_trials
    planned = [args.run_kills // trials + (1 if i < args.run_kills % trials else 0)
               for i in range(trials)]  # fmt: skip
    hosts = ["headless", "tmux"] if shutil.which("tmux") else ["headless"]
    results: list[RunTrial] = []
    noise: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="ah-rel-run-") as name,
        running_forge(Path(name) / "forge") as rf,
        ModelServer([ScriptedResponder(review_rules)]) as model,
        forge_noise(noise),
    ):
        index = 0
        while True:
            # A pass can end before its kill's moment comes; when the work ran out first, the
            # kills still owed go to one more trial.
            landed = sum(r.kills for r in results)
            if index >= len(planned) and (landed >= args.run_kills or index >= len(planned) + 3):
                break
            owed = planned[index] if index < len(planned) else args.run_kills - landed
            host = hosts[index % len(hosts)]
            root = Path(name) / f"t{index}"
            results.append(one_run_trial(rf, model, root, index, host, owed, rng))
            index += 1
        noise += [f"forge error: {exc!r}" for exc in rf.forge.server_errors]
    kills = sum(r.kills for r in results)
    dup = sum(r.duplicate_prs for r in results)
    writes = sum(r.main_writes + r.main_moved for r in results)
    failed = [f"trial {i}: {f}" for i, r in enumerate(results) for f in r.failed]
    unfinished = [f"trial {i}: {u}" for i, r in enumerate(results) for u in r.unfinished]
    spent = sum(sum(r.attempts.values()) for r in results)
    needed = sum(sum(NEEDED.values()) for r in results if r.attempts)
    extra = [
        f"trial {i}: {item} took {n} attempts, needs {NEEDED[item]}"
        for i, r in enumerate(results)
        for item, n in r.attempts.items()
        if n != NEEDED[item]
    ]
    stages: collections.Counter[str] = sum((r.stages for r in results), collections.Counter())
    by_host = collections.Counter(r.host for r in results)
    figures = [
        Figure(
            "run",
            f"{kills} SIGKILLs of `run` over {len(results)} trials of the example plan "
            f"({tally(by_host)} hosts), each finished by clean passes",
            f"duplicate PRs {dup}, writes to main {writes}",
            dup == writes == 0,
            [f"kills landed after: {tally(stages)}", *noise],
        ),
        Figure(
            "run",
            f"the same {len(results)} trials' final reports ({len(NEEDED)} items each)",
            f"items failed {len(failed)}, items unfinished {len(unfinished)}, "
            f"attempts spent {spent} where the items need {needed}",
            not failed and not unfinished and not extra,
            [*failed, *unfinished, *extra],
        ),
    ]
    return [show(f) for f in figures]


# -- 3. forge faults -------------------------------------------------------------------------


class RealSleep:
    """Sleeps for real, and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        time.sleep(seconds)


class NoSleep(RealSleep):
    """Keeps what it was asked and returns at once: for backoffs whose length is not the point."""

    def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


def small_plan(n: int, prefix: str = "Item") -> Any:
    return parse_plan("\n".join(f"### T{i}: {prefix} {i}\n" for i in range(1, n + 1)), "PLAN.md")


def fresh_repo(rf: RunningForge, name: str) -> str:
    rf.forge.create_repo("rel", name, auto_init=True)
    return f"rel/{name}"


def tracker(rf: RunningForge, repo: str, **options: Any) -> GitHubTracker:
    return GitHubTracker(repo, TOKEN, rf.server.api_url, **({"write_spacing_s": 0.0} | options))


def watch_refusal(rf: RunningForge, key: str, out: dict[str, float]) -> threading.Thread:
    """From the forge's side: when the one pending fault was served, and how long until the
    client's next request of the same kind arrived."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        before = rf.forge.request_counts().get(key, 0)
        while rf.forge.faults.pending() and time.monotonic() < deadline:
            before = rf.forge.request_counts().get(key, 0)
            time.sleep(0.0005)
        refused_at, out["refused_epoch"] = time.monotonic(), time.time()
        seen = rf.forge.request_counts().get(key, 0)
        if seen > before + 1:
            out["gap_s"] = 0.0  # the retry came within the same half millisecond
            return
        while rf.forge.request_counts().get(key, 0) <= seen and time.monotonic() < deadline:
            time.sleep(0.0005)
        out["gap_s"] = time.monotonic() - refused_at

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def fault_rate_limits(rf: RunningForge) -> Figure:
    cases = [
        ("secondary 403 on a create", FaultKind.SECONDARY_RATE_LIMIT, "POST", CREATES, 2),
        ("secondary 429 on the listing", FaultKind.SECONDARY_RATE_LIMIT_429, "GET", LISTINGS, 1),
        ("primary limit on a create", FaultKind.PRIMARY_RATE_LIMIT, "POST", CREATES, 2),
    ]
    honoured, details, missing = 0, [], 0
    for number, (label, kind, method, key, wait) in enumerate(cases):
        repo = fresh_repo(rf, f"limits{number}")
        options = {"reset_in_s": wait} if kind is FaultKind.PRIMARY_RATE_LIMIT else {}
        rf.forge.faults.inject(kind, method, "*/issues", retry_after=wait, **options)
        seen: dict[str, float] = {}
        watcher = watch_refusal(rf, key, seen)
        sleep = RealSleep()
        client = tracker(rf, repo, sleep=sleep)
        report = sync_plan(small_plan(3), client, "PLAN")
        client.close()
        watcher.join(30)
        missing += 3 - len(marked_issues(rf, repo)[0]) + len(report.problems)
        if kind is FaultKind.PRIMARY_RATE_LIMIT:  # wait until x-ratelimit-reset, a whole second
            owed = int(seen["refused_epoch"]) + wait - seen["refused_epoch"]
        else:
            owed = float(wait)
        ok = seen.get("gap_s", 0.0) >= owed - 0.002
        honoured += ok
        asked = max(sleep.asked, default=0.0)
        details.append(
            f"{label}: owed {owed:.2f} s, client slept {asked:.2f} s, next request reached "
            f"the forge after {seen.get('gap_s', 0.0):.2f} s"
        )
    return show(
        Figure(
            "faults",
            f"{len(cases)} rate-limit refusals (secondary 403 and 429 with retry-after, primary "
            "with x-ratelimit-reset) during a sync",
            f"honoured {honoured} of {len(cases)}, items missing {missing}",
            honoured == len(cases) and missing == 0,
            details,
        )
    )


def fault_lost_answers(rf: RunningForge, repeats: int) -> Figure:
    """Creates whose answer never comes back: held past the client's timeout, or the
    connection closed after (or before) the work."""
    cases = [
        ("held 2.5 s past a 1 s timeout", dict(kind=FaultKind.LATENCY, delay_s=2.5))
    ] * repeats + [
        ("closed after the work", dict(kind=FaultKind.DROP_AFTER)),
        ("closed before the work", dict(kind=FaultKind.DROP)),
    ]
    dup = missing = problems = 0
    seen: collections.Counter[str] = collections.Counter()
    for number, (label, fault) in enumerate(cases):
        repo = fresh_repo(rf, f"lost{number}")
        rf.forge.faults.inject(method="POST", path="*/issues", count=1, **fault)
        client = tracker(rf, repo, timeout_s=1.0, sleep=RealSleep())
        report = sync_plan(small_plan(5), client, "PLAN")
        client.close()
        time.sleep(0.1)  # nothing still in flight can add another afterwards
        per_item, _ = marked_issues(rf, repo)
        dup += twins(per_item)
        missing += 5 - len(per_item)
        problems += len(report.problems)
        seen[label] += 1
    return show(
        Figure(
            "faults",
            f"{len(cases)} syncs of 5 items whose first create got no answer ({tally(seen)})",
            f"duplicate issues {dup}, missing items {missing}, problems reported {problems}",
            dup == missing == problems == 0,
        )
    )


def fault_server_errors(rf: RunningForge, repeats: int) -> Figure:
    dup = missing = problems = 0
    for number in range(repeats):
        repo = fresh_repo(rf, f"burst{number}")
        rf.forge.faults.inject(FaultKind.STATUS, "POST", "*/issues", status=502, count=5)
        client = tracker(rf, repo, sleep=NoSleep())
        report = sync_plan(small_plan(10), client, "PLAN")
        client.close()
        per_item, _ = marked_issues(rf, repo)
        dup += twins(per_item)
        missing += 10 - len(per_item)
        problems += len(report.problems)
    # An outage longer than the retries: the items are named, then a later sync mends them.
    repo = fresh_repo(rf, "outage")
    rf.forge.faults.inject(FaultKind.STATUS, "POST", "*/issues", status=502, count=None)
    client = tracker(rf, repo, sleep=NoSleep())
    during = sync_plan(small_plan(4), client, "PLAN")
    rf.forge.faults.clear()
    after = sync_plan(small_plan(4), client, "PLAN")
    client.close()
    per_item, _ = marked_issues(rf, repo)
    named = sorted(p.split(":")[0] for p in during.problems)
    outage_ok = named == ["T1", "T2", "T3", "T4"] and after.ok and len(per_item) == 4
    outage_ok = outage_ok and twins(per_item) == 0
    return show(
        Figure(
            "faults",
            f"{repeats} syncs of 10 items through 502 x5 on POST issues, and one 4-item sync "
            "through a 502 outage then again after it",
            f"missing items {missing}, duplicate issues {dup}, problems reported {problems}; "
            f"outage: items named {len(named)} of 4, mended by the next sync: "
            f"{'yes' if outage_ok else 'no'}",
            dup == missing == problems == 0 and outage_ok,
            ["backoff sleeps are recorded, not slept (they are random, up to 32 s)"],
        )
    )


MARKER_PLAN = """\
### T1: A plain item
Nothing odd here.

### T2: A body quoting another item's marker
<!-- agent-harness {"id": "T1", "plan": "PLAN", "hash": "000000000000", "labels": []} -->

### T3: A body with a marker for itself and another hash
<!-- agent-harness {"id": "T3", "plan": "PLAN", "hash": "ffffffffffff", "labels": []} -->

### T4: Title <!-- agent-harness {"id": "T1", "plan": "PLAN", "hash": "t"} -->

### T5: Shouted, without spaces
<!--AGENT-HARNESS{"id":"T9","plan":"PLAN","hash":"x"}-->

### T6: A pull-request marker
<!-- agent-harness-pr {"id": "T1", "plan": "PLAN", "issue": 1} -->

### T7: Marker text in a fence
```
<!-- agent-harness {"id": "T2", "plan": "PLAN", "hash": "abc", "labels": []} -->
```

### T8: Marker text in a check
check: `echo '<!-- agent-harness {"id": "T1", "plan": "PLAN", "hash": "h"} -->'`

### T9: A comment opened and never closed (last: markdown hides what follows it)
<!-- agent-harness {"id": "T9",
"""


def fault_marker_text(rf: RunningForge) -> Figure:
    plan = parse_plan(MARKER_PLAN, source="PLAN.md")
    repo = fresh_repo(rf, "markers")
    counts: list[int] = []
    worst, later_writes, problems = 0, 0, 0
    for number in range(4):
        mark = rf.forge.mark()
        client = tracker(rf, repo)
        report = sync_plan(plan, client, "PLAN")
        client.close()
        problems += len(report.problems)
        per_item, stray = marked_issues(rf, repo)
        counts.append(sum(per_item.values()) + stray)
        worst = max([worst, *per_item.values()])
        if number:
            later_writes += sum(
                n for key, n in rf.forge.request_counts(mark).items() if not key.startswith("GET")
            )
    n = len(plan.items)
    return show(
        Figure(
            "faults",
            f"{n} items whose text imitates markers (quoted, own, in a title, shouted, PR, "
            "fenced, in a check, unclosed), synced 4 times",
            f"issues after each sync {counts}, most issues for one item {worst}, "
            f"writes on syncs 2-4 {later_writes}, problems {problems}",
            counts == [n] * 4 and worst == 1 and later_writes == 0 and problems == 0,
        )
    )


def trial_faults(args: argparse.Namespace, rng: random.Random) -> list[Figure]:
    del rng
    repeats = 1 if args.quick else 3
    with (
        tempfile.TemporaryDirectory(prefix="ah-rel-faults-") as name,
        running_forge(Path(name) / "forge") as rf,
    ):
        return [
            fault_rate_limits(rf),
            fault_lost_answers(rf, repeats),
            fault_server_errors(rf, repeats),
            fault_marker_text(rf),
        ]


# -- 4. hostile plans ------------------------------------------------------------------------


@dataclass
class Hostile:
    name: str
    argv: list[str]  # after `plan`
    stdin: str | None = None  # a path to feed as standard input
    size: int = 0  # bytes written for it, when it is a file this script wrote


def hostile_inputs(d: Path, rng: random.Random) -> list[Hostile]:
    cases: list[Hostile] = []

    def put(name: str, data: bytes | str, suffix: str = ".md") -> None:
        path = d / f"{len(cases):02d}{suffix}"
        raw = data if isinstance(data, bytes) else data.encode("utf-8")
        path.write_bytes(raw)
        cases.append(Hostile(name, [str(path)], size=len(raw)))

    deep_list = "".join("  " * k + f"- [ ] T{k + 1} level {k}\n" for k in range(3000))
    put("empty file", b"")
    put("only whitespace", " \n\t\n" * 1000)
    put("random binary (1 MB)", rng.randbytes(1 << 20))
    put("invalid UTF-8", b"### T1: caf\xe9\n\xff\xfe\xfd body\n")
    put("UTF-16 with BOM", "### T1: wide\n".encode("utf-16"))
    put("UTF-8 BOM", "\ufeff### T1: bom\n")
    put("NUL bytes in a heading", b"### T1: nul\x00here\n\x00\x00\n")
    put("25 MB file", b"### T1: big\n" + b"x" * (25 << 20))
    put("20 MB less one byte", b"### T1: just under\n" + b"y" * ((20 << 20) - 20) + b"\n")
    put("10 MB single line", "### T1: " + "z" * (10 << 20))
    put("list nested 3000 deep", deep_list)
    put("blockquotes 5000 deep", "> " * 5000 + "### T1: quoted\n")
    put("emphasis 100k deep", "### T1: x\n" + "*" * 100_000 + "a" + "*" * 100_000 + "\n")
    put("50k open brackets", "### T1: x\n" + "[" * 50_000 + "\n")
    put("50k backticks", "### T1: x\n" + "`" * 50_000 + "\n")
    put("100k HTML openers", "### T1: x\n" + "<a " * 100_000 + "\n")
    put("lower-case ids", "### t1: lower\n\n- [ ] ab2 box\n\n### Auth-1: mixed\n")
    put("duplicate ids", "### T1: one\n\n### T1: again\n")
    put("dependency cycle", "### T1: a\ndepends on: T2\n\n### T2: b\ndepends on: T1\n")
    put("self dependency", "### T1: a\ndepends on: T1\n")
    put("dependency on a missing id", "### T1: a\ndepends on: T404\n")
    chain = "".join(
        f"### T{i}: step\n" + (f"depends on: T{i - 1}\n" if i > 1 else "") + "\n"
        for i in range(1, 20_001)
    )
    put("20k-long dependency chain", chain)
    put("20k-long cycle", chain.replace("### T1: step\n", "### T1: step\ndepends on: T20000\n"))
    put("10k dependencies of one item", "### T1: a\ndepends on: " + ", ".join(
        f"T{i}" for i in range(2, 10_002)) + "\n")  # fmt: skip
    put("unterminated fence", "### T1: a\n```\n### T2: inside\n")
    put("unterminated HTML comment", "### T1: a\n<!-- never closed\n### T2: b\n")
    put("table with extra cells", "| id | title |\n|---|---|\n| T1 | a | b | c |\n")
    put("table with missing cells", "| id | title | depends on |\n|---|---|---|\n| T1 |\n")
    put("table without an id column", "| name | title |\n|---|---|\n| T1 | a |\n")
    put("table of 2000 columns", "|" + "|".join(f"c{i}" for i in range(2000)) + "|\n|"
        + "|".join("-" for _ in range(2000)) + "|\n|" + "|".join("T1" for _ in range(2000))
        + "|\n")  # fmt: skip
    put("separator row only", "|---|---|\n|---|---|\n")
    put("ANSI escapes in a title", "### T1: \x1b[2J\x1b[31mred\x1b]0;title\x07\n")
    put("bidi override in a title", "### T1: \u202eevil\u202c\n")
    put("id of 10k digits", "### T" + "9" * 10_000 + ": long id\n")
    put("id past 64 bits", "### T99999999999999999999999: big\n")
    put("CRLF line ends", "### T1: a\r\ndepends on: T2\r\n\r\n### T2: b\r\n")
    put("CR-only line ends", "### T1: a\r\r### T2: b\r")
    put("200k empty lines", "\n" * 200_000 + "### T1: late\n")
    put("empty checkbox and heading", "- [ ]\n###\n### :\n- [x]\n")
    put("10k labels", "### T1: a\nlabels: " + ", ".join(f"l{i}" for i in range(10_000)) + "\n")
    put("unbalanced check backticks", "### T1: a\ncheck: `pytest\n")
    put("JSON that is not JSON", "{ not json at all", ".json")
    put("JSON nested 100k deep", '{"items": ' + "[" * 100_000 + "]" * 100_000 + "}", ".json")
    put("JSON with wrong types", '{"items": "everything", "version": []}', ".json")
    put("JSON with NaN and huge numbers", '{"items": [{"id": NaN, "line": 1e400}]}', ".json")
    put("JSON with an integer of 5,000 digits", '{"tasks": [{"id": ' + "9" * 5000 + "}]}", ".json")
    put(
        "tasks.json with half a surrogate pair",
        '{"tasks": [{"id": 1, "title": "Fix \\ud800", "dependencies": []}]}',
        ".json",
    )
    put("JSON item missing fields", '{"items": [{}]}', ".json")
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]" for n in range(1, 10)
    ]
    put(
        "Cursor plan of nested YAML aliases (10**10 leaves)",
        "---\n" + "\n".join(laughs) + "\ntodos:\n  - id: t1\n    content: x\n"
        "    dependencies: [*a9]\n---\n",
        ".plan.md",
    )
    put("markdown named .json", "### T1: a\n", ".json")
    # Things that are not files.
    fifo = d / "plan.fifo"
    os.mkfifo(fifo)
    cases.append(Hostile("a FIFO with no writer", [str(fifo)]))
    (d / "loop-a.md").symlink_to(d / "loop-b.md")
    (d / "loop-b.md").symlink_to(d / "loop-a.md")
    cases.append(Hostile("a symlink loop", [str(d / "loop-a.md")]))
    (d / "folder.md").mkdir()
    cases.append(Hostile("a directory", [str(d / "folder.md")]))
    cases.append(Hostile("a missing file", [str(d / "missing.md")]))
    cases.append(Hostile("/dev/zero", ["/dev/zero"]))
    cases.append(Hostile("/dev/urandom", ["/dev/urandom"]))
    cases.append(Hostile("/proc/self/environ (size 0)", ["/proc/self/environ"]))
    sock = d / "plan.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))  # closed with the process; the file is what is read
    listener.close()
    cases.append(Hostile("a UNIX socket", [str(sock)]))
    cases.append(Hostile("stdin from /dev/zero", ["-"], "/dev/zero"))
    cases.append(Hostile("stdin from /dev/urandom", ["-"], "/dev/urandom"))
    cases.append(Hostile("stdin empty", ["-"], "/dev/null"))
    odd = d / "new\nline name.md"
    odd.write_text("### T1: a\n")
    cases.append(Hostile("a file name with a newline", [str(odd)]))
    return cases


@dataclass
class Outcome:
    code: int | None  # None: still running at the limit, and killed
    err: list[str]  # the non-blank lines on stderr
    out_bytes: int
    traceback: bool
    wall_s: float
    cpu_s: float


def cpu_seconds(pid: int) -> float:
    """User and system time a live process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_hostile(
    case: Hostile, extra: list[str], d: Path, cpu_limit_s: float = 12, wall_limit_s: float = 60
) -> Outcome:
    """`plan` on one hostile input; stdout goes to a file, since some outputs are huge.

    Stopped once it has used more than `cpu_limit_s` of CPU (it is over 10 s whatever else
    the machine is doing), or `wall_limit_s` have passed (a hang uses no CPU)."""
    out_path, err_path = d / "stdout", d / "stderr"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with (
        open(case.stdin or os.devnull, "rb") as stdin,
        open(out_path, "wb") as out,
        open(err_path, "wb") as err,
    ):
        proc = subprocess.Popen(
            harness("plan", *case.argv, *extra),
            cwd=d,
            env=base_env(COLUMNS="100"),
            stdin=stdin,
            stdout=out,
            stderr=err,
        )
        code: int | None = None
        while (code := proc.poll()) is None:
            if cpu_seconds(proc.pid) > cpu_limit_s or time.monotonic() - start > wall_limit_s:
                proc.kill()
                proc.wait()
                break
            time.sleep(0.02)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = err_path.read_bytes().decode("utf-8", "replace")
    size = out_path.stat().st_size
    with open(out_path, "rb") as handle:
        handle.seek(max(0, size - 65536))
        tail = handle.read().decode("utf-8", "replace")
    out_path.unlink()
    lines = [line for line in text.splitlines() if line.strip()]
    return Outcome(code, lines, size, "Traceback" in text or "Traceback" in tail, wall, cpu)


def trial_plans(args: argparse.Namespace, rng: random.Random) -> list[Figure]:
    modes = [[]] if args.quick else [[], ["--json"]]
    count: collections.Counter[str] = collections.Counter()
    offenders: list[str] = []
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ah-rel-plans-") as name:
        d = Path(name)
        cases = hostile_inputs(d, rng)
        for case in cases:
            seen = []
            for extra in modes:
                got = run_hostile(case, extra, d)
                count["runs"] += 1
                mode = " ".join(extra) or "table"
                where = f"{case.name} ({mode})"
                took = f"{got.wall_s:.1f} s wall, {got.cpu_s:.1f} s CPU"
                if got.traceback:
                    count["tracebacks"] += 1
                    offenders.append(f"{where}: a traceback: {got.err[-1:]}")
                # Over 10 s of CPU, or stopped at the wall limit: the machine is shared, so
                # wall time alone would count the neighbours' load.
                if got.code is None or got.cpu_s > 10:
                    count["slow"] += 1
                    state = "still running, killed" if got.code is None else f"exit {got.code}"
                    offenders.append(f"{where}: {took}, {state}")
                if got.out_bytes > max(10 << 20, 20 * case.size):  # far more than it was given
                    count["huge"] += 1
                    offenders.append(
                        f"{where}: {got.out_bytes / 1e6:.0f} MB on stdout from "
                        f"{case.size / 1e3:.0f} kB of plan"
                    )
                if got.code == 0:
                    count["read"] += 1
                elif got.code == 70:  # the CLI's last resort: an exception nobody classified
                    count["internal"] += 1
                    offenders.append(f"{where}: exit {got.code}: {got.err[0][:150]}")
                elif got.code is not None:
                    count["refused"] += 1
                    count["one line"] += len(got.err) == 1
                    if len(got.err) != 1:
                        offenders.append(f"{where}: exit {got.code}, {len(got.err)} stderr lines")
                seen.append(f"{mode}: exit {got.code}, {took}")
                if got.code and len(got.err) == 1 and not extra:
                    seen.append(got.err[0].replace(name, "DIR")[:100])
            rows.append(f"{case.name}: " + "; ".join(seen))
    holds = count["tracebacks"] == count["slow"] == count["internal"] == count["huge"] == 0
    holds = holds and count["refused"] == count["one line"]
    figure = Figure(
        "plans",
        f"{len(cases)} hostile inputs to `plan FILE` x {len(modes)} output modes "
        f"({count['runs']} runs)",
        f"tracebacks {count['tracebacks']}, internal errors {count['internal']}, read (exit 0) "
        f"{count['read']}, refused {count['refused']} of which in one stderr line "
        f"{count['one line']}, over 10 s {count['slow']}, output over 20x the input "
        f"{count['huge']}",
        holds,
        offenders + (rows if args.verbose else []),
    )
    return [show(figure)]


# -- 5. hosts on PostgreSQL ------------------------------------------------------------------

HOSTS_ITEMS = 200


def hosts_plan_text() -> str:
    # Each item waits for the one ten before it: ten chains the hosts share.
    return "\n".join(
        f"### T{i}: step {i}\n" + (f"depends on: T{i - 10}\n" if i > 10 else "")
        for i in range(1, HOSTS_ITEMS + 1)
    )


def host_process(
    url: str, schema: str, project: str, ready: Any, go: Any, out: Any, name: str
) -> None:
    """One host: open the store, enqueue the plan, then claim and finish items until none
    is left. Runs in its own process; every host is let go at the same moment."""
    from agent_harness.queue.items import enqueue
    from agent_harness.queue.leases import claim_next, complete

    plan = parse_plan(hosts_plan_text(), source="PLAN.md")
    ready.put(name)
    go.wait(120)
    try:
        store = open_store(url, schema=schema)
    except Exception as exc:  # what went wrong is the measurement
        out.put((name, "open", f"{type(exc).__name__}: {exc}", 0, 0))
        return
    added = done = 0
    try:
        try:
            added = len(enqueue(store, project, plan).added)
        except Exception as exc:
            out.put((name, "enqueue", f"{type(exc).__name__}: {exc}", 0, 0))
            return
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lease = claim_next(store, project, name, 30.0)
            if lease is not None:
                complete(store, lease, "merged")
                done += 1
                continue
            if all(r.state in ("merged", "done") for r in list_items(store, project)):
                break
            time.sleep(0.005)  # a dependency is held by another host
        out.put((name, "ok", "", added, done))
    except Exception as exc:
        out.put((name, "work", f"{type(exc).__name__}: {exc}", added, done))
    finally:
        store.close()


def count_claims(events: list[Any]) -> tuple[int, int, int]:
    """Double claims (claimed again with no expiry or completion between), items completed
    more than once, items enqueued more than once."""
    held: dict[str, bool] = {}
    doubles = 0
    completed: collections.Counter[str] = collections.Counter()
    enqueued: collections.Counter[str] = collections.Counter()
    for event in events:
        if event.kind == "claimed":
            doubles += held.get(event.item, False)
            held[event.item] = True
        elif event.kind in ("lease_expired", "completed", "released", "failed", "deferred"):
            held[event.item] = False
        if event.kind == "completed":
            completed[event.item] += 1
        elif event.kind == "enqueued":
            enqueued[event.item] += 1
    return doubles, twins(completed), twins(enqueued)


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def hosts_together(url: str, n: int, migrated: bool, rounds: int) -> Figure:
    ctx = multiprocessing.get_context("spawn")
    errors: list[str] = []
    doubles = done_twice = enqueued_twice = missing = added_total = 0
    took: list[float] = []
    shared: list[int] = []  # hosts that finished at least one item, per round
    for _ in range(rounds):
        schema = f"ah_rel_{uuid.uuid4().hex[:12]}"
        project = "rel/hosts:PLAN"
        try:
            if migrated:
                open_store(url, schema=schema).close()  # the database exists; the project is new
            ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
            procs = [
                ctx.Process(
                    target=host_process, args=(url, schema, project, ready, go, out, f"h{k}/w")
                )
                for k in range(n)
            ]
            for proc in procs:
                proc.start()
            for _ in procs:
                ready.get(timeout=120)  # every host has started and waits at the gate
            go.set()
            started = time.monotonic()
            results = [out.get(timeout=180) for _ in procs]
            for proc in procs:
                proc.join(30)
            took.append(time.monotonic() - started)
            errors += [f"{who} {stage}: {why}" for who, stage, why, _, _ in results if why]
            shared.append(sum(1 for r in results if r[4] > 0))
            added_total += sum(r[3] for r in results)
            store = open_store(url, schema=schema)
            try:
                events = store.all_events(project=project)
                finished = {r.id for r in list_items(store, project) if r.state == "merged"}
            finally:
                store.close()
            twice_claimed, twice_done, twice_enqueued = count_claims(events)
            doubles += twice_claimed
            done_twice += twice_done
            enqueued_twice += twice_enqueued
            missing += HOSTS_ITEMS - len(finished)
        finally:
            drop_schema(url, schema)
    where = "a new project in a migrated database" if migrated else "a new, unmigrated schema"
    return show(
        Figure(
            "hosts",
            f"{n} processes x {rounds} rounds enqueueing one {HOSTS_ITEMS}-item plan together "
            f"into {where} and claiming until empty",
            f"errors {len(errors)}, double claims {doubles}, items done twice {done_twice}, "
            f"items enqueued twice {enqueued_twice}, items not done {missing}, "
            f"items added {added_total} (want {HOSTS_ITEMS * rounds})",
            not errors and doubles == done_twice == enqueued_twice == missing == 0
            and added_total == HOSTS_ITEMS * rounds,
            [
                f"hosts that finished items, per round: {shared}; seconds from the gate to "
                f"the last host done: {', '.join(f'{t:.1f}' for t in took)}",
                *sorted(set(errors))[:5],
            ],
        )
    )  # fmt: skip


def trial_hosts(args: argparse.Namespace, rng: random.Random) -> list[Figure]:
    del rng
    import psycopg

    url = os.environ.get("AGENT_HARNESS_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/test"
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        return [show(Figure("hosts", "PostgreSQL", f"not reachable at {url}: {exc}", False))]
    rounds = 1 if args.quick else 2
    # Commits are not flushed to disk one by one (durability is not what is measured here, and
    # the disk is shared with whatever else the machine does).
    fast = f"{url}{'&' if '?' in url else '?'}options=-csynchronous_commit%3Doff"
    figures = []
    for n in (3, 8):
        for migrated in (True, False):
            figures.append(hosts_together(fast, n, migrated, rounds))
    return figures


# -- 6. secrets ------------------------------------------------------------------------------


def token_like(prefix: str, n: int) -> str:
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(n))


@dataclass
class SecretsRig:
    tmp: Path
    forge: Forge
    api_url: str
    model_url: str
    token: str

    def repo(self, name: str) -> tuple[str, Path, Path]:
        self.forge.create_repo("rel", name, auto_init=False)
        work = self.tmp / name / "clone"
        work.parent.mkdir(parents=True)
        seed_repository(EXAMPLES / "project", self.forge.clone_url("rel", name), work)
        cwd = self.tmp / name / "run"
        cwd.mkdir()
        (cwd / "PLAN.md").write_text("### T1: Count words\nMake it.\n")
        return f"rel/{name}", work, cwd

    def run(
        self, name: str, agent_steps: dict[str, Any], host: str, env: dict[str, str],
        checks: list[str] = (),  # type: ignore[assignment]
    ) -> tuple[int, subprocess.Popen[str], str, str, Path]:  # fmt: skip
        repo, work, cwd = self.repo(name)
        agent = shlex.join(write_scripted_agent(self.tmp / "agents", agent_steps))
        argv = harness(
            "run", "--repo", repo, "--work", str(work), "--plan", "PLAN.md",
            "--agent", agent + " {prompt_file}", "--reviewer", "openai:gpt-test",
            "--max-attempts", "1", "--json",
        )  # fmt: skip
        for check in checks:
            argv += ["--check", check]
        with private_tmux(self.tmp / name / "tmux") as tmux_env:
            full = {
                "PATH": os.pathsep.join([str(Path(PY).parent), os.environ.get("PATH", "")]),
                "LANG": "C.UTF-8",
                "GITHUB_API_URL": self.api_url,
                "OPENAI_BASE_URL": f"{self.model_url}/v1",
                "AGENT_HARNESS_SESSIONS__HOST": host,
                "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
                **tmux_env,
                **env,
            }
            proc = subprocess.Popen(
                argv, cwd=cwd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            try:
                out, err = proc.communicate(timeout=240)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return int(proc.returncode), proc, out, err, cwd


def secret_hunt(rig: SecretsRig, host: str) -> Figure:
    values = {
        "GH_TOKEN": rig.token,
        "OPENAI_API_KEY": token_like("sk-proj-", 40),
        "ANTHROPIC_API_KEY": token_like("sk-ant-api03-", 40),
        "DATABASE_URL": f"postgresql://app:{token_like('', 24)}@db.internal/app",
        "PAYMENTS_SERVICE_PASSWORD": token_like("", 24),
        "RELEASE_NOTES": token_like("ghp_", 36),  # a token under a harmless name
    }
    canary = token_like("canary-", 16)
    home = rig.tmp / f"home-{host}"
    home.mkdir()
    needles = rig.tmp / f"needles-{host}.json"
    needles.write_text(json.dumps({"secrets": list(values.values()), "canary": canary}))
    scan = rig.tmp / f"scan-{host}.json"
    check_env = rig.tmp / f"check-env-{host}.json"
    state = rig.tmp / f"hunt-{host}" / "run" / ".agent-harness"
    steps = {
        "steps": [
            {"secret_scan": {"needles": str(needles), "out": str(scan),
                             "dirs": [str(state), str(home)]}},
            {"write_file": {"path": "scanned.txt", "content": "looked everywhere\n"}},
        ],
        "exit": 0,
    }  # fmt: skip
    dump = f"import json, os; json.dump(dict(os.environ), open({str(check_env)!r}, 'w'))"
    env = {"HOME": str(home), "RELIABILITY_CANARY": canary, **values}
    code, proc, out, err, _ = rig.run(
        f"hunt-{host}", steps, host, env, checks=[shlex.join([PY, "-c", dump])]
    )
    names = {0: "?"} | dict(enumerate(values))
    if not scan.exists():
        return show(Figure("secrets", f"an agent hunting under {host}", "it never ran", False,
                           [f"exit {code}: {err[-400:]}"]))  # fmt: skip
    found = json.loads(scan.read_text())
    hits = found["hits"]
    seen_by_check = json.loads(check_env.read_text()) if check_env.exists() else {}
    in_check = [n for n, v in values.items() if n in seen_by_check or v in seen_by_check.values()]
    printed = [n for n, v in values.items() if v in out or v in err]
    canary_seen = proc.pid in found["canary_pids"]
    delivered = '"pr_opened"' in out
    details = [
        f"{names.get(h['secret'], '?')} at {h['where']} ({h.get('cmd', '')[:80]})" for h in hits
    ]
    details += [f"the check's environment held {n}" for n in in_check]
    details += [f"printed by the harness: {n}" for n in printed]
    if not delivered:
        details.append(f"the item was not delivered (exit {code}): {err[-300:]}")
    return show(
        Figure(
            "secrets",
            f"an agent under {host} reading every /proc/*/environ and cmdline it could "
            f"({found['read']} files) and the state dir, for {len(values)} secrets",
            f"secrets found {len(hits)}, held by the check {len(in_check)}, printed "
            f"{len(printed)}; canary in the harness's environ "
            + ("found" if canary_seen else "NOT found"),
            not hits and not in_check and not printed and canary_seen and delivered,
            details,
        )
    )  # fmt: skip


def leaked_diffs(rig: SecretsRig) -> Figure:
    known = token_like("sk-ant-api03-", 40)
    shaped = token_like("ghp_", 36)  # shaped like a GitHub token, known to nobody
    cases = [
        ("known value", "config/settings.py", f"A = 1\nKEY = '{known}'\n", known,
         "config/settings.py:2"),
        ("token shape", "tests/fixtures/tokens.txt", f"{shaped}\n", shaped,
         "tests/fixtures/tokens.txt:1"),
    ]  # fmt: skip
    pushed = named = kept_out = 0
    details = []
    for number, (label, path, text, value, where) in enumerate(cases):
        steps = {"steps": [{"write_file": {"path": path, "content": text}}], "exit": 0}
        env = {"HOME": str(rig.tmp), "GH_TOKEN": rig.token, "OPENAI_API_KEY": "sk-reliability",
               "ANTHROPIC_API_KEY": known}  # fmt: skip
        name = f"leak{number}"
        _, _, out, err, cwd = rig.run(name, steps, "headless", env)
        bare = rig.forge.repo_path("rel", name)
        heads = git("--git-dir", str(bare), "for-each-ref", "--format=%(refname)", "refs/heads")
        branches = [h for h in heads.split() if h != "refs/heads/main"]
        carrying = [
            b for b in branches if value in git("--git-dir", str(bare), "log", "-p", b, "--")
        ]
        pushed += len(carrying)
        report = next(
            (json.loads(x) for x in reversed(out.splitlines()) if '"run_finished"' in x), {}
        )
        [item] = report.get("items", [{"state": "?", "reason": err[-200:]}])
        reason = str(item.get("reason") or "")
        named += item["state"] == "failed" and where in reason
        # The item's worktree keeps the agent's file for a person to look at; anywhere else
        # under the state dir (the event log, logs, prompts) would be a leak.
        holders = [
            p.relative_to(cwd / ".agent-harness")
            for p in (cwd / ".agent-harness").rglob("*")
            if p.is_file() and value.encode() in p.read_bytes()
        ]
        elsewhere = [str(p) for p in holders if p.parts[0] != "worktrees"]
        local = git("log", "--all", "-p", "--format=%H", cwd=rig.tmp / name / "clone")
        details.append(
            f"{label}: in the item's worktree {len(holders) - len(elsewhere)} file(s), elsewhere "
            f"under the state dir {elsewhere}, in local commits: "
            + ("yes" if value in local else "no")
        )
        leaked_here = bool(elsewhere) or value in out or value in err
        kept_out += not leaked_here
        details.append(f"{label}: {item['state']}: {reason[:110]}")
    return show(
        Figure(
            "secrets",
            f"{len(cases)} diffs carrying a secret (a known key's value; a GitHub-token shape)",
            f"pushed {pushed}, items failed naming file:line {named} of {len(cases)}, value kept "
            f"out of output, event log and logs {kept_out} of {len(cases)}",
            pushed == 0 and named == len(cases) and kept_out == len(cases),
            details,
        )
    )


def trial_secrets(args: argparse.Namespace, rng: random.Random) -> list[Figure]:
    del rng
    hosts = ["headless"] + (["tmux"] if shutil.which("tmux") else [])
    token = token_like("ghp_", 36)
    with tempfile.TemporaryDirectory(prefix="ah-rel-secrets-") as name:
        tmp = Path(name)
        forge = Forge(tmp / "forge", token=token)
        server = ForgeServer(forge, host="127.0.0.1", port=0)
        try:
            with server, ModelServer([ScriptedResponder(review_rules)]) as model:
                rig = SecretsRig(tmp, forge, server.api_url, model.url, token)
                figures = [secret_hunt(rig, host) for host in hosts]
                figures.append(leaked_diffs(rig))
        finally:
            forge.close()
    return figures


# -- main ------------------------------------------------------------------------------------

TRIALS: dict[str, Callable[[argparse.Namespace, random.Random], list[Figure]]] = {
    "sync": trial_sync,
    "run": trial_run,
    "faults": trial_faults,
    "plans": trial_plans,
    "hosts": trial_hosts,
    "secrets": trial_secrets,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer kills and repeats")
    parser.add_argument("--only", choices=sorted(TRIALS), help="run one trial kind")
    parser.add_argument("--seed", type=int, help="seed of the random kill moments")
    parser.add_argument("--sync-kills", type=int, help="SIGKILLs of the sync (default 30)")
    parser.add_argument("--run-kills", type=int, help="SIGKILLs of `run` (default 24)")
    parser.add_argument("--run-trials", type=int, help="trials the run kills spread over (8)")
    parser.add_argument("--verbose", action="store_true", help="every hostile input's outcome")
    args = parser.parse_args(argv)
    args.sync_kills = args.sync_kills or (6 if args.quick else 30)
    args.run_kills = args.run_kills or (4 if args.quick else 24)
    args.run_trials = max(1, args.run_trials or (2 if args.quick else 8))
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"reliability: seed {seed}{' (quick)' if args.quick else ''}; {os.cpu_count()} cores, "
        f"load average {load}",
        flush=True,
    )
    figures: list[Figure] = []
    for name, trial in TRIALS.items():
        if args.only and name != args.only:
            continue
        start = time.monotonic()
        figures += trial(args, rng)
        print(f"  ({name}: {time.monotonic() - start:.0f} s)", flush=True)
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    broken = [f for f in figures if not f.holds]
    print(f"{len(figures) - len(broken)} of {len(figures)} figures hold", flush=True)
    for figure in broken:
        print(f"  does not hold: [{figure.trial}] {figure.tried}", flush=True)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
