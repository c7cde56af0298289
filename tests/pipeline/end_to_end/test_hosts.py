"""Three hosts, one PostgreSQL queue, as people run them: `agent-harness run --db ... --host-id`
in three clones of one repository on the forge. One host is SIGKILLed while it holds an item;
the others take that item over once its lease lapses, and every item is delivered once."""

from __future__ import annotations

import collections
import json
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_harness.forge import FaultKind
from agent_harness.queue.items import list_items
from agent_harness.store.events import Event
from agent_harness.tracker.sync import read_marker, read_pull_marker
from tests.shared.local_project import GATED_AGENT, git, wait_for
from tests.shared.stores import Engine, cli_url

from .conftest import REPO, Harness
from .test_resume import cli_env

pytestmark = [pytest.mark.acceptance, pytest.mark.postgres]

# One item held by each host, and one more: enough for build-3 to surely hold one of its own.
ITEMS = [f"N{n}" for n in range(1, 5)]
PLAN = "\n".join(
    f"### {i}: Write note {i}\nWrite `{i.lower()}.txt`.\n\ncheck: `test -f {i.lower()}.txt`\n"
    for i in ITEMS
)
PROJECT = f"{REPO}:PLAN"
HOSTS = ("build-1", "build-2", "build-3")
LEASE_S = 3  # short, so the killed host's item is taken over within seconds


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
    """Whether build-3 is at `stage` of its item: its agent working, its check running, or its
    pull request's creation held at the forge."""
    if stage == "agent":
        return lambda: any(gates.glob("*.started"))
    if stage == "checks":
        return lambda: (gates / "checking").exists()
    return lambda: h.forge.forge.request_counts(None).get(PULLS, 0) > 0


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
@pytest.mark.parametrize("stage", ["agent", "checks", "delivery"])
def test_three_hosts_one_killed_holding_an_item_every_item_delivered_once(
    harness: Harness, engine: Engine, stage: str
) -> None:
    """Killed while its agent works, after its agent finished (in the checks), or while its
    pull request is being opened: the host that takes the item over runs the agent again in
    its own clone in the first two cases, and finds the pull request in the last."""
    env = cli_env(harness) | {
        "AGENT_HARNESS_BUDGETS__LEASE_S": str(LEASE_S),
        "AGENT_HARNESS_SESSIONS__HOST": "headless",
    }
    engine.open().close()  # the schema, made and migrated
    # All three start at once on a repository with no issues yet, and each one's sync of the
    # plan to issues is slow enough (half a second per issue, two seconds in all) to overlap
    # the others'.
    faults = harness.forge.forge.faults
    faults.inject(FaultKind.LATENCY, "POST", "*/issues", delay_s=0.5, count=None)
    # The first pull request (build-3's: the others' agents wait) is held, and then made.
    faults.inject(FaultKind.LATENCY, "POST", "*/pulls", delay_s=LEASE_S / 2)
    homes = {name: host_command(harness, engine, name) for name in HOSTS[:2]}
    homes["build-3"] = host_command(
        harness, engine, "build-3", *([HELD_CHECK] if stage == "checks" else [])
    )
    if stage != "agent":  # build-3's agent finishes at once, and is held after it
        for item in ITEMS:
            (homes["build-3"][1] / "gates" / f"{item}.go").touch()
    hosts = {name: (start(argv, home, env), home / "gates") for name, (argv, home) in homes.items()}
    # Every other agent waits for its go: while build-1 and build-2 hold an item each, build-3
    # surely claims one too.
    doomed, doomed_gates = hosts["build-3"]
    try:
        wait_for(f"build-3 at its {stage}", reached(stage, harness, doomed_gates), doomed)
        [started] = doomed_gates.glob("*.started")
        held = started.name.removesuffix(".started")
        claims = [e for e in events_of(engine) if e.kind == "claimed" and e.item == held]
        assert [worker(e) for e in claims] == ["build-3/w1"]
        doomed.send_signal(signal.SIGKILL)  # dies holding `held`
        assert doomed.wait(30) == -signal.SIGKILL
        for name in ("build-1", "build-2"):
            for item in ITEMS:
                (hosts[name][1] / f"{item}.go").touch()
        others = {name: proc for name, (proc, _) in hosts.items() if name != "build-3"}
        outputs = {name: proc.communicate(timeout=120) for name, proc in others.items()}
    finally:
        for item in ITEMS:  # the dead host's orphaned agent or check may end now
            (doomed_gates / f"{item}.go").touch()
        (doomed_gates / "checks.go").touch()
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

    # In the queue: every item delivered, once; the dead host's lease lapsed and another host's
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
    told = "\n".join(f"{e.kind} {e.payload.as_dict()}" for e in events if e.item == held)
    story = [
        (e.kind, worker(e))
        for e in events
        if e.item == held and e.kind in ("claimed", "lease_expired", "completed")
    ]
    assert len(story) == 4, told
    assert story[:2] == [("claimed", "build-3/w1"), ("lease_expired", "build-3/w1")], told
    taker = story[2][1]
    assert story[2][0] == "claimed" and taker.split("/")[0] in ("build-1", "build-2"), told
    assert story[3] == ("completed", taker), told
    assert [e.kind for e in events if e.kind in ("attempt_failed", "failed")] == [], told
    worktrees = [
        str(e.payload.as_dict()["worktree"])
        for e in events
        if e.item == held and e.kind == "agent_started"
    ]
    if stage == "delivery":  # the approved, pushed work is delivered, not done again
        assert len(worktrees) == 1, told
        assert [e.kind for e in events if e.item == held].count("review") == 1, told
        [opened] = [e.payload.as_dict() for e in events if e.kind == "pr_opened" and e.item == held]
        assert opened["reused"] is True, told
    else:  # the agent ran again in the taker's own clone: the dead host's work is elsewhere
        assert len(worktrees) == 2 and f"/{taker.split('/')[0]}/" in worktrees[1], told
    workers = {worker(e).split("/")[0] for e in events if e.kind == "claimed"}
    assert workers == set(HOSTS)
