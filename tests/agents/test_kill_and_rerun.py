"""Kill `agent-harness run` (SIGKILL) while Claude Code is mid-item, then run it again."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_harness.queue.items import get_item
from agent_harness.store.database import open_store
from agent_harness.testing.forge import TOKEN
from agent_harness.testing.provider import Exchange, Hang, Say, Step, WriteFile, verdict

from .conftest import REPO, Rig

pytestmark = [pytest.mark.npm, pytest.mark.acceptance]

PLAN = """\
### A1: Shout helper
Add `shout(text)` to `tally/shout.py`: the text upper-cased, then an exclamation mark.

check: `python -c "from tally.shout import shout; r = shout('hi'); assert r == 'HI!', r"`
"""
WORK = WriteFile("tally/shout.py", "def shout(text):\n    return text.upper() + '!'\n")


def cli(rig: Rig, cwd: Path) -> tuple[list[str], dict[str, str]]:
    argv = [
        sys.executable, "-m", "agent_harness", "run", "--repo", REPO, "--work", str(rig.work),
        "--plan", str(cwd / "PLAN.md"), "--agent", "claude", "--reviewer", "codex",
        "--github-url", rig.forge.server.api_url, "--json",
    ]  # fmt: skip
    env = dict(rig.env)
    env |= {
        "GH_TOKEN": TOKEN,
        "AGENT_HARNESS_TRACKER__WRITE_SPACING_S": "0",
        # Short, so the killed run's claim lapses soon; a live run renews it by heartbeat.
        "AGENT_HARNESS_BUDGETS__LEASE_S": "2",
    }
    return argv, env


def lease_expires(cwd: Path) -> float | None:
    store = open_store(str(cwd / ".agent-harness" / "harness.sqlite"))
    try:
        return get_item(store, f"{REPO}:PLAN", "A1").lease_expires
    finally:
        store.close()


def events(cwd: Path, kind: str) -> list[dict[str, object]]:
    store = open_store(str(cwd / ".agent-harness" / "harness.sqlite"))
    try:
        return [e.payload.as_dict() for e in store.all_events() if e.kind == kind]
    finally:
        store.close()


def test_killed_while_claude_works_then_rerun_reuses_the_worktree_and_opens_one_pr(
    rig: Rig,
) -> None:
    release = threading.Event()

    def claude(exchange: Exchange) -> Step:
        if exchange.side or exchange.turn > 0:
            return Say("Done.")
        # The first attempt stalls mid-item until the harness has been killed.
        return WORK if release.is_set() else Hang(max_s=60, release=release, then=WORK)

    rig.anthropic.scenario = claude
    rig.openai.scenario = lambda _: verdict(True, ["fine"])
    cwd = rig.tmp / "cwd"
    cwd.mkdir()
    (cwd / "PLAN.md").write_text(PLAN)
    argv, env = cli(rig, cwd)

    first = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while not any("Work item A1" in r.text for r in rig.anthropic.model_requests()):
        assert first.poll() is None, first.stderr.read() if first.stderr else ""
        assert time.monotonic() < deadline, "Claude Code never called the model"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    release.set()  # Claude Code, still alive in its session, now gets its answer
    # The dead run's claim lapses by itself (no one clears it); then the re-run may take it.
    expires = lease_expires(cwd)
    assert expires is not None
    while time.time() <= expires:
        time.sleep(0.1)

    second = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout.strip().splitlines()[-1])
    [item] = report["items"]
    assert item["state"] == "pr_open", item
    [pull] = rig.pulls()
    assert pull.title == "A1: Shout helper"
    worktrees = events(cwd, "worktree")
    assert [w["reused"] for w in worktrees] == [False, True]
    assert len(events(cwd, "pr_opened")) == 1
