"""/api/inception over HTTP: a real SQLite store, the scripted planner on loopback reached by
the real model client (OpenAI's wire format), the app in-process through its test client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent_harness.api.context import ApiContext
from agent_harness.api.pools import ProjectPools
from agent_harness.config import Settings
from agent_harness.plan.markdown import parse_plan
from agent_harness.store.database import open_store
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.model_server import ModelServer, ScriptedCompletion, ScriptedResponder
from agent_harness.testing.planner_rules import inception_rules
from tests.api.conftest import AUTH, client_for
from tests.inception.conftest import KEY, TALLY

pytestmark = pytest.mark.integration


@pytest.fixture
def planner_server() -> Iterator[ModelServer]:
    with ModelServer([ScriptedResponder(inception_rules)], api_key=KEY) as server:
        yield server


def planner_env(server: ModelServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": KEY}


@pytest.fixture
def api(db_dir: Path, planner_server: ModelServer) -> Iterator[tuple[TestClient, ApiContext]]:
    store = open_store(str(db_dir / "inception.sqlite"), clock=FakeClock())
    settings = Settings(state_dir=str(db_dir / "state"))
    pools = ProjectPools(store, settings, idle_s=3600)
    ctx = ApiContext(store=store, mode="supervised", pools=pools, env=planner_env(planner_server))
    try:
        yield client_for(ctx), ctx
    finally:
        pools.close()
        store.close()


def test_a_paragraph_becomes_a_plan_over_http(
    api: tuple[TestClient, ApiContext], planner_server: ModelServer
) -> None:
    client, _ = api
    started = client.post(
        "/api/inception", json={"paragraph": TALLY, "planner": "openai:gpt-planner"}, headers=AUTH
    )
    assert started.status_code == 201, started.text
    assert started.json()["status"] == "started"
    sid = started.json()["id"]
    base = f"/api/inception/{sid}"
    assert started.headers["location"] == base  # the link it gives answers
    assert client.get(base, headers=AUTH).json() == started.json()
    assert client.get("/api/inception/000000000000", headers=AUTH).status_code == 404

    scoped = client.post(f"{base}/scope", headers=AUTH)
    assert scoped.status_code == 200, scoped.text
    assert client.get(base, headers=AUTH).json() == scoped.json()
    body = scoped.json()
    assert body["scope"]["protect"] == ["README.md"]
    assert [(q["id"], q["grade"]) for q in body["questions"]] == [
        ("Q1", "BLOCKING"),
        ("Q2", "NICE"),
    ]

    refused = client.post(f"{base}/approve", headers=AUTH)
    assert refused.status_code == 409
    assert "Q1: Should a trailing newline start a new line?" in refused.json()["detail"]
    not_yet = client.get(f"{base}/plan", headers=AUTH)
    assert not_yet.status_code == 409 and "approve the scope first" in not_yet.json()["detail"]

    answer = {"action": "answer", "answer": "No: a trailing newline ends the last line"}
    answered = client.post(f"{base}/questions/Q1", json=answer, headers=AUTH)
    assert answered.status_code == 200, answered.text
    assert answered.json()["questions"][0]["state"] == "answered"
    approved = client.post(f"{base}/approve", headers=AUTH)
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    # A look at the headers asks (and pays) the planner nothing: it wrote the plan.
    looked = client.head(f"{base}/plan", headers=AUTH)
    assert looked.status_code == 409 and len(planner_server.requests) == 1

    got = client.get(f"{base}/plan", headers=AUTH)
    assert got.status_code == 200, got.text
    plan = parse_plan(got.json()["markdown"], source="api")
    assert plan.unread == () and [i.id for i in plan.items] == got.json()["items"] == ["T1", "T2"]
    assert "a trailing newline ends the last line" in plan.item("T2").body
    assert client.get(f"{base}/plan", headers=AUTH).json() == got.json()  # read back
    assert client.head(f"{base}/plan", headers=AUTH).status_code == 200  # written: answered
    assert len(planner_server.requests) == 2  # one scope, one plan: never asked twice


def test_questions_are_settled_or_refused_by_name(api: tuple[TestClient, ApiContext]) -> None:
    client, _ = api
    sid = client.post(
        "/api/inception", json={"paragraph": TALLY, "planner": "openai:gpt-planner"}, headers=AUTH
    ).json()["id"]
    base = f"/api/inception/{sid}"
    client.post(f"{base}/scope", headers=AUTH)
    blocked = client.post(f"{base}/questions/Q1", json={"action": "defer"}, headers=AUTH)
    assert blocked.status_code == 409 and "Q1 is BLOCKING" in blocked.json()["detail"]
    regraded = client.post(
        f"{base}/questions/Q1", json={"action": "regrade", "grade": "NICE"}, headers=AUTH
    )
    assert regraded.json()["questions"][0]["grade"] == "NICE"
    unknown = client.post(f"{base}/questions/Q9", json={"action": "defer"}, headers=AUTH)
    assert unknown.status_code == 404 and "its questions: Q1, Q2" in unknown.json()["detail"]
    # An unknown question is a 404 whatever the body lacks (it was a 400 about the body).
    for lacking in ({"action": "answer"}, {"action": "regrade", "grade": None}):
        missed = client.post(f"{base}/questions/Q9", json=lacking, headers=AUTH)
        assert missed.status_code == 404 and "its questions: Q1, Q2" in missed.json()["detail"]
    no_grade = client.post(
        f"{base}/questions/Q2", json={"action": "regrade", "grade": None}, headers=AUTH
    )
    assert (no_grade.status_code, no_grade.json()["detail"]) == (
        400,
        "no grade given for Q2: give one of BLOCKING, IMPORTANT, NICE",
    )
    empty = client.post(f"{base}/questions/Q2", json={"action": "answer"}, headers=AUTH)
    assert empty.status_code == 400 and "empty" in empty.json()["detail"]
    revised = client.post(
        f"{base}/scope", json={"feedback": "Keep it in one module."}, headers=AUTH
    )
    assert revised.json()["round"] == 2
    missing = client.post("/api/inception/0123456789ab/approve", headers=AUTH)
    assert missing.status_code == 404


def test_a_monitoring_server_refuses_every_step(db_dir: Path, planner_server: ModelServer) -> None:
    store = open_store(str(db_dir / "watch.sqlite"), clock=FakeClock())
    try:
        client = client_for(
            ApiContext(store=store, mode="monitoring", env=planner_env(planner_server))
        )
        start = {"paragraph": TALLY, "planner": "openai:gpt-planner"}
        refused = client.post("/api/inception", json=start, headers=AUTH)
        assert refused.status_code == 409 and "supervise" in refused.json()["detail"]
        assert store.all_events() == []  # nothing kept
    finally:
        store.close()


def test_a_planner_without_a_key_is_refused_as_things_stand_before_a_session_exists(
    db_dir: Path, planner_server: ModelServer
) -> None:
    store = open_store(str(db_dir / "nokey.sqlite"), clock=FakeClock())
    pools = ProjectPools(store, Settings(state_dir=str(db_dir / "state")), idle_s=3600)
    try:
        ctx = ApiContext(store=store, mode="supervised", pools=pools, env={})
        client = client_for(ctx)
        start = {"paragraph": TALLY, "planner": "openai:gpt-planner"}
        refused = client.post("/api/inception", json=start, headers=AUTH)
        assert refused.status_code == 409 and "OPENAI_API_KEY" in refused.json()["detail"]
        assert store.all_events() == []
    finally:
        pools.close()
        store.close()


def test_a_planner_answer_that_does_not_fit_twice_is_a_502_and_keeps_no_scope(
    api: tuple[TestClient, ApiContext], planner_server: ModelServer
) -> None:
    client, _ = api
    planner_server.enqueue_first(
        ScriptedCompletion(text="Sure! Here is the scope you asked for."),
        ScriptedCompletion(text='{"objective": "x"}'),
    )
    start = {"paragraph": TALLY, "planner": "openai:gpt-planner"}
    sid = client.post("/api/inception", json=start, headers=AUTH).json()["id"]
    failed = client.post(f"/api/inception/{sid}/scope", headers=AUTH)
    assert failed.status_code == 502
    assert failed.json()["detail"].startswith("the planner's scope answer did not fit after 2")
    again = client.post(f"/api/inception/{sid}/scope", headers=AUTH)  # nothing half-kept
    assert again.status_code == 200 and again.json()["round"] == 1
