"""The guard on its own, in front of an app that only says what reached it."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_harness.api.guard import Guard

pytestmark = pytest.mark.integration  # the test client runs an event loop (a socketpair)


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"reached:%d" % len(body)})


def _client(**options: Any) -> TestClient:
    return TestClient(Guard(_echo, token="s3cret-token-xyz", max_body=100), **options)


def test_only_the_exact_bearer_token_passes() -> None:
    client = _client()
    good = {"Authorization": "Bearer s3cret-token-xyz"}
    assert client.get("/api/x", headers=good).text == "reached:0"
    # The scheme's name is case-insensitive (RFC 9110 11.1); the token is not.
    for right in ("bearer s3cret-token-xyz", "BEARER s3cret-token-xyz"):
        assert client.get("/api/x", headers={"Authorization": right}).text == "reached:0"
    for wrong in ("Bearer s3cret-token-xy", "Bearer S3CRET-TOKEN-XYZ", "Bearers3cret-token-xyz",
                  "Bearer", "s3cret-token-xyz", "Basic czNjcmV0", "Basic s3cret-token-xyz",
                  ""):  # fmt: skip
        answer = client.get("/api/x", headers={"Authorization": wrong} if wrong else {})
        assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
        assert "s3cret" not in answer.text
    assert client.get("/healthz").text == "reached:0"
    assert client.get("/healthz/extra").status_code == 401


def test_the_open_path_is_found_under_a_root_path() -> None:
    client = _client(root_path="/harness")
    assert client.get("/harness/healthz").status_code == 200
    assert client.get("/harness/api/x").status_code == 401


def test_bodies_are_limited_declared_or_streamed() -> None:
    client = _client()
    auth = {"Authorization": "Bearer s3cret-token-xyz"}
    assert client.post("/api/x", content=b"a" * 100, headers=auth).text == "reached:100"
    assert client.post("/api/x", content=b"a" * 101, headers=auth).status_code == 413
    streamed = client.post("/api/x", content=iter([b"a" * 60, b"a" * 60]), headers=auth)
    assert streamed.status_code == 413 and streamed.json()["detail"].endswith("100 bytes")
    small = client.post("/api/x", content=iter([b"a" * 40, b"a" * 40]), headers=auth)
    assert small.text == "reached:80"


def test_a_guard_needs_a_token() -> None:
    with pytest.raises(ValueError):
        Guard(_echo, token="")
