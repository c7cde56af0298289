"""The routes over what exists today, as a host calls them: typed answers, one call each."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agent_harness.api.app import create_app
from agent_harness.api.context import ApiContext
from agent_harness.cli import main
from agent_harness.git.runner import git
from agent_harness.store.database import Store
from agent_harness.testing.clock import FakeClock
from tests.api.conftest import AUTH, PROJECT, TOKEN, seed
from tests.shared.stores import Engine

pytestmark = pytest.mark.integration


def test_work_gives_backlog_counts_and_claims_in_one_call(monitoring: TestClient) -> None:
    answer = monitoring.get("/api/work", headers=AUTH)
    assert answer.status_code == 200
    work = answer.json()
    assert work["project"] == PROJECT
    assert work["counts"] == {"claimed": 1, "failed": 1, "skipped": 1, "pending": 1}
    assert [i["id"] for i in work["backlog"]] == ["T1", "T4"]  # not ended, in plan order
    assert work["total"] == 2
    assert [c["worker"] for c in work["live"]] == ["host-a/w1"] and work["stale"] == []
    failed = monitoring.get("/api/work", params={"state": "failed"}, headers=AUTH).json()
    assert [(i["id"], i["reason"]) for i in failed["backlog"]] == [("T2", "checks failed")]
    # The listing says what each item waits for, as the item's own view does (it said [] for
    # all: "depends on nothing").
    skipped = monitoring.get("/api/work", params={"state": "skipped"}, headers=AUTH).json()
    assert [(i["id"], i["depends_on"]) for i in skipped["backlog"]] == [("T3", ["T2"])]
    assert monitoring.get("/api/work/T3", headers=AUTH).json()["item"]["depends_on"] == ["T2"]


def test_stale_claims_show_once_the_lease_lapsed(
    monitoring: TestClient, clock: object, api_store: object
) -> None:
    clock.advance(3600)  # type: ignore[attr-defined]
    work = monitoring.get("/api/work", headers=AUTH).json()
    assert work["live"] == [] and [c["item"] for c in work["stale"]] == ["T1"]


def test_one_item_comes_with_its_events_and_session(
    monitoring: TestClient, api_store: object, capsys: pytest.CaptureFixture[str]
) -> None:
    detail = monitoring.get("/api/work/T1", headers=AUTH).json()
    assert detail["item"]["state"] == "claimed"
    assert [e["kind"] for e in detail["events"]] == ["enqueued", "claimed", "agent_started"]
    assert detail["session"]["name"] == "ah-app-T1"
    # Copied as it is on the host that ran the agent, it finds this database and the item.
    where = api_store.where  # type: ignore[attr-defined]
    attach = f"agent-harness attach T1 --project {PROJECT} --db {shlex.quote(where)}"
    assert detail["session"]["attach"] == attach
    assert detail["session"]["worker"] == "host-a/w1"  # whose host holds the session
    main([*shlex.split(attach)[1:], "--print"])
    # It reached the item's session (whose log the seeded history names no file for).
    assert "T1: session ah-app-T1 has ended" in capsys.readouterr().err
    missing = monitoring.get("/api/work/T9", headers=AUTH)
    assert missing.status_code == 404 and "T9" in missing.json()["detail"]


def test_events_page_by_row_id(monitoring: TestClient) -> None:
    first = monitoring.get("/api/events", params={"limit": 3}, headers=AUTH).json()
    ids = [e["id"] for e in first["events"]]
    assert len(ids) == 3 and first["next_after"] == ids[-1]
    rest = monitoring.get(
        "/api/events", params={"after": first["next_after"], "limit": 1000}, headers=AUTH
    ).json()
    assert rest["events"] and all(e["id"] > ids[-1] for e in rest["events"])
    done = monitoring.get("/api/events", params={"after": rest["next_after"]}, headers=AUTH)
    assert done.json() == {"events": [], "next_after": rest["next_after"]}


def test_errors_by_class_and_summary(monitoring: TestClient) -> None:
    errors = monitoring.get("/api/errors", headers=AUTH).json()
    assert [(c["failure"], c["action"], c["count"]) for c in errors["by_class"]] == [
        ("window", "park", 1)
    ]
    assert errors["rate_limited"] == 1 and errors["items_failed"] == 1
    assert errors["attempts_failed"] == 1
    assert [(c["failure"], c["count"], c["last_message"]) for c in errors["attempts_by_class"]] == [
        ("check_failed", 1, "checks failed")
    ]
    assert [(r["item"], r["reason"]) for r in errors["recent"]] == [("T2", "checks failed")]
    assert errors["first_event_id"] == 1
    narrow = monitoring.get("/api/errors", params={"window": 1}, headers=AUTH).json()
    assert narrow["by_class"][0]["failure"] == "window"  # the newest event is the model call
    assert narrow["attempts_failed"] == 0 and narrow["first_event_id"] > 1
    summary = monitoring.get("/api/summary", headers=AUTH).json()
    assert summary["mode"] == "monitoring" and summary["projects"] == 1
    assert summary["live"] == 1 and summary["counts"]["pending"] == 1
    last = monitoring.get("/api/events", params={"limit": 1000}, headers=AUTH).json()
    assert summary["last_event_id"] == last["next_after"]


def test_projects_list_counts_and_control_state(monitoring: TestClient) -> None:
    listed = monitoring.get("/api/projects", headers=AUTH).json()["projects"]
    assert [(p["id"], p["control"], p["counts"]["pending"]) for p in listed] == [
        (PROJECT, "unmanaged", 1)
    ]
    one = monitoring.get(f"/api/projects/{PROJECT}", headers=AUTH)
    assert one.status_code == 200 and one.json()["registered"] is False
    assert monitoring.get("/api/projects/me/none:PLAN", headers=AUTH).status_code == 404


def test_monitoring_only_reads(monitoring: TestClient, clone: Path) -> None:
    """Every write answers 409 with the reason; nothing is written."""
    before = monitoring.get("/api/summary", headers=AUTH).json()["last_event_id"]
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex"}
    writes = [
        monitoring.post(f"/api/projects/{PROJECT}/start", headers=AUTH),
        monitoring.post(f"/api/projects/{PROJECT}/stop", headers=AUTH),
        monitoring.post("/api/projects", json=spec, headers=AUTH),
        monitoring.post(
            "/api/work",
            json={"project": PROJECT, "items": [{"id": "X1", "title": "x"}]},
            headers=AUTH,
        ),
        monitoring.post("/api/work/T2/retry", headers=AUTH),
        monitoring.post("/api/control", json={"action": "pause"}, headers=AUTH),
        monitoring.put(
            "/api/roles",
            json={"project": PROJECT, "role": "reviewer", "route": "openai:gpt-4.1"},
            headers=AUTH,
        ),
        monitoring.post(
            "/api/plan/sync", json={"project": PROJECT, "dry_run": False}, headers=AUTH
        ),
    ]
    for answer in writes:
        assert answer.status_code == 409
        assert answer.json()["detail"].startswith("monitoring only: no worker pool")
    after = monitoring.get("/api/summary", headers=AUTH).json()["last_event_id"]
    assert after == before


def test_retry_is_refused_while_a_claim_is_live(supervised: TestClient) -> None:
    busy = supervised.post("/api/work/T1/retry", headers=AUTH)
    assert busy.status_code == 409 and "held by host-a/w1" in busy.json()["detail"]
    done = supervised.post("/api/work/T2/retry", headers=AUTH)
    assert done.status_code == 200 and done.json()["requeued"] == ["T2", "T3"]
    again = supervised.post("/api/work/T4/retry", headers=AUTH)
    assert again.status_code == 409 and "only failed" in again.json()["detail"]


def test_register_starts_stopped_and_items_can_be_added(
    supervised: TestClient, clone: Path
) -> None:
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "agent": "claude", "plan_key": "API"}  # fmt: skip
    made = supervised.post("/api/projects", json=spec, headers=AUTH)
    assert made.status_code == 201, made.text
    assert made.json()["id"] == "me/app:API" and made.json()["control"] == "stopped"
    twice = supervised.post("/api/projects", json=spec, headers=AUTH)
    assert twice.status_code == 409
    # With no project named, the only one with items queued is still meant, beside one
    # registered with none (it became "several projects, pick one").
    unnamed = supervised.get("/api/work", headers=AUTH)
    assert unnamed.status_code == 200 and unnamed.json()["project"] == PROJECT
    # The same repository in other letters (GitHub takes names in any case): one repository,
    # which two queues would work twice over.
    shouted = supervised.post("/api/projects", json={**spec, "repo": "ME/App"}, headers=AUTH)
    assert shouted.status_code == 409
    assert "registered already, as me/app:API" in shouted.json()["detail"]
    other_key = supervised.post(
        "/api/projects", json={**spec, "plan_key": "api", "work_dir": f"{clone}//"}, headers=AUTH
    )
    assert other_key.status_code == 201  # a plan key is compared as written
    assert other_key.json()["spec"]["work_dir"] == str(clone)  # one path for one clone
    added = supervised.post(
        "/api/work",
        json={"project": "me/app:API", "items": [{"id": "X1", "title": "Extra", "body": "b"}]},
        headers=AUTH,
    )
    assert added.status_code == 201 and added.json()["added"] == ["X1"]
    clash = supervised.post(
        "/api/work",
        json={"project": "me/app:API", "items": [{"id": "T1", "title": "x"}]},
        headers=AUTH,
    )
    assert clash.status_code == 409 and "T1 already in" in clash.json()["detail"]
    parsed = supervised.post("/api/plan/parse", json={"project": "me/app:API"}, headers=AUTH)
    assert [i["id"] for i in parsed.json()["items"]] == ["T1", "X1"]
    one = supervised.get("/api/projects/me/app:API", headers=AUTH).json()
    assert one["counts"] == {} and one["added"] == ["X1"]  # queued by the next pass
    repeated = supervised.post(
        "/api/work",
        json={"project": "me/app:API", "items": [{"id": "X1", "title": "Extra", "body": "b"}]},
        headers=AUTH,
    )
    assert repeated.json() == {"project": "me/app:API", "added": [], "unchanged": ["X1"]}
    assert repeated.status_code == 200  # nothing was created: no 201
    changed = supervised.post(
        "/api/work",
        json={"project": "me/app:API", "items": [{"id": "X1", "title": "Other", "body": "b"}]},
        headers=AUTH,
    )
    assert changed.status_code == 409 and "X1 already in" in changed.json()["detail"]


def test_plan_parse_says_what_it_could_not_read(monitoring: TestClient) -> None:
    text = "# Plan\n\n### T1: Good\n\nBody.\n\n- [ ] T2 Fine\n\n## T-3 broken\n"
    parsed = monitoring.post("/api/plan/parse", json={"text": text}, headers=AUTH).json()
    assert [i["id"] for i in parsed["items"]] == ["T1", "T2"]
    assert [u["line"] for u in parsed["unread"]] == [9]
    refused = monitoring.post(
        "/api/plan/parse", json={"text": "### T1: a\n\n### T1: b\n"}, headers=AUTH
    )
    assert refused.status_code == 422 and "T1" in refused.json()["detail"]
    neither = monitoring.post("/api/plan/parse", json={}, headers=AUTH)
    assert neither.status_code == 400


def test_root_path_is_advertised(api_store: object) -> None:
    app = create_app(ApiContext(store=api_store, mode="monitoring"), token=TOKEN)  # type: ignore[arg-type]
    client = TestClient(app, root_path="/harness")
    schema = client.get("/harness/openapi.json", headers=AUTH).json()
    assert schema["servers"] == [{"url": "/harness"}]
    assert client.get("/harness/api/summary", headers=AUTH).status_code == 200
    assert client.get("/harness/healthz").status_code == 200


def started_until_it_fails(client: TestClient, project: str) -> dict[str, Any]:
    """Start the registered project, and its view once its pool says why a pass failed."""
    assert client.post(f"/api/projects/{project}/start", headers=AUTH).status_code == 200
    deadline = time.monotonic() + 60  # a fail-safe, not a measurement
    while time.monotonic() < deadline:
        seen: dict[str, Any] = client.get(f"/api/projects/{project}", headers=AUTH).json()
        if seen["pool_error"]:
            return seen
        time.sleep(0.02)
    raise AssertionError(f"{project}'s pool never failed: {seen}")


def test_a_pass_that_fails_is_told_on_the_project(supervised: TestClient, clone: Path) -> None:
    """The clone has no commit yet: the pool says why it cannot run, and keeps the project
    running to try again."""
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "forge": "local",
            "agent": "claude", "reviewer": "codex", "plan_key": "EMPTY"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    assert supervised.get("/api/projects/me/app:EMPTY", headers=AUTH).json()["pool_error"] is None
    project = started_until_it_fails(supervised, "me/app:EMPTY")
    assert project["control"] == "running"
    assert project["pool_error"] == f"--work {clone} has no commits yet; commit something first"


def test_a_clone_with_no_origin_is_told_the_servers_forge_address_that_answers(
    supervised: TestClient, clone: Path
) -> None:
    git(
        clone,
        "-c",
        "user.name=Dee",
        "-c",
        "user.email=d@e.f",
        "commit",
        "-qm",
        "x",
        "--allow-empty",
    )
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "forge": "local",
            "agent": "claude", "reviewer": "codex", "plan_key": "NOORIGIN"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    said = started_until_it_fails(supervised, "me/app:NOORIGIN")["pool_error"]
    assert "has no remote 'origin'" in said, said
    # It named a folder under the project's own state, where no forge is: the push failed.
    url = said.rsplit(" ", 1)[1]
    assert url.startswith("file://") and "/projects/" not in url
    git(clone, "remote", "add", "origin", url)
    git(clone, "push", "-q", "origin", "HEAD")  # the address answers


def test_a_dry_run_sync_before_the_local_repository_is_made_shows_what_it_would_create(
    supervised: TestClient, clone: Path, db_dir: Path
) -> None:
    # The local forge makes a repository on first use; a dry run before that answered 502,
    # as if the tracker had failed, where the CLI's own dry run lists every item as new.
    spec = {"repo": "me/fresh", "work_dir": str(clone), "plan": "PLAN.md", "forge": "local",
            "agent": "claude", "reviewer": "codex"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    answer = supervised.post("/api/plan/sync", json={"project": "me/fresh:PLAN"}, headers=AUTH)
    assert answer.status_code == 200, answer.text
    dry = answer.json()
    assert dry["dry_run"] is True and dry["writes"] == 0
    assert [made["id"] for made in dry["created"]] == ["T1"]
    assert not list((db_dir / "state").rglob("fresh*")), "a dry run made the repository"


def test_a_renumbered_plan_is_refused_over_the_api_too(supervised: TestClient, clone: Path) -> None:
    who = ("-c", "user.name=Dee", "-c", "user.email=d@e.f")
    (clone / "PLAN.md").write_text("- [ ] T1 Alpha\n- [ ] T2 Beta\n", encoding="utf-8")
    git(clone, "add", "PLAN.md")
    git(clone, *who, "commit", "-qm", "plan")
    spec = {"repo": "me/renum", "work_dir": str(clone), "plan": "PLAN.md", "forge": "local",
            "agent": "claude", "reviewer": "codex"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    body = {"project": "me/renum:PLAN", "dry_run": False}
    assert supervised.post("/api/plan/sync", json=body, headers=AUTH).status_code == 200
    (clone / "PLAN.md").write_text("- [ ] T1 New\n- [ ] T2 Alpha\n- [ ] T3 Beta\n")
    refused = supervised.post("/api/plan/sync", json=body, headers=AUTH)
    assert refused.status_code == 409 and "looks renumbered" in refused.json()["detail"]
    # No switch past it: the queue's record of each id would go with it.
    extra = supervised.post("/api/plan/sync", json={**body, "renumbered": True}, headers=AUTH)
    assert extra.status_code == 422


@pytest.mark.postgres
@pytest.mark.parametrize("engine", ["postgres"], indirect=True)  # SQLite: every other test
def test_the_reads_on_postgresql(engine: Engine, clock: FakeClock) -> None:
    """The same answers from PostgreSQL (projects and counts, work, errors, summary, events)."""
    store = engine.open(clock=clock)
    try:
        seed(store, clock)
        client = TestClient(create_app(ApiContext(store=store, mode="monitoring"), token=TOKEN))
        work = client.get("/api/work", headers=AUTH).json()
        assert work["counts"] == {"claimed": 1, "failed": 1, "skipped": 1, "pending": 1}
        assert [c["item"] for c in work["live"]] == ["T1"]
        summary = client.get("/api/summary", headers=AUTH).json()
        assert summary["live"] == 1 and summary["projects"] == 1
        errors = client.get("/api/errors", headers=AUTH).json()
        assert errors["rate_limited"] == 1 and errors["items_failed"] == 1
        listed = client.get("/api/projects", headers=AUTH).json()["projects"]
        assert [p["id"] for p in listed] == [PROJECT]
        events = client.get("/api/events", params={"limit": 2}, headers=AUTH).json()
        assert [e["kind"] for e in events["events"]] == ["enqueued", "enqueued"]
    finally:
        store.close()


def test_every_field_and_parameter_is_described(monitoring: TestClient) -> None:
    schema = monitoring.get("/openapi.json", headers=AUTH).json()
    fastapis_own = {"HTTPValidationError", "ValidationError"}  # the 422 body FastAPI writes
    bare = [
        f"{name}.{field}"
        for name, component in schema["components"]["schemas"].items()
        if name not in fastapis_own
        for field, spec in component.get("properties", {}).items()
        if "description" not in spec
    ]
    bare += [
        f"{method} {path} {parameter['name']}"
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        for parameter in operation.get("parameters", [])
        if "description" not in parameter and "description" not in parameter["schema"]
    ]
    assert bare == []
    summaries = [op.get("summary") for ops in schema["paths"].values() for op in ops.values()]
    assert all(summaries) and len(summaries) == 35
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_control_pauses_and_resumes_a_projects_workers(supervised: TestClient) -> None:
    before = supervised.get("/api/control", headers=AUTH).json()["controls"]
    assert [(c["project"], c["asked"], c["pool"]) for c in before] == [(PROJECT, "running", None)]
    paused = supervised.post(
        "/api/control", json={"action": "pause", "project": PROJECT}, headers=AUTH
    )
    assert paused.status_code == 200
    [asked] = paused.json()["controls"]
    assert (asked["asked"], asked["asked_by"]) == ("paused", "api")
    events = supervised.get("/api/events", params={"limit": 1000}, headers=AUTH).json()["events"]
    assert [e["payload"] for e in events if e["kind"] == "control"] == [
        {"state": "paused", "previous": "running", "by": "api"}
    ]
    resumed = supervised.post("/api/control", json={"action": "resume"}, headers=AUTH).json()
    assert [c["asked"] for c in resumed["controls"]] == ["running"]
    unknown = supervised.get("/api/control", params={"project": "me/none:PLAN"}, headers=AUTH)
    assert unknown.status_code == 404 and "no project 'me/none:PLAN'" in unknown.json()["detail"]
    # Drained with no project named and none at work: the state of things, not a bad request.
    nobody = supervised.post("/api/control", json={"action": "drain"}, headers=AUTH)
    assert nobody.status_code == 409 and "no run is working" in nobody.json()["detail"]


def test_roles_are_kept_for_the_project(supervised: TestClient, clone: Path) -> None:
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "agent": "claude",
            "reviewer": "openai:gpt-4.1", "plan_key": "ROLES"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    ask = {"project": "me/app:ROLES"}
    assert supervised.get("/api/roles", params=ask, headers=AUTH).json() == {
        "project": "me/app:ROLES", "routes": {}, "live": False
    }  # fmt: skip
    changed = supervised.put(
        "/api/roles", json={**ask, "role": "reviewer", "route": "openai:gpt-4.1-mini"}, headers=AUTH
    )
    assert changed.status_code == 200
    assert changed.json()["routes"] == {"reviewer": "openai:gpt-4.1-mini"}
    again = supervised.get("/api/roles", params=ask, headers=AUTH).json()
    assert again["routes"] == {"reviewer": "openai:gpt-4.1-mini"} and again["live"] is False
    not_a_model = supervised.put(
        "/api/roles", json={**ask, "role": "implementer", "route": "openai:gpt-4.1"}, headers=AUTH
    )
    assert not_a_model.status_code == 404
    assert "no model role 'implementer'" in not_a_model.json()["detail"]
    unknown = supervised.put(
        "/api/roles", json={**ask, "role": "reviewer", "route": "nobody:model"}, headers=AUTH
    )
    assert unknown.status_code == 400 and "nobody" in unknown.json()["detail"]
    assert supervised.get("/api/roles", params=ask, headers=AUTH).json() == again


def test_items_added_at_once_by_many_requests_are_all_kept(
    supervised: TestClient, clone: Path, api_store: Store
) -> None:
    # Read apart from the write, each request wrote its snapshot over the others': 50 answered
    # 201 and 18 were kept.
    from concurrent.futures import ThreadPoolExecutor

    from agent_harness.plan.model import WorkItem
    from agent_harness.queue.projects import add_items, get_project

    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "agent": "claude", "plan_key": "API"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201

    def add(n: int) -> tuple[str, ...]:
        item = WorkItem(id=f"A{n}", title="t", line=0, form="heading")
        return add_items(api_store, "me/app:API", [item]).added

    with ThreadPoolExecutor(8) as pool:
        answered = [ids for ids in pool.map(add, range(40))]
    assert sorted(i for ids in answered for i in ids) == sorted(f"A{n}" for n in range(40))
    kept = [item.id for item in get_project(api_store, "me/app:API").added]
    assert sorted(kept) == sorted(f"A{n}" for n in range(40))


@pytest.mark.parametrize(
    ("items", "status"),
    [
        ([{"id": "X3", "title": "t", "depends_on": ["\ud800"]}], 422),  # then a 500 on parse
        ([{"id": "X3", "title": "t", "depends_on": ["../../x"]}], 422),
        ([{"id": "X7", "title": "t", "depends_on": ["X7"]}], 422),
        ([{"id": "X8", "title": "t", "depends_on": ["X9"]},
          {"id": "X9", "title": "t", "depends_on": ["X8"]}], 422),  # a cycle
        ([{"id": "X4", "title": "t", "depends_on": ["Q9"]}], 422),  # no such item
        ([{"id": "X5", "title": "t", "labels": ["a\u0000b"]}], 422),
        ([{"id": "X6", "title": "t", "labels": ["l" * 100_000]}], 422),
    ],
    ids=["surrogate", "path", "itself", "cycle", "unknown", "nul-label", "long-label"],
)  # fmt: skip
def test_an_added_item_that_could_never_start_or_be_labelled_is_refused(
    supervised: TestClient, clone: Path, items: list[dict[str, object]], status: int
) -> None:
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "agent": "claude", "plan_key": "API"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    body = json.dumps({"project": "me/app:API", "items": items})  # `\ud800` as JSON escapes it
    answer = supervised.post(
        "/api/work", content=body.encode(), headers={**AUTH, "content-type": "application/json"}
    )
    assert answer.status_code == status, answer.text
    parsed = supervised.post("/api/plan/parse", json={"project": "me/app:API"}, headers=AUTH)
    assert parsed.status_code == 200 and [i["id"] for i in parsed.json()["items"]] == ["T1"]


def test_starts_and_stops_at_once_leave_the_control_and_the_pools_agreeing(
    supervised: TestClient, clone: Path
) -> None:
    # Interleaved, a stop popped the runner a start had just made before the start wrote
    # RUNNING: the project said running and no pool worked it (3 runs in 8).
    from concurrent.futures import ThreadPoolExecutor

    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "agent": "claude", "plan_key": "API"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    calls = ["start", "stop"] * 15

    def call(verb: str) -> int:
        return supervised.post(f"/api/projects/me/app:API/{verb}", headers=AUTH).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(call, calls)) == {200}
    control = supervised.get("/api/projects/me/app:API", headers=AUTH).json()["control"]
    running = supervised.get("/api/summary", headers=AUTH).json()["running"]
    assert (control == "running") == ("me/app:API" in running)
    supervised.post("/api/projects/me/app:API/stop", headers=AUTH)


@pytest.mark.parametrize(
    "roles", [{}, {"agent": "claude", "implementer": "openai:gpt-4.1"}], ids=["none", "both"]
)
def test_a_project_without_exactly_one_implementer_is_refused_at_registration(
    supervised: TestClient, clone: Path, roles: dict[str, str]
) -> None:
    # Registered, its pool failed every pass with "give exactly one of --agent ...".
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "plan_key": "API", **roles}  # fmt: skip
    answer = supervised.post("/api/projects", json=spec, headers=AUTH)
    assert answer.status_code == 400 and "exactly one of agent" in answer.json()["detail"]
    assert supervised.get("/api/projects/me/app:API", headers=AUTH).status_code == 404


def test_a_registered_project_with_nothing_queued_yet_can_be_paused(
    supervised: TestClient, clone: Path
) -> None:
    # Before: 404 "no project ... in this database" for a project /api/projects listed.
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "agent": "claude", "plan_key": "API"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    paused = supervised.post(
        "/api/control", json={"action": "pause", "project": "me/app:API"}, headers=AUTH
    )
    assert paused.status_code == 200, paused.text
    [asked] = paused.json()["controls"]
    assert (asked["project"], asked["asked"]) == ("me/app:API", "paused")
    # A project it does not know is told from those it does, registered ones among them (it
    # said the database held none).
    unknown = supervised.get("/api/work", params={"project": "x/y:Z"}, headers=AUTH)
    assert unknown.status_code == 404 and "me/app:API" in unknown.json()["detail"]


def test_control_of_a_project_nobody_registered_or_ran_is_a_404_and_makes_none(
    supervised: TestClient,
) -> None:
    # A client with the token could fill the database with made-up projects: a pause of one
    # answered 200, and from then on it was "known" to every read.
    ghost = "ghost/repo:K"
    asked = supervised.post(
        "/api/control", json={"action": "pause", "project": ghost}, headers=AUTH
    )
    assert asked.status_code == 404
    assert supervised.get("/api/work", params={"project": ghost}, headers=AUTH).status_code == 404


def test_the_root_the_start_line_prints_answers_with_where_to_go(
    supervised: TestClient,
) -> None:
    # Uvicorn's start line names the root, which answered 404 to a client with the token.
    assert supervised.get("/").status_code == 401
    index = supervised.get("/", headers=AUTH)
    assert index.status_code == 200
    links = index.json()["links"]
    for path in links.values():
        status = supervised.get(path, headers=AUTH).status_code
        assert status == 200, (path, status)  # every link it gives answers
