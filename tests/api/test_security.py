"""The guard: a token on every route but /healthz, bodies with a size limit, paths checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent_harness.api.context import PARSES_AT_ONCE, ApiContext
from agent_harness.store.database import Store
from tests.api.conftest import AUTH, PROJECT, TOKEN, client_for

pytestmark = pytest.mark.integration


def _every_route(client: TestClient) -> list[tuple[str, str]]:
    schema = client.get("/openapi.json", headers=AUTH).json()
    routes = [("get", "/openapi.json"), ("get", "/docs")]
    for path, operations in schema["paths"].items():
        concrete = path.replace("{owner}/{repo}:{key}", PROJECT).replace("{item_id}", "T1")
        routes += [(method, concrete) for method in operations]
    return routes


def test_every_route_but_healthz_needs_the_token(monitoring: TestClient) -> None:
    routes = _every_route(monitoring)
    assert len(routes) >= 14
    for method, path in routes:
        if path == "/healthz":
            continue
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            answer = monitoring.request(method, path, headers=headers)
            assert answer.status_code == 401, (method, path, headers)
            assert answer.headers["content-type"] == "application/json"
            assert "bearer token" in answer.json()["detail"]
    assert monitoring.get("/healthz").json()["status"] == "ok"


def test_the_token_is_in_no_answer(monitoring: TestClient) -> None:
    for method, path in _every_route(monitoring):
        if method == "get":
            answer = monitoring.get(path, headers=AUTH)
            assert answer.status_code < 500 and TOKEN not in answer.text, path
    # Not even where a request names it: the item not found was quoted back whole.
    for path in (f"/api/work/{TOKEN}", f"/api/events?item={TOKEN}", f"/api/work?state={TOKEN}"):
        answer = monitoring.get(path, headers=AUTH)
        assert answer.status_code < 500 and TOKEN not in answer.text, path


HOSTILE_BODIES: dict[str, tuple[bytes, str | None]] = {
    "malformed": (b"{", "application/json"),
    "nested too deep": (b"[" * 5000 + b"]" * 5000, "application/json"),
    "nested 900 deep": (b'{"zz": ' + b"[" * 900 + b"]" * 900 + b"}", "application/json"),
    "a number of 5000 digits": (b'{"a": ' + b"9" * 5000 + b"}", "application/json"),
    "not UTF-8": (b'{"a": "\xff"}', "application/json"),
    "not UTF-8, as text": (b'{"a": "\xff"}', "text/plain"),
    "not UTF-8, no type": (b"\x80\x81\xff", None),
    "a lone surrogate": (b'{"zz": "\\ud800"}', "application/json"),
    "a lone surrogate in a field": (b'{"text": "### T1: x\\udfff"}', "application/json"),
    "NaN": (b'{"zz": NaN, "text": Infinity}', "application/json"),
}


@pytest.mark.parametrize("body", HOSTILE_BODIES, ids=list(HOSTILE_BODIES))
def test_a_body_that_does_not_read_as_json_gets_an_answer_its_route_documents(
    monitoring: TestClient, body: str
) -> None:
    # An outside fuzzer sends these. FastAPI's own 422 handler failed on five of them (500 on
    # every route with a body), and an answer the description does not list is a finding.
    content, content_type = HOSTILE_BODIES[body]
    headers = {**AUTH, **({"Content-Type": content_type} if content_type else {})}
    schema = monitoring.get("/openapi.json", headers=AUTH).json()
    tried = 0
    for path, operations in schema["paths"].items():
        concrete = path.replace("{owner}/{repo}:{key}", PROJECT).replace("{item_id}", "T1")
        for method, operation in operations.items():
            if "requestBody" not in operation:
                continue
            answer = monitoring.request(method, concrete, content=content, headers=headers)
            assert str(answer.status_code) in operation["responses"], (method, path, answer.text)
            assert answer.status_code < 500, (method, path, answer.text)
            # Refused with a reason, or (half a surrogate pair in a plan) read as U+FFFD.
            assert "detail" in answer.json() or answer.status_code < 300
            tried += 1
    assert tried >= 8


def test_bodies_over_the_limit_are_refused(api_store: Store) -> None:
    client = client_for(ApiContext(store=api_store, mode="monitoring"), max_body=2048)
    big = {"text": "### T1: x\n\n" + "y" * 4096}
    declared = client.post("/api/plan/parse", json=big, headers=AUTH)
    assert declared.status_code == 413 and "2048 bytes" in declared.json()["detail"]

    def chunks() -> object:  # no Content-Length: counted as it arrives
        yield b'{"text": "'
        for _ in range(10):
            yield b"z" * 512
        yield b'"}'

    streamed = client.post(
        "/api/plan/parse", content=chunks(), headers={**AUTH, "content-type": "application/json"}
    )
    assert streamed.status_code == 413
    small = client.post("/api/plan/parse", json={"text": "### T1: x\n"}, headers=AUTH)
    assert small.status_code == 200


@pytest.mark.parametrize(
    ("work_dir", "plan", "says"),
    [
        ("{clone}", "../outside.md", "without '..'"),
        ("{clone}", "/etc/passwd", "without '..'"),
        ("{clone}", "sub/../../outside.md", "without '..'"),
        ("{clone}", "escape.md", "leads outside work_dir"),
        ("{clone}/../clone", "PLAN.md", "without '..'"),
        ("relative/clone", "PLAN.md", "absolute path"),
        ("{root}/plain", "PLAN.md", "not the top of a git clone"),
        ("{clone}/sub", "PLAN.md", "not the top of a git clone"),
        ("/", "etc/passwd", "outside"),
        ("{clone}", "missing.md", "is not a file"),
        ("{clone}", ".git/config", "is inside .git"),
        # These answered 500 in plain text, and reset the connection.
        ("{clone}", "loop.md", "cannot be"),
        ("{root}/looped", "PLAN.md", "cannot be"),
        ("{root}/" + "a" * 300, "PLAN.md", "cannot be looked at"),
        ("{clone}", "a" * 300 + ".md", "cannot be looked at"),
    ],
)
def test_paths_that_leave_the_clone_are_refused(
    supervised: TestClient, clone: Path, work_dir: str, plan: str, says: str
) -> None:
    root = clone.parent
    (root / "outside.md").write_text("### T1: x\n", encoding="utf-8")
    (root / "plain").mkdir()
    (root / "plain" / "PLAN.md").write_text("### T1: x\n", encoding="utf-8")
    (clone / "sub").mkdir()
    (clone / "sub" / "PLAN.md").write_text("### T1: x\n", encoding="utf-8")
    os.symlink(root / "outside.md", clone / "escape.md")
    os.symlink("loop.md", clone / "loop.md")
    os.symlink(root / "looped", root / "looped")
    spec = {
        "repo": "me/app",
        "work_dir": work_dir.format(clone=clone, root=root),
        "plan": plan,
        "reviewer": "codex",
        "agent": "claude",
    }
    answer = supervised.post("/api/projects", json=spec, headers=AUTH)
    assert answer.status_code == 422, answer.text
    assert says in answer.json()["detail"]
    assert supervised.get("/api/projects", headers=AUTH).json()["projects"][0]["id"] == PROJECT


def test_ids_are_validated(monitoring: TestClient) -> None:
    for path in ("/api/work/..%2F..%2Fetc", "/api/work/T1;rm", "/api/projects/not-a-project"):
        assert monitoring.get(path, headers=AUTH).status_code in (404, 422), path
    assert monitoring.get("/api/work", params={"project": "../x"}, headers=AUTH).status_code == 422


@pytest.mark.parametrize(
    ("escaped", "read"),
    [("\\ud800", "\ufffd"), ("\\udfff tail", "\ufffd tail"), ("\\ud83d\\ude00", "\U0001f600")],
)
def test_half_a_surrogate_pair_in_a_body_is_read_as_a_replacement_not_a_500(
    monitoring: TestClient, escaped: str, read: str
) -> None:
    # A lone `\ud800` became a string no UTF-8 can hold, and the answer quoting it failed
    # with a 500; a whole pair is one character, as JSON says.
    body = '{"text": "### T1: title ' + escaped + '\\n"}'
    answer = monitoring.post(
        "/api/plan/parse",
        content=body.encode(),
        headers={**AUTH, "content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    [item] = answer.json()["items"]
    assert item["title"] == f"title {read}"


def test_a_lone_surrogate_where_a_line_is_quoted_back_is_no_500(monitoring: TestClient) -> None:
    body = b'{"text": "- [ ] \\ud800 a checkbox quoted back\\n### T1: \\udfff"}'
    answer = monitoring.post(
        "/api/plan/parse", content=body, headers={**AUTH, "content-type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    [notice] = answer.json()["unread"]
    assert notice["text"].endswith("\ufffd a checkbox quoted back")


@pytest.mark.parametrize(
    ("body", "name"),
    [
        (b'{"text": "### T1: shown to a proxy\\n", "text": "### T2: read here\\n"}', "text"),
        (b'{"text": "### T1: x\\n", "extra": [{"a": 1, "a": 2}]}', "a"),  # nested, at any depth
    ],
    ids=["top", "nested"],
)  # fmt: skip
def test_a_body_naming_a_key_twice_is_refused_not_read_as_its_last(
    monitoring: TestClient, body: bytes, name: str
) -> None:
    # JSON leaves a repeated name undefined: Python keeps the last, a proxy or validator in
    # front may keep the first, so `{"dry_run": true, "dry_run": false}` could pass one and
    # write through the other. Refused, and the answer says which name.
    answer = monitoring.post(
        "/api/plan/parse", content=body, headers={**AUTH, "content-type": "application/json"}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == f"the JSON body names {name!r} twice in one object"


def test_plans_read_at_once_are_bounded_and_the_rest_of_the_api_still_answers(
    api_store: Store,
) -> None:
    # A plan of `[[[…` takes seconds a megabyte to read; fifty of them sent at once held every
    # worker thread of the server, so a plain GET waited minutes. Beyond PARSES_AT_ONCE a parse
    # is told to come back, and other routes are not queued behind it.
    ctx = ApiContext(store=api_store, mode="monitoring", parse_wait_s=0.05)
    client = client_for(ctx)
    plan = {"text": "### T1: a title\n"}
    for _ in range(PARSES_AT_ONCE):  # every turn taken, as by long reads in flight
        assert ctx.parses.acquire(blocking=False)
    try:
        busy = client.post("/api/plan/parse", json=plan, headers=AUTH)
        assert busy.status_code == 503 and busy.headers["retry-after"] == "1"
        assert "reading 2 plans already" in busy.json()["detail"]
        # A sync reads the registered plan file as a parse does: it waits its turn too (four
        # syncs of a plan of brackets ran at once, a minute each).
        synced = client.post("/api/plan/sync", json={"project": PROJECT}, headers=AUTH)
        assert synced.status_code == 503 and "reading 2 plans already" in synced.json()["detail"]
        assert client.get("/api/work", headers=AUTH).status_code == 200
    finally:
        for _ in range(PARSES_AT_ONCE):
            ctx.parses.release()
    answer = client.post("/api/plan/parse", json=plan, headers=AUTH)
    assert answer.status_code == 200 and answer.json()["items"][0]["id"] == "T1"
    described = client.get("/openapi.json", headers=AUTH).json()
    for route in ("/api/plan/parse", "/api/plan/sync"):
        assert "Retry-After" in described["paths"][route]["post"]["responses"]["503"]["headers"]


@pytest.mark.parametrize("repo", ["h/..", "h/."])
def test_a_repository_name_no_repository_has_is_refused_at_registration(
    supervised: TestClient, clone: Path, repo: str
) -> None:
    # Registered (201), every sync then answered 400 naming a CLI flag, and `start` said
    # "running" with that as the pool's error.
    spec = {"repo": repo, "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "agent": "claude"}  # fmt: skip
    answer = supervised.post("/api/projects", json=spec, headers=AUTH)
    assert answer.status_code == 422, answer.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "https://other.example.com"},
        {"Origin": "null"},  # a sandboxed frame's form
    ],
)
def test_a_change_another_sites_page_asks_for_is_refused(
    supervised: TestClient, headers: dict[str, str]
) -> None:
    # Behind a proxy that adds the token, any page could post a form that stops a project.
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    answer = supervised.post(f"/api/projects/{PROJECT}/stop", headers={**AUTH, **form, **headers})
    assert answer.status_code == 403 and "another site's page" in answer.json()["detail"]
    # What the same page may read is not asked here: reading is no change.
    assert supervised.get("/api/summary", headers={**AUTH, **headers}).status_code == 200


def test_a_change_from_the_servers_own_page_or_a_script_goes_through(
    supervised: TestClient,
) -> None:
    own = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    # /docs behind a proxy that rewrote Host (nginx's default): the browser says same-origin.
    proxied = {"Origin": "https://harness.example.com", "Sec-Fetch-Site": "same-origin"}
    # An older browser says only Origin: the address a proxy passed on counts as here.
    forwarded = {"Origin": "https://harness.example.com", "X-Forwarded-Host": "harness.example.com"}
    for headers in ({**AUTH, **own}, {**AUTH, **proxied}, {**AUTH, **forwarded}, AUTH):
        # Past the guard to the route, which knows no such project here.
        answer = supervised.post(f"/api/projects/{PROJECT}/stop", headers=headers)
        assert answer.status_code == 404 and "no project" in answer.json()["detail"]


def test_a_project_is_found_by_its_repositorys_name_in_any_case(
    supervised: TestClient, clone: Path
) -> None:
    # Registering said "registered already, as me/app:PLAN (names ignore case)", while every
    # route answered 404 to the same name in capitals.
    spec = {"repo": "me/app", "work_dir": str(clone), "plan": "PLAN.md", "reviewer": "codex",
            "agent": "claude", "plan_key": "CASE"}  # fmt: skip
    assert supervised.post("/api/projects", json=spec, headers=AUTH).status_code == 201
    found = supervised.get("/api/projects/ME/APP:CASE", headers=AUTH)
    assert found.status_code == 200 and found.json()["id"] == "me/app:CASE"
    stopped = supervised.post("/api/projects/Me/App:CASE/stop", headers=AUTH)
    assert stopped.status_code == 200 and stopped.json()["id"] == "me/app:CASE"
    assert supervised.get("/api/projects/me/app:OTHER", headers=AUTH).status_code == 404
