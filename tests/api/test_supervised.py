"""Supervised mode end to end on the embedded forge: two projects registered over HTTP, started,
watched through /api/work until their items have pull requests, both at once; one stopped
while the other runs on; the other's reviewer re-routed live, and the next review is asked of
the new route; then paused over /api/control, an item added meanwhile waits, and after a
resume it is worked to a pull request."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent_harness.api.app import create_app
from agent_harness.api.context import ApiContext
from agent_harness.api.pools import ProjectPools
from agent_harness.api.smoke import smoke
from agent_harness.config import Settings
from agent_harness.demo.rules import review_rules
from agent_harness.forge.local import describe_repo
from agent_harness.git.runner import git
from agent_harness.pipeline.trackers import open_tracker
from agent_harness.store.database import Store, open_store
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from tests.api.conftest import AUTH, TOKEN

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PLAN = """\
### T1: Count words
Add `word_count(text: str) -> int` to `tally/words.py`. Words are runs of
non-whitespace characters; an empty string has 0 words.

check: `python -m unittest tests.test_words`
"""


def _clone(root: Path, repo: str, settings: Settings) -> Path:
    """The example project as a user's clone, its history pushed to the local forge."""
    work = root / "clones" / repo.replace("/", "-")
    shutil.copytree(EXAMPLES / "project", work)
    (work / "PLAN.md").write_text(PLAN, encoding="utf-8")
    git(work, "init", "-q", "--initial-branch=main")
    git(work, "config", "user.name", "Dee")
    git(work, "config", "user.email", "dee@example.com")
    git(work, "add", "--all")
    git(work, "commit", "-q", "-m", "tally as it is")
    with open_tracker(repo, "local", None, settings, True):
        pass  # the repository is made, empty, for this history
    git(work, "remote", "add", "origin", describe_repo(Path(settings.state_dir), repo).clone_url)
    git(work, "push", "-q", "origin", "main")
    return work


@dataclass
class Server:
    client: TestClient
    pools: ProjectPools
    store: Store
    reviewer: ModelServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Server, dict[str, Path]]]:
    settings = Settings(state_dir=str(tmp_path / "state"), sessions={"host": "headless"})
    clones = {repo: _clone(tmp_path, repo, settings) for repo in ("me/app", "me/lib")}
    with ModelServer([ScriptedResponder(review_rules)]) as reviewer:
        env = {
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
            "HOME": str(tmp_path),
            "OPENAI_BASE_URL": f"{reviewer.url}/v1",
            "OPENAI_API_KEY": "sk-local",
        }
        store = open_store(str(tmp_path / "harness.sqlite"))
        audit = str(tmp_path / "elsewhere" / "audit.sqlite")  # serve --audit-db
        pools = ProjectPools(store, settings, audit_db=audit, idle_s=0.2, env=env)
        ctx = ApiContext(
            store=store, mode="supervised", pools=pools, settings=settings, audit_url=audit
        )
        try:
            yield Server(TestClient(create_app(ctx, token=TOKEN)), pools, store, reviewer), clones
        finally:
            pools.close(join_s=30)
            store.close()


def _wait_for(client: TestClient, project: str, state: str) -> dict[str, object]:
    deadline = time.monotonic() + 120  # a fail-safe for a stuck run, not a measurement
    while time.monotonic() < deadline:
        work = client.get("/api/work", params={"project": project}, headers=AUTH).json()
        if work["counts"].get(state):
            return work  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise AssertionError(f"{project} never reached {state}: {work}")


