"""The guard on its own, in front of an app that only says what reached it."""

from __future__ import annotations

import asyncio
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
    auth = {"Authorization": "Bearer s3cret-token-xyz", "Content-Type": "application/json"}
    assert client.post("/api/x", content=b"a" * 100, headers=auth).text == "reached:100"
    assert client.post("/api/x", content=b"a" * 101, headers=auth).status_code == 413
    streamed = client.post("/api/x", content=iter([b"a" * 60, b"a" * 60]), headers=auth)
    assert streamed.status_code == 413 and streamed.json()["detail"].endswith("100 bytes")
    small = client.post("/api/x", content=iter([b"a" * 40, b"a" * 40]), headers=auth)
    assert small.text == "reached:80"


def test_a_guard_needs_a_token() -> None:
    with pytest.raises(ValueError):
        Guard(_echo, token="")


def test_a_request_that_reads_two_ways_is_refused_and_its_connection_closed() -> None:
    client = _client()
    auth = {"Authorization": "Bearer s3cret-token-xyz"}
    # A body framed both ways: a proxy reading Content-Length passes on what this server
    # would read as a second request (smuggled past the proxy's own rules). (Asked of the
    # guard directly: an HTTP client library will not send both.)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"0\r\n\r\n", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    headers = [
        (b"authorization", b"Bearer s3cret-token-xyz"),
        (b"content-length", b"5"),
        (b"transfer-encoding", b"chunked"),
        (b"content-type", b"application/json"),
    ]
    scope = {"type": "http", "method": "POST", "path": "/api/x", "headers": headers}
    asyncio.run(Guard(_echo, token="s3cret-token-xyz")(scope, receive, send))
    start, body = sent
    assert start["status"] == 400 and (b"connection", b"close") in start["headers"]
    assert b"Content-Length and Transfer-Encoding" in body["body"]
    twice = client.get("/api/x", headers=[("Authorization", auth["Authorization"]),
                                          ("Authorization", "Bearer wrong")])  # fmt: skip
    assert twice.status_code == 400 and "one Authorization header" in twice.json()["detail"]
    query = client.get("/api/x?state=merged&limit=5&state=failed", headers=auth)
    assert query.status_code == 400 and "'state' is given more than once" in query.text
    assert client.get("/api/x?state=merged&limit=5", headers=auth).text == "reached:0"
    # A body declared as nothing is not taken for JSON (a route would call it no object).
    untyped = client.post("/api/x", content=b'{"text": "x"}', headers=auth)
    assert untyped.status_code == 415 and "Content-Type: application/json" in untyped.text
