"""Hosts sharing one PostgreSQL queue, as people run them: `agent-harness run --db ... --host-id`
in clones of one repository on the forge. Three hosts are SIGKILLed while each holds an item,
each at another stage (its agent working, its checks running, its pull request being opened);
the two others take those items over once their leases lapse, and every item is delivered once.
The three kills share one run of the fleet, so its start-up and the lease's lapse are paid once.
"""

from __future__ import annotations

import collections
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_harness.forge import FaultKind
from agent_harness.queue.items import list_items
from agent_harness.store.events import Event
from agent_harness.tracker.markers import read_marker, read_pull_marker
from tests.shared.local_project import GATED_AGENT, git
from tests.shared.stores import Engine, cli_url

from .conftest import REPO, Harness
from .test_resume import cli_env

pytestmark = [pytest.mark.acceptance, pytest.mark.postgres]

# One item held by each host, and one more: enough for every host to surely hold one of its own.
ITEMS = [f"N{n}" for n in range(1, 7)]
PLAN = "\n".join(
    f"### {i}: Write note {i}\nWrite `{i.lower()}.txt`.\n\ncheck: `test -f {i.lower()}.txt`\n"
    for i in ITEMS
)
PROJECT = f"{REPO}:PLAN"
SURVIVORS = ("build-1", "build-2")
# Each doomed host is killed at its own stage of its item.
DOOMED = {"build-3": "agent", "build-4": "checks", "build-5": "delivery"}
HOSTS = (*SURVIVORS, *DOOMED)
LEASE_S = 3  # short, so the killed hosts' items are taken over within seconds


def host_command(h: Harness, engine: Engine, name: str, *checks: str) -> tuple[list[str], Path]:
    """`agent-harness run` for host `name`, and its own directory with a clone, the plan and
    its agent (which writes the item's note once `<item>.go` is in the host's gates)."""
    home = h.tmp / "hosts" / name
    (home / "gates").mkdir(parents=True)
    git(h.tmp, "clone", "-q", h.forge.forge.clone_url(*REPO.split("/")), str(home / "app"))
    (home / "PLAN.md").write_text(PLAN)
    (home / "agent.py").write_text(GATED_AGENT)
    agent = shlex.join([sys.executable, str(home / "agent.py"), str(home / "gates")])
    argv = [
        sys.executable, "-m", "agent_harness", "run", "--repo", REPO, "--work", "app",
        "--plan", "PLAN.md", "--agent", agent + " --prompt-file {prompt_file}",
        "--reviewer", "openai:gpt-test", "--github-url", h.forge.server.api_url,
        "--db", cli_url(engine), "--host-id", name, "--json",
    ]  # fmt: skip
    for check in checks:
        argv += ["--check", check.format(gates=home / "gates")]
    return argv, home


