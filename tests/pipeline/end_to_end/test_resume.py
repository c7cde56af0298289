"""Kill `agent-harness run` with SIGKILL at several stages, run it again, check the outcome.

The harness runs as a real subprocess (the CLI) against a forge and a scripted reviewer that
live in the test. Each stage is held open by a flag file the test controls, so the kill lands
exactly where it should; removing the flag lets whatever survived (an agent in its session, a
request in flight at the forge) finish before or during the second run.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_harness.forge import FaultKind
from agent_harness.store.database import open_store
from agent_harness.testing.forge import TOKEN

from .conftest import REPO, Harness

pytestmark = pytest.mark.acceptance

PLAN = "### T1: Count words\nMake it.\n\ncheck: `python -m unittest tests.test_words`\n"
AGENT = Path(__file__).resolve().parents[3] / "examples" / "agent" / "tally_agent.py"


def cli_env(h: Harness) -> dict[str, str]:
    env = {k: v for k, v in h.env.items() if not k.startswith(("AGENT_HARNESS_", "GITHUB_"))}
    env |= {
        "GH_TOKEN": TOKEN,
        "OPENAI_BASE_URL": f"{h.model.url}/v1",
        "OPENAI_API_KEY": "sk-test",
        "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
        "AGENT_HARNESS_BUDGETS__LEASE_S": "60",
    }
    return env


def command(h: Harness, plan: Path, agent: str, checks: list[str]) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "agent_harness",
        "run",
        "--repo",
        REPO,
        "--work",
        str(h.work),
        "--plan",
        str(plan),
        "--agent",
        agent,
        "--reviewer",
        "openai:gpt-test",
        "--github-url",
        h.forge.server.api_url,
        "--json",
    ]
    for check in checks:
        argv += ["--check", check]
    return argv


def events(cwd: Path, kind: str) -> list[dict[str, object]]:
    db = cwd / ".agent-harness" / "harness.sqlite"
    if not db.exists():
        return []
    store = open_store(str(db))
    try:
        return [e.payload.as_dict() for e in store.all_events() if e.kind == kind]
    finally:
        store.close()


def run_until(argv: list[str], cwd: Path, env: dict[str, str], ready: Callable[[], bool]) -> None:
    """Start the CLI, wait for `ready`, then SIGKILL it."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    try:
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(f"the run ended before the kill: {proc.stderr.read()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise AssertionError("the stage to kill at never came")
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def finish(argv: list[str], cwd: Path, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    report = json.loads(last)
    assert report["event"] == "run_finished"
    return report


@pytest.fixture
def cwd(harness: Harness) -> Path:
    path = harness.tmp / "cwd"
    path.mkdir()
    (path / "PLAN.md").write_text(PLAN)
    return path


def flagged_agent(flag: Path) -> str:
    # Waits while the flag exists (the test kills the harness meanwhile), then does the work.
    script = (
        f"while [ -f {shlex.quote(str(flag))} ]; do sleep 0.05; done; "
        f"exec {shlex.quote(sys.executable)} {shlex.quote(str(AGENT))} "
        '--prompt-file "$0"'
    )
    return f"sh -c {shlex.quote(script)} {{prompt_file}}"


def plain_agent() -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))} --prompt-file {{prompt_file}}"


def assert_one_pull_with_the_work(h: Harness) -> None:
    pulls = h.pulls()
    assert len(pulls) == 1, [p.number for p in pulls]
    files = {
        f.filename for f in h.forge.github.get_repo(REPO).compare("main", pulls[0].head.sha).files
    }
    assert "tally/words.py" in files


def test_killed_during_the_agent_the_restarted_worker_takes_its_item_back_at_once(
    harness: Harness, cwd: Path
) -> None:
    flag = cwd / "hold-agent"
    flag.touch()
    argv = command(harness, cwd / "PLAN.md", flagged_agent(flag), ["python -m unittest"])
    env = cli_env(harness) | {"AGENT_HARNESS_BUDGETS__LEASE_S": "3600"}
    run_until(argv, cwd, env, lambda: bool(events(cwd, "agent_started")))
    flag.unlink()  # the agent, still alive in its session, now finishes its work
    report = finish(argv, cwd, env)
    [item] = report["items"]  # type: ignore[misc]
    assert item["state"] == "pr_open"
    assert_one_pull_with_the_work(harness)
    assert any(e.get("reused") for e in events(cwd, "worktree")), "the worktree is reused"
    # With an hour-long lease, the only way to finish now is for the restarted worker to take
    # its own item back at once instead of waiting for the lease to lapse.
    assert events(cwd, "lease_reclaimed")


