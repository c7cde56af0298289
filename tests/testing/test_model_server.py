"""The scripted model server is a fake users rely on, so it has tests of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from agent_harness.testing.model_server import (
    REDACTED,
    ModelServer,
    ScriptedCompletion,
    ScriptedFailure,
    ScriptedToolCall,
)

pytestmark = pytest.mark.integration

KEY = "sk-test-server-key"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(api_key=KEY) as running:
        yield running


def anthropic_post(server: ModelServer, body: dict[str, object], key: str = KEY) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/messages",
        json=body,
        timeout=5,
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
    )


def test_records_requests_with_secrets_blanked(server: ModelServer) -> None:
    server.enqueue(ScriptedCompletion(text="hi"))
    reply = anthropic_post(server, {"model": "claude-x", "max_tokens": 5, "messages": []})
    assert reply.status_code == 200
    assert reply.json()["content"] == [{"type": "text", "text": "hi"}]
    [seen] = server.requests
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == REDACTED
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.body["model"] == "claude-x"
    assert KEY not in json.dumps([r.headers for r in server.requests])


def test_a_wrong_key_gets_the_vendors_401_and_consumes_no_turn(server: ModelServer) -> None:
    server.enqueue(ScriptedCompletion(text="kept"))
    reply = anthropic_post(server, {"model": "m", "messages": []}, key="sk-wrong")
    assert reply.status_code == 401
    assert reply.json()["error"]["type"] == "authentication_error"
    assert server.remaining == 1


def test_failures_keep_their_status_headers_and_body(server: ModelServer) -> None:
    server.enqueue(ScriptedFailure.anthropic_rate_limit(retry_after=7))
    reply = anthropic_post(server, {"model": "m", "messages": []})
    assert reply.status_code == 429
    assert reply.headers["retry-after"] == "7"
    assert reply.json()["error"]["type"] == "rate_limit_error"


def test_an_exhausted_script_says_so_in_the_vendor_format(server: ModelServer) -> None:
    reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": "m", "messages": []},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=5,
    )
    assert reply.status_code == 500
    assert "exhausted" in reply.json()["error"]["message"]


def test_unknown_path_is_404(server: ModelServer) -> None:
    assert httpx.post(f"{server.url}/v1/responses", json={}, timeout=5).status_code == 404


def test_anthropic_stream_has_the_documented_event_sequence(server: ModelServer) -> None:
    server.enqueue(
        ScriptedCompletion(
            text="Hello", tool_calls=(ScriptedToolCall("read", {"path": "a.py"}, "tu_1"),)
        )
    )
    reply = anthropic_post(server, {"model": "m", "messages": [], "stream": True})
    assert reply.headers["content-type"].startswith("text/event-stream")
    names = [line[7:] for line in reply.text.splitlines() if line.startswith("event: ")]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_openai_stream_ends_with_usage_then_done(server: ModelServer) -> None:
    server.enqueue(ScriptedCompletion(text="Hey", input_tokens=3, output_tokens=2))
    reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={
            "model": "gpt",
            "messages": [],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        headers={"authorization": f"Bearer {KEY}"},
        timeout=5,
    )
    data = [line[6:] for line in reply.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert json.loads(data[-2])["usage"]["prompt_tokens"] == 3
    text = "".join(
        chunk["choices"][0]["delta"].get("content", "") for chunk in map(json.loads, data[:-2])
    )
    assert text == "Hey"


def test_responder_turn_answers_from_the_request_and_stays_unless_once() -> None:
    import httpx

    from agent_harness.testing.model_server import (
        ModelServer,
        ScriptedCompletion,
        ScriptedResponder,
    )

    def echo(body: object) -> ScriptedCompletion:
        assert isinstance(body, dict)
        return ScriptedCompletion(text="saw " + body["messages"][-1]["content"])

    with ModelServer([ScriptedResponder(echo, once=True), ScriptedResponder(echo)]) as server:
        texts = []
        for word in ("a", "b", "c"):
            reply = httpx.post(
                f"{server.url}/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": word}]},
                timeout=5,
            )
            texts.append(reply.json()["choices"][0]["message"]["content"])
        assert texts == ["saw a", "saw b", "saw c"]
        assert server.remaining == 1  # the repeating responder is still there