def start(argv: list[str], home: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def worker(event: Event) -> str:
    return str(event.payload.as_dict().get("worker"))


def events_of(engine: Engine) -> list[Event]:
    store = engine.open()
    try:
        return store.all_events(project=PROJECT)
    finally:
        store.close()


# A check that says it started, then waits for a go that never comes.
HELD_CHECK = "sh -c 'touch {gates}/checking; while [ ! -f {gates}/checks.go ]; do sleep 0.05; done'"
PULLS = "POST /repos/{owner}/{repo}/pulls"


def reached(stage: str, h: Harness, gates: Path) -> Callable[[], bool]:
    """Whether a doomed host is at `stage` of its item: its agent working, its check running,
    or its pull request's creation held at the forge (only the delivery host gets that far
    while the others are held)."""
    if stage == "agent":
        return lambda: any(gates.glob("*.started"))
    if stage == "checks":
        return lambda: (gates / "checking").exists()
    return lambda: h.forge.forge.request_counts(None).get(PULLS, 0) > 0


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_hosts_killed_holding_an_item_at_each_stage_every_item_delivered_once(
    harness: Harness, engine: Engine
) -> None:
    """Killed while its agent works, after its agent finished (in the checks), or while its
    pull request is being opened: the host that takes the item over runs the agent again in
    its own clone in the first two cases, and finds the pull request in the last."""
    env = cli_env(harness) | {
        "AGENT_HARNESS_BUDGETS__LEASE_S": str(LEASE_S),
        "AGENT_HARNESS_SESSIONS__HOST": "headless",
        # The hosts' agents' temporary folders, in a machine folder of the test's own.
        "TMPDIR": str(machine_tmp := harness.tmp / "machine-tmp"),
    }
    machine_tmp.mkdir()
    engine.open().close()  # the schema, made and migrated
    # All hosts start at once on a repository with no issues yet, and each one's sync of the
    # plan to issues is slow enough (two seconds in all) to overlap the others'.
    faults = harness.forge.forge.faults
    faults.inject(FaultKind.LATENCY, "POST", "*/issues", delay_s=2.0 / len(ITEMS), count=None)
    # The first pull request (the delivery host's: every other host is held) is held, and then
    # made.
    faults.inject(FaultKind.LATENCY, "POST", "*/pulls", delay_s=LEASE_S / 2)
    homes = {name: host_command(harness, engine, name) for name in SURVIVORS}
    for name, stage in DOOMED.items():
        homes[name] = host_command(
            harness, engine, name, *([HELD_CHECK] if stage == "checks" else [])
        )
        if stage != "agent":  # its agent finishes at once, and it is held after it
            for item in ITEMS:
                (homes[name][1] / "gates" / f"{item}.go").touch()
    hosts = {name: (start(argv, home, env), home / "gates") for name, (argv, home) in homes.items()}
    # Every other agent waits for its go: while the survivors hold an item each, every doomed
    # host surely claims one too. Each is killed the moment it reaches its stage.
    held: dict[str, str] = {}  # doomed host -> the item it died holding
    try:
        waiting = dict(DOOMED)
        deadline = time.monotonic() + 60
        while waiting:
            for name, stage in list(waiting.items()):
                proc, gates = hosts[name]
                if not reached(stage, harness, gates)():
                    assert proc.poll() is None, (name, stage, proc.communicate())
                    continue
                [started] = gates.glob("*.started")
                item = started.name.removesuffix(".started")
                claims = [e for e in events_of(engine) if e.kind == "claimed" and e.item == item]
                assert [worker(e) for e in claims] == [f"{name}/w1"], (name, stage)
                proc.send_signal(signal.SIGKILL)  # dies holding `item`
                assert proc.wait(30) == -signal.SIGKILL
                held[name] = item
                del waiting[name]
            assert time.monotonic() < deadline, f"never reached: {waiting}"
            time.sleep(0.05)
        for name in SURVIVORS:
            for item in ITEMS:
                (hosts[name][1] / f"{item}.go").touch()
        others = {name: hosts[name][0] for name in SURVIVORS}
        outputs = {name: proc.communicate(timeout=120) for name, proc in others.items()}
    finally:
        for name in DOOMED:  # a dead host's orphaned agent or check may end now
            for item in ITEMS:
                (hosts[name][1] / f"{item}.go").touch()
            (hosts[name][1] / "checks.go").touch()
        for proc, _ in hosts.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, proc in others.items():
        out, err = outputs[name]
        report = json.loads(out.splitlines()[-1]) if out.strip() else {"items": []}
        ends = [(i["id"], i["state"], i.get("reason")) for i in report.get("items", [])]
        assert proc.returncode == 0, (name, err, ends)
        assert "Traceback" not in err, (name, err)

    # On the forge: one issue and one pull request per item, no more.
    repo = harness.forge.github.get_repo(REPO)
    issues = collections.Counter(
        marker.item_id
        for issue in repo.get_issues(state="all")
        if issue.pull_request is None and (marker := read_marker(issue.body or ""))
    )
    assert issues == {item: 1 for item in ITEMS}
    pulls = collections.Counter(
        pulled.item_id
        for pull in repo.get_pulls(state="all")
        if (pulled := read_pull_marker(pull.body or ""))
    )
    assert pulls == {item: 1 for item in ITEMS}

    # In the queue: every item delivered, once; each dead host's lease lapsed and a survivor's
    # claim took its item.
    events = events_of(engine)
    store = engine.open()
    try:
        states = {record.id: str(record.state) for record in list_items(store, PROJECT)}
    finally:
        store.close()
    assert states == {item: "pr_open" for item in ITEMS}
    completed = collections.Counter(e.item for e in events if e.kind == "completed")
    assert completed == {item: 1 for item in ITEMS}
    failures = [(e.item, e.kind) for e in events if e.kind in ("attempt_failed", "failed")]
    assert failures == [], failures
    assert sorted(held) == sorted(DOOMED) and len(set(held.values())) == len(DOOMED), held
    for name, stage in DOOMED.items():
        assert_taken_over(events, name, stage, held[name])
    workers = {worker(e).split("/")[0] for e in events if e.kind == "claimed"}
    assert workers == set(HOSTS)
    # The survivors removed their agents' folders. A host that died with its agent running
    # and never runs again leaves that agent's folder (nothing maps it back to a live host).
    left = list((machine_tmp / f"agent-harness-{os.getuid()}").iterdir())
    assert len(left) <= len(DOOMED) and all(not any(folder.iterdir()) for folder in left), left


def assert_taken_over(events: list[Event], name: str, stage: str, item: str) -> None:
    """The dead host's lease on `item` lapsed and a survivor's claim took it and completed it:
    by running the agent again in its own clone, or (killed in delivery) by delivering the
    pushed, approved work without doing it again."""
    told = f"{name} killed at its {stage}:\n" + "\n".join(
        f"{e.kind} {e.payload.as_dict()}" for e in events if e.item == item
    )
    story = [
        (e.kind, worker(e))
        for e in events
        if e.item == item and e.kind in ("claimed", "lease_expired", "completed")
    ]
    assert len(story) == 4, told
    assert story[:2] == [("claimed", f"{name}/w1"), ("lease_expired", f"{name}/w1")], told
    taker = story[2][1]
    assert story[2][0] == "claimed" and taker.split("/")[0] in SURVIVORS, told
    assert story[3] == ("completed", taker), told
    worktrees = [
        str(e.payload.as_dict()["worktree"])
        for e in events
        if e.item == item and e.kind == "agent_started"
    ]
    if stage == "delivery":  # the approved, pushed work is delivered, not done again
        assert len(worktrees) == 1, told
        assert [e.kind for e in events if e.item == item].count("review") == 1, told
        [opened] = [e.payload.as_dict() for e in events if e.kind == "pr_opened" and e.item == item]
        assert opened["reused"] is True, told
    else:  # the agent ran again in the taker's own clone: the dead host's work is elsewhere
        assert len(worktrees) == 2 and f"/{taker.split('/')[0]}/" in worktrees[1], told
