"""What an outside fuzzer found at the API's edges: each answer as the description and the
docs say it, whatever the request gets wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import AUTH, PROJECT

pytestmark = pytest.mark.integration


def test_the_description_uses_only_json_schemas_own_words(monitoring: TestClient) -> None:
    text = json.dumps(monitoring.get("/openapi.json", headers=AUTH).json())
    # pydantic wrote `ge` / `le` on an optional number: a fuzzer then sent what it refuses.
    assert '"ge":' not in text and '"le":' not in text
    spec = monitoring.get("/openapi.json", headers=AUTH).json()["components"]["schemas"]
    [bounded] = spec["ProjectSpec"]["properties"]["max_attempts"]["anyOf"][:1]
    assert (bounded["minimum"], bounded["maximum"]) == (1, 100)


def test_every_pattern_the_description_names_is_said_in_words(monitoring: TestClient) -> None:
    from agent_harness.api.errors import PATTERN_WORDS

    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(monitoring.get("/openapi.json", headers=AUTH).json())
    assert found and found <= set(PATTERN_WORDS), found - set(PATTERN_WORDS)
    # A path that breaks one is told what it should be (it said "as its description says").
    owner = monitoring.get("/api/projects/-x/app:PLAN", headers=AUTH)
    assert owner.status_code == 422
    assert "a repository owner (letters, digits and '-'" in owner.json()["detail"]


def test_a_trailing_slash_is_no_path_and_no_redirect_to_the_hosts_name(
    monitoring: TestClient,
) -> None:
    answer = monitoring.get(
        "/api/summary/", headers={**AUTH, "Host": "evil.example"}, follow_redirects=False
    )
    assert answer.status_code == 404 and "location" not in answer.headers


def test_head_answers_as_get_without_a_body(monitoring: TestClient) -> None:
    for path, headers in (("/healthz", {}), ("/api/summary", AUTH)):
        answer = monitoring.head(path, headers=headers)
        assert answer.status_code == 200 and answer.content == b""
    assert monitoring.head("/api/summary").status_code == 401


def test_a_nul_character_in_any_string_of_a_body_is_refused(
    supervised: TestClient, clone: Path
) -> None:
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "agent": "claude",
            "reviewer": "openai:gpt-4.1", "checks": ["pytest\u0000 -q"]}  # fmt: skip
    answer = supervised.post("/api/projects", json=spec, headers=AUTH)
    assert answer.status_code == 422 and "NUL" in answer.json()["detail"]
    # A backslash followed by `u0000` is text, not the character: it passes the guard.
    spec["checks"] = ["echo \\u0000"]
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "a"} trailing',
        # FastAPI's reader gave up on these with "There was an error parsing the body".
        b"[" * 100_000 + b"]" * 100_000,
        b'{"text": "\xff\xfe"}',
        b'{"n": ' + b"9" * 5000 + b"}",
    ],
    ids=["trailing-text", "nested-too-deep", "not-utf-8", "number-too-long"],
)
def test_a_body_that_is_no_json_is_said_so_in_one_way(monitoring: TestClient, body: bytes) -> None:
    answer = monitoring.post(
        "/api/plan/parse", content=body, headers={**AUTH, "Content-Type": "application/json"}
    )
    assert answer.status_code == 400 and answer.json() == {
        "detail": "the body does not read as JSON"
    }


@pytest.mark.parametrize("path", ["/api/work", "/api/events", "/api/errors"])
def test_a_project_the_database_does_not_hold_is_a_404_not_an_empty_answer(
    monitoring: TestClient, path: str
) -> None:
    answer = monitoring.get(path, params={"project": "no/such:PLAN"}, headers=AUTH)
    assert answer.status_code == 404
    assert (
        answer.json()["detail"] == f"no project no/such:PLAN in this database (it holds {PROJECT})"
    )
    assert monitoring.get(path, params={"project": PROJECT}, headers=AUTH).status_code == 200


def test_a_roles_no_pass_could_use_are_refused_at_registration(
    supervised: TestClient, clone: Path
) -> None:
    base = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md"}
    cases = [
        ({"agent": "true", "reviewer": "codex"}, "true"),  # no preset, no {prompt} template
        ({"agent": "claude", "reviewer": "nosuch:model"}, "nosuch"),
        ({"implementer": "openai:gpt-4.1", "reviewer": "openai:gpt-4.1-mini"}, "openai"),
        ({"agent": "claude", "reviewer": "anthropic:claude-sonnet-4-5"}, "anthropic"),
    ]
    for roles, named in cases:
        answer = supervised.post("/api/projects", json={**base, **roles}, headers=AUTH)
        assert answer.status_code == 400 and named in answer.json()["detail"], answer.text
    listed = supervised.get("/api/projects", headers=AUTH).json()["projects"]
    assert not any(p["registered"] for p in listed)  # nothing was kept of any of them


def test_start_refuses_what_would_fail_every_pass_and_leaves_the_project_stopped(
    supervised: TestClient, clone: Path
) -> None:
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "agent": "gemini",
            "reviewer": "codex", "plan_key": "NOGEMINI"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    started = supervised.post("/api/projects/me/app:NOGEMINI/start", headers=AUTH)
    assert started.status_code == 400 and "gemini not found on PATH" in started.json()["detail"]
    project = supervised.get("/api/projects/me/app:NOGEMINI", headers=AUTH).json()
    assert project["control"] == "stopped"
    assert "me/app:NOGEMINI" not in supervised.get("/api/summary", headers=AUTH).json()["running"]


def test_a_reviewer_of_the_implementers_vendor_is_refused_over_the_api_too(
    supervised: TestClient, clone: Path
) -> None:
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "agent": "codex",
            "reviewer": "anthropic:claude-sonnet-4-5", "plan_key": "VENDORS"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    ask = {"project": "me/app:VENDORS", "role": "reviewer", "route": "openai:gpt-4.1-mini"}
    refused = supervised.put("/api/roles", json=ask, headers=AUTH)
    assert refused.status_code == 400 and "openai" in refused.json()["detail"]
    kept = supervised.get("/api/roles", params={"project": "me/app:VENDORS"}, headers=AUTH)
    assert kept.json()["routes"] == {}


def test_a_range_that_ends_before_it_starts_is_refused(supervised: TestClient) -> None:
    assert supervised.post("/api/audit/reconcile", headers=AUTH).status_code == 200
    for path in ("/api/audit/cost", "/api/audit/delivery", "/api/audit/rollups"):
        backwards = {"since": "2026-12-31", "until": "2026-01-01"}
        answer = supervised.get(path, params=backwards, headers=AUTH)
        assert answer.status_code == 400, answer.text
        assert answer.json()["detail"] == "since (2026-12-31) is after until (2026-01-01)"
        one_day = {"since": "2026-01-01", "until": "2026-01-01"}
        assert supervised.get(path, params=one_day, headers=AUTH).status_code == 200


def test_registering_a_project_a_run_already_queued_shows_its_counts_at_once(
    supervised: TestClient, clone: Path
) -> None:
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "agent": "claude",
            "reviewer": "codex"}  # fmt: skip
    answer = supervised.post("/api/projects", json=spec, headers=AUTH)
    assert answer.status_code == 201 and answer.json()["id"] == PROJECT
    read = supervised.get(f"/api/projects/{PROJECT}", headers=AUTH).json()
    assert answer.json()["counts"] == read["counts"] != {}


def test_a_body_sent_as_anything_but_json_is_415_not_a_puzzle(monitoring: TestClient) -> None:
    text = b'{"text": "### T1: a\\n"}'
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    ):
        answer = monitoring.post("/api/plan/parse", content=text, headers={**AUTH, **headers})
        assert answer.status_code == 415, (headers, answer.text)
    as_json = {"Content-Type": "application/json; charset=utf-8"}
    answer = monitoring.post("/api/plan/parse", content=text, headers={**AUTH, **as_json})
    assert answer.status_code == 200
    # A route that takes no body is not refused for a type its empty body was given.
    empty = monitoring.post(
        "/api/projects/me/app:PLAN/start", headers={**AUTH, "Content-Type": "text/plain"}
    )
    assert empty.status_code == 409  # monitoring only, as without the header


def test_projects_whose_names_clean_alike_never_share_a_state_folder(tmp_path: Path) -> None:
    from agent_harness.api.pools import project_state_dir

    # `c/d-e:PLAN` and `c-d/e:PLAN` both cleaned to `c-d-e-PLAN`: one project's agent worked in
    # the other repository's worktree, and their sessions shared one name.
    first = project_state_dir(tmp_path, "c/d-e:PLAN")
    second = project_state_dir(tmp_path, "c-d/e:PLAN")
    assert first != second and first.parent == second.parent == tmp_path / "projects"
    assert project_state_dir(tmp_path, "c/d-e:PLAN") == first  # the same every time


def test_a_project_folder_named_before_the_hash_stays_its_projects(tmp_path: Path) -> None:
    from agent_harness.api.pools import OWNER_FILE, project_state_dir

    # A server of the version before kept `me/app:PLAN`'s worktrees in `projects/me-app-PLAN`.
    kept = tmp_path / "projects" / "me-app-PLAN"
    kept.mkdir(parents=True)
    assert project_state_dir(tmp_path, "me/app:PLAN") == kept
    assert (kept / OWNER_FILE).read_text() == "me/app:PLAN\n"
    # Another whose name cleans alike gets a folder of its own, not that one.
    other = project_state_dir(tmp_path, "me-app/PLAN")
    assert other != kept and other.name.startswith("me-app-PLAN-")
    assert project_state_dir(tmp_path, "me/app:PLAN") == kept


def test_an_old_folder_two_registered_projects_could_own_is_given_to_neither(
    tmp_path: Path,
) -> None:
    from agent_harness.api.pools import OWNER_FILE, project_state_dir

    # The first of them to start took it, and with it the other's worktrees and sessions.
    kept = tmp_path / "projects" / "c-d-e-PLAN"
    kept.mkdir(parents=True)
    both = ["c/d-e:PLAN", "c-d/e:PLAN"]
    first = project_state_dir(tmp_path, "c-d/e:PLAN", both)
    second = project_state_dir(tmp_path, "c/d-e:PLAN", both)
    assert kept not in (first, second) and first != second
    assert not (kept / OWNER_FILE).exists()