@pytest.mark.slow
def test_killed_during_the_checks(harness: Harness, cwd: Path) -> None:
    flag = cwd / "hold-check"
    flag.touch()
    started = cwd / "check-started"
    hold = f"sh -c 'touch {started}; while [ -f {flag} ]; do sleep 0.05; done'"
    argv = command(harness, cwd / "PLAN.md", plain_agent(), [hold, "python -m unittest"])
    env = cli_env(harness)
    run_until(argv, cwd, env, started.exists)  # the kill lands while the check is running
    flag.unlink()
    report = finish(argv, cwd, env)
    [item] = report["items"]  # type: ignore[misc]
    assert item["state"] == "pr_open"
    assert_one_pull_with_the_work(harness)
    assert len(harness.reviews()) == 1
    # The agent had finished: the rerun goes on from its work, and the kill spent no attempt.
    assert len(events(cwd, "agent_started")) == 1
    assert item["attempts"] == 1
    assert any(e.get("why") == "the agent had finished" for e in events(cwd, "resumed"))


@pytest.mark.slow
def test_killed_between_push_and_pull_request(harness: Harness, cwd: Path) -> None:
    # The forge holds the PR request open; the harness dies waiting for the answer.
    harness.forge.forge.faults.inject(FaultKind.LATENCY, "POST", "*/pulls", delay_s=1.5)
    argv = command(harness, cwd / "PLAN.md", plain_agent(), ["python -m unittest"])
    env = cli_env(harness)

    def pull_request_in_flight() -> bool:
        counts = harness.forge.forge.request_counts(None)
        return counts.get("POST /repos/{owner}/{repo}/pulls", 0) > 0

    run_until(argv, cwd, env, pull_request_in_flight)  # the forge is holding that request
    report = finish(argv, cwd, env)
    [item] = report["items"]  # type: ignore[misc]
    assert item["state"] == "pr_open"
    assert_one_pull_with_the_work(harness)
    assert len(harness.reviews()) == 1, "approved work that was pushed is not reviewed again"
    calls = events(cwd, "model.call")
    assert calls and all(c.get("role") == "reviewer" for c in calls), "model calls are recorded"
    assert "sk-test" not in json.dumps(calls)
    assert any(events(cwd, "resumed"))


@pytest.mark.parametrize("host", ["tmux", "headless"])
def test_an_agent_that_finished_while_its_run_was_dead_is_not_run_again(
    harness: Harness, cwd: Path, host: str
) -> None:
    flag, runs, done = cwd / "hold-agent", cwd / "agent-runs", cwd / "agent-done"
    flag.touch()
    # Counts its starts, waits while the flag exists, does the work, then says it is done.
    script = (
        f"echo started >> {shlex.quote(str(runs))}; "
        f"while [ -f {shlex.quote(str(flag))} ]; do sleep 0.05; done; "
        f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))} "
        f'--prompt-file "$0" && touch {shlex.quote(str(done))}'
    )
    agent = f"sh -c {shlex.quote(script)} {{prompt_file}}"
    argv = command(harness, cwd / "PLAN.md", agent, ["python -m unittest"])
    env = cli_env(harness) | {
        "AGENT_HARNESS_BUDGETS__LEASE_S": "3600",
        "AGENT_HARNESS_SESSIONS__HOST": host,
    }
    run_until(argv, cwd, env, runs.exists)  # the run dies while its agent works
    flag.unlink()
    deadline = time.monotonic() + 60
    while not done.exists():  # the agent ends its work with nobody watching
        assert time.monotonic() < deadline, "the agent never finished"
        time.sleep(0.05)
    report = finish(argv, cwd, env)
    [item] = report["items"]  # type: ignore[misc]
    assert item["state"] == "pr_open"
    assert_one_pull_with_the_work(harness)
    # The rerun reads how the agent ended instead of paying for the same work again.
    assert runs.read_text().splitlines() == ["started"]
    assert len(events(cwd, "agent_started")) == 1
    [finished] = events(cwd, "agent_finished")
    assert finished["state"] == "done"