def test_two_projects_registered_over_http_run_to_pull_requests(
    server: tuple[Server, dict[str, Path]],
) -> None:
    running, clones = server
    client = running.client
    agent = shlex.join([sys.executable, str(EXAMPLES / "agent" / "tally_agent.py")])
    for repo, work in clones.items():
        spec = {
            "repo": repo, "work_dir": str(work), "plan": "PLAN.md", "forge": "local",
            "agent": agent + " --prompt-file {prompt_file}", "reviewer": "openai:gpt-test",
            # me/lib runs only each item's own check: T2, added below with none, goes to review
            "checks": ["python -m unittest"] if repo == "me/app" else [],
        }  # fmt: skip
        made = client.post("/api/projects", json=spec, headers=AUTH)
        assert made.status_code == 201, made.text
        assert made.json()["control"] == "stopped"
    able = smoke("http://testserver", TOKEN, client=client)
    assert able.able_to_run, able.as_json()
    assert [c.name for c in able.checks][-2:] == [
        "me/lib:PLAN: clone and plan",
        "me/lib:PLAN: tracker (dry-run sync)",
    ]
    dry = client.post("/api/plan/sync", json={"project": "me/app:PLAN"}, headers=AUTH).json()
    assert dry["dry_run"] is True and [c["id"] for c in dry["created"]] == ["T1"]
    assert dry["writes"] == 0
    for project in ("me/app:PLAN", "me/lib:PLAN"):
        started = client.post(f"/api/projects/{project}/start", headers=AUTH)
        assert started.status_code == 200 and started.json()["control"] == "running"
    assert client.get("/api/summary", headers=AUTH).json()["running"] == [
        "me/app:PLAN",
        "me/lib:PLAN",
    ]
    for project in ("me/app:PLAN", "me/lib:PLAN"):
        work = _wait_for(client, project, "pr_open")
        assert work["counts"] == {"pr_open": 1}
        detail = client.get("/api/work/T1", params={"project": project}, headers=AUTH).json()
        kinds = [e["kind"] for e in detail["events"]]
        assert "pr_opened" in kinds and detail["session"] is not None
    # Each pass is recorded in the audit the server reads (serve --audit-db), with no POST
    # /api/audit/reconcile: the pull requests show there once their passes end.
    deadline = time.monotonic() + 120  # a fail-safe, not a measurement
    while time.monotonic() < deadline:
        audited = client.get("/api/audit/events", params={"kind": "pr_opened"}, headers=AUTH)
        if audited.status_code == 200 and len(audited.json()["events"]) == 2:
            break
        time.sleep(0.1)
    assert audited.status_code == 200, audited.text
    assert sorted(e["project"] for e in audited.json()["events"]) == ["me/app:PLAN", "me/lib:PLAN"]
    stopped = client.post("/api/projects/me/app:PLAN/stop", headers=AUTH)
    assert stopped.status_code == 200 and stopped.json()["control"] == "stopped"
    listed = client.get("/api/projects", headers=AUTH).json()["projects"]
    assert [(p["id"], p["control"]) for p in listed] == [
        ("me/app:PLAN", "stopped"),
        ("me/lib:PLAN", "running"),
    ]

    # Re-route the reviewer of me/lib live: the next review is asked of the new model.
    ask = {"project": "me/lib:PLAN", "role": "reviewer", "route": "openai:gpt-other"}
    rerouted = client.put("/api/roles", json=ask, headers=AUTH)
    assert rerouted.status_code == 200, rerouted.text
    assert "gpt-other" in rerouted.json()["routes"]["reviewer"]
    before = len(running.reviewer.requests)
    more = {"project": "me/lib:PLAN", "items": [{"id": "T2", "title": "Count lines",
            "body": "Add line_count(text: str) -> int to tally/lines.py."}]}  # fmt: skip
    assert client.post("/api/work", json=more, headers=AUTH).status_code == 201
    deadline = time.monotonic() + 120  # a fail-safe, not a measurement
    while time.monotonic() < deadline:
        t2 = client.get("/api/work/T2", params={"project": "me/lib:PLAN"}, headers=AUTH).json()
        if any(e["kind"] == "review" for e in t2.get("events", [])):
            break
        time.sleep(0.1)
    asked = [r.body.get("model") for r in running.reviewer.requests[before:]]
    assert asked, t2["item"]  # T2 was reviewed, by the new route only
    assert set(asked) == {"gpt-other"}
    events = client.get("/api/events", params={"limit": 1000}, headers=AUTH).json()["events"]
    changes = [e for e in events if e["kind"] == "roles_changed" and e["project"] == "me/lib:PLAN"]
    assert changes and "gpt-other" in changes[-1]["payload"]["roles"]["reviewer"]

    # Pause me/lib over HTTP: its pool says so, and an item added meanwhile waits unclaimed
    # until it is resumed; then it is worked to a pull request like the others.
    paused = client.post(
        "/api/control", json={"action": "pause", "project": "me/lib:PLAN"}, headers=AUTH
    )
    assert paused.status_code == 200, paused.text
    asked = client.get("/api/control", params={"project": "me/lib:PLAN"}, headers=AUTH).json()
    assert asked["controls"][0]["asked"] == "paused"
    before = asked["controls"][0]["pool"]["reports"]
    # Passes come and go (each ends when nothing is left to claim); the next ones see the pause.
    pool = _pool_report(client, "me/lib:PLAN", lambda r: r["reports"] >= before + 2)
    more = {"project": "me/lib:PLAN", "items": [{"id": "T6", "title": "Usage section",
            "body": "Add a Usage section to the project README."}]}  # fmt: skip
    assert client.post("/api/work", json=more, headers=AUTH).status_code == 201
    # Several more reports of the paused pool (passes come and go; each enqueues T6): no claim.
    _pool_report(client, "me/lib:PLAN", lambda r: r["reports"] >= pool["reports"] + 6)
    held = client.get("/api/work/T6", params={"project": "me/lib:PLAN"}, headers=AUTH)
    if held.status_code != 404:  # 404: not queued yet, which holds it back all the same
        assert held.json()["item"]["state"] == "pending", held.text
        assert not any(e["kind"] == "claimed" for e in held.json()["events"]), held.text
    resumed = client.post(
        "/api/control", json={"action": "resume", "project": "me/lib:PLAN"}, headers=AUTH
    )
    assert resumed.status_code == 200, resumed.text
    deadline = time.monotonic() + 120  # a fail-safe, not a measurement
    while time.monotonic() < deadline:
        t6 = client.get("/api/work/T6", params={"project": "me/lib:PLAN"}, headers=AUTH).json()
        if any(e["kind"] == "pr_opened" for e in t6.get("events", [])):
            break
        time.sleep(0.1)
    assert any(e["kind"] == "pr_opened" for e in t6.get("events", [])), t6


