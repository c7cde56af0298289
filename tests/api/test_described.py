"""The API does what its OpenAPI description says, where an outside fuzzer (schemathesis, its
default checks, against `serve`) found it did not: a 405's `Allow`, a 422's body, a day
written as a number, a project that is not there, a body the description refuses."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agent_harness.api.context import ApiContext
from agent_harness.api.pools import ProjectPools
from agent_harness.config import Settings
from agent_harness.store.database import open_store
from tests.api.conftest import AUTH, client_for

pytestmark = pytest.mark.integration


@pytest.fixture
def empty(db_dir: Path) -> Iterator[TestClient]:
    """A supervising server over a database no run has used yet."""
    store = open_store(str(db_dir / "empty.sqlite"))
    settings = Settings(state_dir=str(db_dir / "state"), sessions={"host": "headless"})
    pools = ProjectPools(store, settings, idle_s=3600)
    ctx = ApiContext(store=store, mode="supervised", pools=pools, work_root=db_dir)
    try:
        yield client_for(ctx)
    finally:
        pools.close()
        store.close()


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        # HEAD too, wherever GET is served (the guard answers it).
        ("/api/work", "GET, HEAD, POST"),
        ("/api/control", "GET, HEAD, POST"),
        ("/api/roles", "GET, HEAD, PUT"),
        ("/openapi.json", "GET, HEAD"),  # not in the description: Starlette's own answer
    ],
)
def test_a_405_names_every_method_of_its_path(
    monitoring: TestClient, path: str, methods: str
) -> None:
    # Starlette named only the first route's methods: `Allow: GET` on a path that takes POST.
    answer = monitoring.request("OPTIONS", path, headers=AUTH)
    assert answer.status_code == 405
    assert answer.headers["Allow"] == methods
    assert answer.json() == {"detail": "Method Not Allowed"}


def test_every_422_is_described_as_the_error_body_it_is(monitoring: TestClient) -> None:
    schema = monitoring.get("/openapi.json", headers=AUTH).json()
    described = [
        operation["responses"]["422"]
        for operations in schema["paths"].values()
        for operation in operations.values()
        if "422" in operation["responses"]
    ]
    assert len(described) >= 20
    for answer in described:
        body = answer["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/ErrorBody"}
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    # ... and it is what comes: one sentence, no echo of the input, a pattern said in words.
    answer = monitoring.post(
        "/api/plan/parse", json={"project": "not a project"}, headers=AUTH
    ).json()
    assert answer == {"detail": "body project: should be a project id, owner/repo:plankey"}
    missing = monitoring.post("/api/plan/sync", headers=AUTH)
    assert (missing.status_code, missing.json()) == (422, {"detail": "body: Field required"})


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("until=0", 422),
        ("until=20240101", 422),
        ("since=0170-05-17", 404),
        ("until=2026-12-05", 404),
    ],
)
def test_a_day_is_written_as_a_day(monitoring: TestClient, query: str, status: int) -> None:
    # `until=0` was read as a time (1970-01-01) and answered 200; a year before 1000 was
    # refused as "not a UTC day". (404: this server has no audit record yet.)
    answer = monitoring.get(f"/api/audit/rollups?{query}", headers=AUTH)
    assert answer.status_code == status, answer.text
    if status == 422:
        assert "write a day as YYYY-MM-DD" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/work", None),
        ("GET", "/api/work/T1", None),
        ("POST", "/api/work/T1/retry", None),
        ("POST", "/api/control", {"action": "drain"}),
        ("GET", "/api/control?project=me/none:PLAN", None),
    ],
)
def test_no_project_yet_is_a_404_not_a_bad_request(
    empty: TestClient, method: str, path: str, body: Any
) -> None:
    answer = empty.request(method, path, json=body, headers=AUTH)
    assert answer.status_code == 404, answer.text
    assert "no project" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("body", "status"),
    [({}, 400), ({"text": "x", "project": "me/app:PLAN"}, 400), ({"text": None}, 422)],
)
def test_a_plan_to_parse_is_exactly_one_of_text_or_project(
    monitoring: TestClient, body: dict[str, Any], status: int
) -> None:
    schema = monitoring.get("/openapi.json", headers=AUTH).json()["components"]["schemas"]
    assert schema["PlanParseIn"]["oneOf"] == [{"required": ["text"]}, {"required": ["project"]}]
    answer = monitoring.post("/api/plan/parse", json=body, headers=AUTH)
    assert answer.status_code == status, answer.text


def test_a_sync_on_a_server_given_no_token_is_refused_as_things_stand(
    supervised: TestClient, clone: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 502 said the tracker failed; it was never asked. The server lacks the token.
    for name in ("GH_TOKEN", "GITHUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    only_git = clone.parent / "bin"  # and no `gh` to ask for one
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    monkeypatch.setenv("PATH", str(only_git))
    spec = {
        "repo": "me/app",
        "work_dir": str(clone),
        "plan": "PLAN.md",
        "reviewer": "codex",
        "agent": "claude",
    }
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    answer = supervised.post("/api/plan/sync", json={"project": "me/app:PLAN"}, headers=AUTH)
    assert answer.status_code == 409, answer.text
    assert answer.json()["detail"].startswith("no GitHub token")
