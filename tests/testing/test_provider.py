"""The scripted provider and the npm installer on their own, without any agent CLI."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_harness.agents.output import read_cli_report
from agent_harness.agents.setup import codex_config
from agent_harness.testing.model_server import ScriptedFailure
from agent_harness.testing.npm_agents import (
    PINNED,
    NpmUnavailable,
    cache_root,
    install,
    installed_bin,
)
from agent_harness.testing.provider import (
    EditFile,
    Fail,
    RunShell,
    Say,
    ScriptedProvider,
    WriteFile,
    script,
    verdict,
)

CLAUDE_TOOLS = [{"name": n, "input_schema": {}} for n in ("Bash", "Edit", "Read", "Write")]
SYSTEM = [{"type": "text", "text": "<env>\nWorking directory: /work/tree\n</env>"}]


def post(
    url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def sse(data: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")
    ]


@pytest.mark.integration
def test_a_write_for_claude_code_reads_then_writes_at_the_absolute_path() -> None:
    with ScriptedProvider(script(WriteFile("pkg/a.py", "x = 1\n"))) as provider:
        status, _, body = post(
            f"{provider.url}/v1/messages?beta=true",
            {
                "model": "m",
                "system": SYSTEM,
                "tools": CLAUDE_TOOLS,
                "messages": [{"role": "user", "content": "do it"}],
            },
            {"x-api-key": "sk-secret"},
        )
    message = json.loads(body)
    assert status == 200 and message["stop_reason"] == "tool_use"
    calls = [(b["name"], b["input"]) for b in message["content"]]
    assert calls == [
        ("Read", {"file_path": "/work/tree/pkg/a.py"}),
        ("Write", {"file_path": "/work/tree/pkg/a.py", "content": "x = 1\n"}),
    ]
    [seen] = provider.requests
    assert seen.path == "/v1/messages?beta=true" and seen.headers["x-api-key"] == "<redacted>"


@pytest.mark.integration
def test_the_step_follows_the_conversation_and_streams_as_sse() -> None:
    steps = script(WriteFile("a", "1\n"), EditFile("a", "1", "2"), then=Say("finished"))
    history = [
        {"role": "user", "content": "do it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "Write", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
    ]
    with ScriptedProvider(steps) as provider:
        _, _, second = post(
            f"{provider.url}/v1/messages",
            {
                "model": "m",
                "stream": True,
                "system": SYSTEM,
                "tools": CLAUDE_TOOLS,
                "messages": history,
            },
        )
        _, _, third = post(
            f"{provider.url}/v1/messages",
            {"model": "m", "tools": CLAUDE_TOOLS, "messages": history + history[1:]},
        )
    events = sse(second)
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    partial = "".join(
        e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
    )
    assert '"old_string": "1", "new_string": "2"' in partial
    assert json.loads(third)["content"] == [{"type": "text", "text": "finished"}]


@pytest.mark.integration
def test_codex_gets_apply_patch_as_a_custom_tool_call_in_a_responses_stream() -> None:
    tools = [
        {"type": "function", "name": "exec_command"},
        {"type": "custom", "name": "apply_patch"},
    ]
    body = {
        "model": "gpt-5.5",
        "stream": True,
        "tools": tools,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
        ],
    }
    with ScriptedProvider(script(WriteFile("a.txt", "one\ntwo\n"))) as provider:
        status, headers, data = post(f"{provider.url}/v1/responses", body)
    events = sse(data)
    kinds = [e["type"] for e in events]
    assert status == 200 and headers["content-type"] == "text/event-stream"
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    [done] = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done["type"] == "custom_tool_call" and done["name"] == "apply_patch"
    assert done["input"] == "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** End Patch\n"
    assert events[-1]["response"]["usage"]["input_tokens"] == 120


@pytest.mark.integration
def test_a_shell_step_uses_exec_command_and_the_next_turn_says_the_verdict() -> None:
    tools = [{"type": "function", "name": "exec_command"}]
    first = {
        "model": "m",
        "tools": tools,
        "input": [{"type": "message", "role": "user", "content": "go"}],
    }
    later = dict(
        first,
        input=[
            *first["input"],
            {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ran"},
        ],
    )
    with ScriptedProvider(script(RunShell("make test"), verdict(False, ["no tests"]))) as p:
        call = [
            e
            for e in sse(post(f"{p.url}/v1/responses", first)[2])
            if e["type"] == "response.output_item.done"
        ]
        answer = sse(post(f"{p.url}/v1/responses", later)[2])
        text = [e for e in answer if e["type"] == "response.output_text.done"]
    assert call[0]["item"]["name"] == "exec_command"
    assert json.loads(call[0]["item"]["arguments"]) == {"cmd": "make test"}
    assert json.loads(text[0]["text"]) == {
        "approved": False,
        "reasons": ["no tests"],
        "permanent": False,
    }


@pytest.mark.integration
def test_failures_keep_their_status_and_headers_and_probes_get_a_quick_404() -> None:
    failure = ScriptedFailure.anthropic_unified_window(1_900_000_000)
    with ScriptedProvider(lambda _: Fail(failure)) as provider:
        status, headers, body = post(f"{provider.url}/v1/messages", {"model": "m", "messages": []})
        with pytest.raises(urllib.error.HTTPError) as probe:
            urllib.request.urlopen(f"{provider.url}/", timeout=5)
    assert status == 429 and headers["anthropic-ratelimit-unified-status"] == "rejected"
    assert json.loads(body)["error"]["type"] == "rate_limit_error"
    assert probe.value.code == 404
    assert [(r.method, r.path, r.vendor) for r in provider.requests] == [
        ("POST", "/v1/messages", "anthropic"),
        ("GET", "/", None),
    ]


@pytest.mark.unit
def test_claude_and_codex_reports_are_read_from_their_own_output() -> None:
    claude = json.dumps(
        {
            "type": "result",
            "is_error": False,
            "total_cost_usd": 0.0032,
            "result": "done",
            "usage": {"input_tokens": 360, "output_tokens": 90},
            "permission_denials": [{"tool_name": "Write", "tool_input": {"file_path": "/w/a.py"}}],
        }
    )
    report = read_cli_report(claude)
    assert (report.tokens_in, report.tokens_out, report.cost_usd) == (360, 90, 0.0032)
    assert report.denials == ("Write /w/a.py",)
    codex = "\n".join(
        [
            "ERROR codex_core::tools::router: "
            "error=patch rejected: writing is blocked by read-only sandbox",
            json.dumps(
                {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 2}}
            ),
            json.dumps({"type": "turn.failed", "error": {"message": "stream disconnected"}}),
        ]
    )
    report = read_cli_report(codex)
    assert report.denials == ("patch rejected: writing is blocked by read-only sandbox",)
    assert (report.tokens_in, report.cost_usd, report.error) == (5, None, "stream disconnected")
    # Gemini CLI 0.61.0's final event, as recorded against the scripted provider.
    gemini = (
        '{"type":"result","timestamp":"2026-11-30T21:15:20.210Z","status":"success","stats":'
        '{"total_tokens":300,"input_tokens":240,"output_tokens":60,"cached":0,"input":240,'
        '"duration_ms":540,"tool_calls":1}}'
    )
    report = read_cli_report(gemini)
    assert (report.tokens_in, report.tokens_out, report.cost_usd) == (240, 60, None)
    # opencode 1.18.33's step_finish events, as recorded (ids left out).
    step = {
        "type": "step_finish",
        "part": {
            "type": "step-finish",
            "tokens": {"total": 150, "input": 120, "output": 30, "reasoning": 0},
            "cost": 0.00081,
        },
    }
    report = read_cli_report("\n".join([json.dumps(step)] * 2))
    assert (report.tokens_in, report.tokens_out) == (240, 60)
    assert report.cost_usd == pytest.approx(0.00162)


@pytest.mark.unit
def test_codex_config_names_our_provider_with_retries_off() -> None:
    text = codex_config("http://127.0.0.1:5/v1", "gpt-5.5")
    assert 'model_provider = "agent_harness"' in text and 'model = "gpt-5.5"' in text
    assert 'base_url = "http://127.0.0.1:5/v1"' in text and 'wire_api = "responses"' in text
    assert "request_max_retries = 0" in text and "stream_max_retries = 0" in text


@pytest.mark.unit
def test_npm_cache_location_and_a_missing_npm(tmp_path: Path) -> None:
    assert cache_root({"AGENT_HARNESS_NPM_AGENTS": str(tmp_path)}) == tmp_path
    assert cache_root({"XDG_CACHE_HOME": "/c"}) == Path("/c/agent-harness/npm-agents")
    agent = PINNED["codex"]
    assert installed_bin(agent, tmp_path) is None
    with pytest.raises(NpmUnavailable, match="npm is not on PATH"):
        install(agent, tmp_path, env={"PATH": str(tmp_path / "nothing")})
    bin_dir = tmp_path / "@openai__codex@0.171.0" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "codex").touch()
    assert install(agent, tmp_path, env={"PATH": ""}) == bin_dir  # cached: npm not needed


GEMINI_TOOLS = [
    {"functionDeclarations": [{"name": n} for n in ("read_file", "write_file", "replace")]}
]


@pytest.mark.integration
def test_gemini_gets_function_calls_streamed_as_sse_then_its_text() -> None:
    steps = script(WriteFile("pkg/a.py", "x = 1\n"), EditFile("pkg/a.py", "x = 1", "x = 2"))
    with ScriptedProvider(steps) as provider:
        url = f"{provider.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        user = {"role": "user", "parts": [{"text": "Fix it."}]}
        status, headers, body = post(url, {"contents": [user], "tools": GEMINI_TOOLS})
        assert (status, headers["content-type"]) == (200, "text/event-stream")
        [chunk] = sse(body)
        [part] = chunk["candidates"][0]["content"]["parts"]
        assert part["functionCall"] == {
            "name": "write_file",
            "args": {"file_path": "pkg/a.py", "content": "x = 1\n"},
        }
        assert chunk["candidates"][0]["finishReason"] == "STOP"
        assert chunk["usageMetadata"]["promptTokenCount"] == 120
        # The answer to the call is in the conversation: the next turn is the edit.
        model = {"role": "model", "parts": [part]}
        done = {"role": "user", "parts": [{"functionResponse": {"name": "write_file"}}]}
        _, _, body = post(url, {"contents": [user, model, done], "tools": GEMINI_TOOLS})
        [chunk] = sse(body)
        call = chunk["candidates"][0]["content"]["parts"][0]["functionCall"]
        assert call["name"] == "replace" and call["args"]["new_string"] == "x = 2"
        # After the script, text in two pieces that a client must join.
        talk = [user, model, done, model, done]
        _, _, body = post(url, {"contents": talk, "tools": GEMINI_TOOLS})
        texts = [c["candidates"][0]["content"]["parts"][0]["text"] for c in sse(body)]
        assert "".join(texts) == "Done." and len(texts) == 2
    assert [r.vendor for r in provider.model_requests()] == ["gemini"] * 3


@pytest.mark.integration
def test_a_gemini_failure_is_googles_error_envelope() -> None:
    failure = ScriptedFailure.gemini_rate_limit(retry_after=3600)
    with ScriptedProvider(lambda _: Fail(failure)) as provider:
        url = f"{provider.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        status, headers, body = post(url, {"contents": []})
    assert (status, headers["retry-after"]) == (429, "3600")
    assert json.loads(body)["error"]["status"] == "RESOURCE_EXHAUSTED"


@pytest.mark.integration
def test_aider_gets_its_edit_as_text_in_the_format_its_prompt_asked_for() -> None:
    with ScriptedProvider(script(WriteFile("pkg/a.py", "x = 1\n"))) as provider:
        url = f"{provider.url}/v1/chat/completions"
        messages = [
            {"role": "system", "content": "Every *SEARCH/REPLACE block* must use this format"},
            {"role": "user", "content": "Here are summaries of some files"},
            {"role": "assistant", "content": "Ok, I won't try and edit those files."},
            {"role": "user", "content": "Fix it."},
        ]
        status, _, body = post(url, {"model": "gpt-4o", "messages": messages})
        assert status == 200
        text = json.loads(body)["choices"][0]["message"]["content"]
        assert text == "pkg/a.py\n```\n<<<<<<< SEARCH\n=======\nx = 1\n>>>>>>> REPLACE\n```\n"
        # Without that format asked for: the whole file under its path.
        _, _, body = post(url, {"model": "gpt-4o", "messages": messages[1:]})
        text = json.loads(body)["choices"][0]["message"]["content"]
        assert text == "pkg/a.py\n```\nx = 1\n```\n"


@pytest.mark.unit
def test_a_pip_agent_counts_as_installed_only_once_pip_finished(tmp_path: Path) -> None:
    from agent_harness.testing.pip_agents import COMPLETE
    from agent_harness.testing.pip_agents import PINNED as PIP_PINNED
    from agent_harness.testing.pip_agents import installed_bin as pip_installed_bin

    aider = PIP_PINNED["aider"]
    bin_dir = tmp_path / aider.dirname / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "aider").write_text("#!/bin/sh\n")
    assert pip_installed_bin(aider, tmp_path) is None  # a venv an interrupted install left
    (tmp_path / aider.dirname / COMPLETE).write_text("aider-chat==0.86.2\n")
    assert pip_installed_bin(aider, tmp_path) == bin_dir


@pytest.mark.unit
def test_a_pip_agent_installed_by_another_process_meanwhile_is_taken_as_it_is(
    tmp_path: Path,
) -> None:
    # Test workers install at once: one waits for the other's turn, then finds its venv
    # complete, and neither removes the other's venv half-way through.
    import fcntl
    import threading

    from agent_harness.testing.pip_agents import COMPLETE, install
    from agent_harness.testing.pip_agents import PINNED as PIP_PINNED

    aider = PIP_PINNED["aider"]
    found: list[Path] = []
    with open(tmp_path / f".{aider.dirname}.lock", "a", encoding="utf-8") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # the other process's turn
        waiter = threading.Thread(target=lambda: found.append(install(aider, tmp_path, env={})))
        waiter.start()
        inode = os.stat(tmp_path / f".{aider.dirname}.lock").st_ino
        wait_until(lambda: waiting_for_flock(inode))  # it found no venv, and waits its turn
        bin_dir = tmp_path / aider.dirname / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "aider").write_text("#!/bin/sh\n")
        (tmp_path / aider.dirname / COMPLETE).write_text("aider-chat==0.86.2\n")
        assert found == []
        fcntl.flock(other, fcntl.LOCK_UN)
        waiter.join(timeout=30)
    assert found == [bin_dir]
    assert (bin_dir / "aider").read_text() == "#!/bin/sh\n"


@pytest.mark.unit
def test_a_pip_install_that_failed_while_others_waited_is_not_tried_again_by_each(
    tmp_path: Path,
) -> None:
    import fcntl
    import threading

    from agent_harness.testing.pip_agents import PINNED as PIP_PINNED
    from agent_harness.testing.pip_agents import PipUnavailable, install

    aider = PIP_PINNED["aider"]
    said: list[str] = []

    def wait_and_install() -> None:
        try:
            install(aider, tmp_path, env={})
        except PipUnavailable as exc:
            said.append(exc.why)

    with open(tmp_path / f".{aider.dirname}.lock", "a", encoding="utf-8") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # the other process's turn, which fails
        waiter = threading.Thread(target=wait_and_install)
        waiter.start()
        inode = os.stat(tmp_path / f".{aider.dirname}.lock").st_ino
        wait_until(lambda: waiting_for_flock(inode))
        (tmp_path / f".{aider.dirname}.failed").write_text("ERROR: no index reachable")
        fcntl.flock(other, fcntl.LOCK_UN)
        waiter.join(timeout=30)
    assert said == ["ERROR: no index reachable"]
    assert not (tmp_path / aider.dirname).exists()  # no venv made: pip was not run again


def waiting_for_flock(inode: int) -> bool:
    """Whether some process waits for a flock on the file with `inode` (Linux's /proc/locks
    lists a waiter with `->`)."""
    with open("/proc/locks", encoding="ascii") as fh:
        return any(
            "->" in line and line.split()[-3].rsplit(":", 1)[-1] == str(inode) for line in fh
        )


def wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(3000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition never held")