def _pool_report(client: TestClient, project: str, ok: object) -> dict[str, object]:
    """Wait until the project's running pool reports what `ok` accepts; that report."""
    assert callable(ok)
    deadline = time.monotonic() + 60  # a fail-safe, not a measurement
    report: object = None
    while time.monotonic() < deadline:
        got = client.get("/api/control", params={"project": project}, headers=AUTH).json()
        report = got["controls"][0]["pool"]
        if report is not None and ok(report):
            return report  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"{project}'s pool never reported as wanted: {report}")


def test_a_sync_over_http_waits_for_another_hosts_sync_of_the_plan(
    server: tuple[Server, dict[str, Path]],
) -> None:
    import threading

    from agent_harness.store.hostlock import held_by_this_host, plan_sync_lock

    running, clones = server
    client = running.client
    spec = {"repo": "me/app", "work_dir": str(clones["me/app"]), "plan": "PLAN.md",
            "forge": "local", "agent": "claude", "reviewer": "openai:gpt-test"}  # fmt: skip
    assert client.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    answers: list[dict[str, object]] = []

    def sync() -> None:
        ask = {"project": "me/app:PLAN", "dry_run": False}
        answers.append(client.post("/api/plan/sync", json=ask, headers=AUTH).json())

    syncing = threading.Thread(target=sync, daemon=True)
    other_host = open_store(str(running.store.where))  # another host's store, on the same file
    try:
        with held_by_this_host(other_host, plan_sync_lock("me/app", "PLAN")):
            syncing.start()
            syncing.join(1.0)  # room for a sync that does not wait to go ahead
            assert answers == []  # it waits for the other host's sync
        syncing.join(30)
    finally:
        other_host.close()
    [answer] = answers
    assert [c["id"] for c in answer["created"]] == ["T1"], answer
