"""A scripted model provider on loopback that real agent CLIs can talk to.

A scenario says what the model does in agent terms: write this file, edit that one, run a
command, say this, fail with that 429. Each step becomes whichever tool the request offers, in
the wire format of the path hit (Anthropic Messages, OpenAI Responses). The step played is
chosen from the conversation the request carries (how many model turns it already holds), so a
CLI's side requests and retries never shift the script, and every request is recorded.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shlex
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, ClassVar

from agent_harness.testing.loopback import LoopbackServer
from agent_harness.testing.provider_dialects import (
    CHAT_PATH,
    GEMINI_PATH,
    chat_answer,
    chat_exchange,
    gemini_answer,
    gemini_exchange,
)
from agent_harness.testing.provider_steps import (
    Action,
    EditFile,
    Exchange,
    Fail,
    Hang,
    RunShell,
    Say,
    Scenario,
    Step,
    WriteFile,
    script,
    verdict,
)
from agent_harness.testing.scripted_handler import ScriptedHandler, blank_secrets
from agent_harness.testing.scripted_turns import (
    ScriptedCompletion,
    ScriptedFailure,
    ScriptedToolCall,
)
from agent_harness.testing.wire_formats import (
    AnthropicMessages,
    Rendered,
    split_in_two,
    sse_event,
)

__all__ = [
    "Action", "EditFile", "Exchange", "Fail", "Hang", "Recorded", "RunShell", "Say", "Scenario",
    "ScriptedFailure", "ScriptedProvider", "Step", "WriteFile", "responses_events", "script",
    "verdict",
]  # fmt: skip


@dataclass(frozen=True)
class Recorded:
    """A request as the provider saw it, with secret header values blanked."""

    method: str
    path: str  # including the query string
    headers: Mapping[str, str]
    body: Any
    vendor: str | None  # None for requests no API answers (probes)

    @property
    def text(self) -> str:
        return json.dumps(self.body)


# -- reading requests ---------------------------------------------------------------------------

_CWD = re.compile(r"(?:Working directory|Primary working directory|<cwd>):?\s*([^\s<]+)")


def _texts(content: Any) -> list[str]:
    """The text inside a message content (a string, or a list of typed blocks)."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            for key in ("text", "output", "content"):
                value = block.get(key)
                if isinstance(value, str):
                    out.append(value)
                elif isinstance(value, list):
                    out += _texts(value)
    return out


def _anthropic_exchange(body: Mapping[str, Any]) -> Exchange:
    tools = tuple(str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict))
    turn = 0
    user: list[str] = []
    outputs: list[str] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if message.get("role") == "assistant":
            turn += 1
            continue
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    outputs.append("\n".join(_texts(block.get("content"))))
                elif isinstance(block, dict) and isinstance(block.get("text"), str):
                    user.append(block["text"])
        elif isinstance(content, str):
            user.append(content)
    system = "\n".join(_texts(body.get("system")))
    found = _CWD.search(system) or _CWD.search("\n".join(user))
    return Exchange(
        "anthropic",
        body,
        tools,
        turn,
        "\n".join(user),
        tuple(outputs),
        found.group(1) if found else None,
    )


_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUT_ITEMS = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)


def _tool_names(tools: Any) -> list[str]:
    """Names of the tools offered, looking inside namespaces (which nest further tools)."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names += _tool_names(tool.get("tools"))
        else:
            names.append(str(tool.get("name") or tool.get("type")))
    return names


def _code_mode_tools(body: Mapping[str, Any]) -> list[str]:
    """The tools Codex offers in "code mode": not in `tools` but in an `additional_tools` input
    item, where one `exec` tool runs JavaScript that calls the others (`tools.apply_patch`)."""
    items = body.get("input")
    names: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            names += _tool_names(item.get("tools"))
    return names


def _responses_exchange(body: Mapping[str, Any]) -> Exchange:
    tools = tuple(_tool_names(body.get("tools")) + _code_mode_tools(body))
    turn = 0
    user: list[str] = []
    outputs: list[str] = []
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind in _CALL_ITEMS or (kind == "message" and item.get("role") == "assistant"):
            turn += 1
        elif kind in _OUTPUT_ITEMS:
            output = item.get("output")
            outputs.append(output if isinstance(output, str) else json.dumps(output))
        elif kind == "message" and item.get("role") in ("user", "developer"):
            user += _texts(item.get("content"))
    text = "\n".join(user)
    found = _CWD.search(text) or _CWD.search(str(body.get("instructions") or ""))
    return Exchange(
        "openai", body, tools, turn, text, tuple(outputs), found.group(1) if found else None
    )


# -- rendering steps as tool calls ------------------------------------------------------------


def _absolute(cwd: str | None, path: str) -> str:
    if PurePosixPath(path).is_absolute() or cwd is None:
        return path
    return str(PurePosixPath(cwd) / path)


def _anthropic_calls(step: Action, exchange: Exchange, number: int) -> ScriptedCompletion:
    ident = f"toolu_scripted_{number}"
    if isinstance(step, Say):
        return ScriptedCompletion(text=step.text)
    if isinstance(step, RunShell) or (
        "Write" not in exchange.tools and isinstance(step, WriteFile)
    ):
        command = step.command if isinstance(step, RunShell) else _shell_write(step)
        shell = "bash" if "bash" in exchange.tools else "Bash"
        args = {"command": command}
        if shell == "bash":
            args["description"] = "scripted step"  # opencode's bash tool requires one
        return ScriptedCompletion(tool_calls=(ScriptedToolCall(shell, args, ident),))
    if "edit" in exchange.tools and isinstance(step, EditFile):
        # opencode's tools: lower-case names, camelCase arguments, and a read before an edit.
        path = _absolute(exchange.cwd, step.path)
        read = ScriptedToolCall("read", {"filePath": path}, f"{ident}_read")
        args = {"filePath": path, "oldString": step.old, "newString": step.new}
        return ScriptedCompletion(tool_calls=(read, ScriptedToolCall("edit", args, ident)))
    path = _absolute(exchange.cwd, step.path)
    # Claude Code refuses to change a file it has not read in this conversation, so every
    # change reads first; both calls go in one message and run in order.
    read = ScriptedToolCall("Read", {"file_path": path}, f"{ident}_read")
    if isinstance(step, WriteFile):
        write = ScriptedToolCall("Write", {"file_path": path, "content": step.content}, ident)
        return ScriptedCompletion(tool_calls=(read, write))
    edit = ScriptedToolCall(
        "Edit", {"file_path": path, "old_string": step.old, "new_string": step.new}, ident
    )
    return ScriptedCompletion(tool_calls=(read, edit))


def _shell_write(step: WriteFile) -> str:
    path = shlex.quote(step.path)
    body = f"{step.content}SCRIPTED_EOF\n"
    return f"mkdir -p \"$(dirname {path})\" && cat > {path} <<'SCRIPTED_EOF'\n{body}"


def apply_patch_text(step: WriteFile | EditFile) -> str:
    """The step as a Codex `*** Begin Patch` envelope."""
    lines = ["*** Begin Patch"]
    if isinstance(step, WriteFile):
        lines.append(f"*** Add File: {step.path}")
        lines += ["+" + line for line in step.content.splitlines()]
    else:
        lines += [f"*** Update File: {step.path}", "@@"]
        lines += ["-" + line for line in step.old.splitlines()]
        lines += ["+" + line for line in step.new.splitlines()]
    lines.append("*** End Patch")
    return "\n".join(lines) + "\n"


def _responses_item(step: Action, exchange: Exchange, number: int) -> dict[str, Any]:
    call_id = f"call_scripted_{number}"
    if isinstance(step, Say):
        return {
            "type": "message",
            "id": f"msg_scripted_{number}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    if "exec" in _code_mode_tools(exchange.body):
        return _code_mode_call(step, number, call_id)
    tool_kinds = {
        str(t.get("name")): str(t.get("type"))
        for t in exchange.body.get("tools") or []
        if isinstance(t, dict)
    }
    if isinstance(step, WriteFile | EditFile) and "apply_patch" in tool_kinds:
        patch = apply_patch_text(step)
        if tool_kinds["apply_patch"] == "custom":
            return {
                "type": "custom_tool_call",
                "id": f"ctc_scripted_{number}",
                "status": "completed",
                "call_id": call_id,
                "name": "apply_patch",
                "input": patch,
            }
        return _function_call(number, call_id, "apply_patch", {"input": patch})
    if isinstance(step, RunShell):
        command = step.command
    elif isinstance(step, WriteFile):
        command = _shell_write(step)
    else:
        command = f"apply_patch <<'SCRIPTED_EOF'\n{apply_patch_text(step)}SCRIPTED_EOF\n"
    if "exec_command" in tool_kinds:
        return _function_call(number, call_id, "exec_command", {"cmd": command})
    return _function_call(number, call_id, "shell", {"command": ["bash", "-lc", command]})


def _code_mode_call(step: Action, number: int, call_id: str) -> dict[str, Any]:
    """The step as one `exec` call: a line of JavaScript calling the nested tool, whose output
    (a shell command's) is handed back with `text`."""
    if isinstance(step, WriteFile | EditFile):
        script = f"await tools.apply_patch({json.dumps(apply_patch_text(step))});"
    else:
        assert isinstance(step, RunShell)
        script = (
            f"const ran = await tools.exec_command({json.dumps({'cmd': step.command})});\n"
            "text(ran.output);"
        )
    return {
        "type": "custom_tool_call",
        "id": f"ctc_scripted_{number}",
        "status": "completed",
        "call_id": call_id,
        "name": "exec",
        "input": script,
    }


def _function_call(number: int, call_id: str, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_scripted_{number}",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(dict(args)),
    }


class _ResponseEvents:
    """Builds one Responses API stream: every event names its type and carries the next
    sequence number, as the API's own streams do."""

    def __init__(self) -> None:
        self._numbers = itertools.count()

    def __call__(self, kind: str, **fields: Any) -> bytes:
        return sse_event({"type": kind, "sequence_number": next(self._numbers), **fields}, kind)


def responses_events(
    item: Mapping[str, Any], body: Mapping[str, Any], number: int, usage: Mapping[str, int]
) -> list[bytes]:
    """The Responses API stream for one output item, `response.created` to `.completed`."""
    response: dict[str, Any] = {
        "id": f"resp_scripted_{number}",
        "object": "response",
        "created_at": 0,
        "status": "in_progress",
        "model": str(body.get("model", "scripted")),
        "output": [],
        "usage": None,
    }
    event = _ResponseEvents()
    events = [
        event("response.created", response=response),
        event("response.in_progress", response=response),
        *_output_item_events(event, item),
    ]
    done = dict(response, status="completed", output=[item], usage=_responses_usage(usage))
    events.append(event("response.completed", response=done))
    return events


def _output_item_events(event: _ResponseEvents, item: Mapping[str, Any]) -> list[bytes]:
    """The item announced empty, filled in (text in two deltas, or its arguments), then done."""
    start = dict(item, status="in_progress")
    if item["type"] == "message":
        start["content"] = []
    elif item["type"] == "function_call":
        start["arguments"] = ""
    events = [event("response.output_item.added", output_index=0, item=start)]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        ids = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        events.append(event("response.content_part.added", **ids, part=part))
        events += [
            event("response.output_text.delta", **ids, delta=piece) for piece in split_in_two(text)
        ]
        events.append(event("response.output_text.done", **ids, text=text))
        events.append(event("response.content_part.done", **ids, part=dict(part, text=text)))
    elif item["type"] == "function_call":
        ids = {"item_id": item["id"], "output_index": 0}
        arguments = item["arguments"]
        events.append(event("response.function_call_arguments.delta", **ids, delta=arguments))
        events.append(event("response.function_call_arguments.done", **ids, arguments=arguments))
    events.append(event("response.output_item.done", output_index=0, item=item))
    return events


def _responses_usage(usage: Mapping[str, int]) -> dict[str, Any]:
    return {
        "input_tokens": usage["input_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["input_tokens"] + usage["output_tokens"],
    }


# -- the server ---------------------------------------------------------------------------------


@dataclass
class _State:
    requests: list[Recorded] = field(default_factory=list)
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScriptedProvider(LoopbackServer):
    """A loopback provider answering Anthropic Messages and OpenAI Responses from a scenario.

    Use as a context manager. `url` is the base for Anthropic clients (`ANTHROPIC_BASE_URL`);
    OpenAI clients want `url + "/v1"`. Every other request (a CLI's startup probes, `GET /`)
    is recorded and answered 404 at once. Each model answer reports `input_tokens` and
    `output_tokens` of `usage` so the CLIs have figures to print.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        usage: Mapping[str, int] | None = None,
    ) -> None:
        self.scenario = scenario
        self.usage = dict(usage or {"input_tokens": 120, "output_tokens": 30})
        super().__init__()
        self._state = _State()

    thread_name = "scripted-provider"
    what = "the provider"

    def _handler(self) -> type[ScriptedHandler]:
        return type("BoundProviderHandler", (_ProviderHandler,), {"provider": self})

    @property
    def requests(self) -> list[Recorded]:
        with self._state.lock:
            return list(self._state.requests)

    def model_requests(self) -> list[Recorded]:
        """The requests that reached a model API (not probes)."""
        return [r for r in self.requests if r.vendor is not None]

    def _record(
        self, method: str, path: str, headers: Mapping[str, str], body: Any, vendor: str | None
    ) -> int:
        shown = blank_secrets(headers)
        with self._state.lock:
            self._state.requests.append(Recorded(method, path, shown, body, vendor))
            self._state.served += 1
            return self._state.served

    def _hold(self, hang: Hang) -> bool:
        """Wait out a hang; True when it was released (rather than closed or timed out)."""
        if hang.release is None:
            self._closing.wait(hang.max_s)
            return False
        waited = 0.0
        while waited < hang.max_s and not self._closing.is_set():
            if hang.release.wait(0.05):
                return True
            waited += 0.05
        return False

    def answer(self, vendor: str, body: Mapping[str, Any], number: int) -> Step:
        return self.scenario(_exchange(vendor, body))


def _exchange(vendor: str, body: Mapping[str, Any]) -> Exchange:
    readers = {
        "anthropic": _anthropic_exchange,
        "openai": _responses_exchange,
        "gemini": gemini_exchange,
        "chat": chat_exchange,
    }
    return readers[vendor](body)


def _vendor_of_path(path: str) -> str | None:
    if path in _API_PATHS:
        return _API_PATHS[path]
    found = GEMINI_PATH.match(path)
    if found and found.group("method") in ("generateContent", "streamGenerateContent"):
        return "gemini"
    return None


_ANTHROPIC = AnthropicMessages()
_API_PATHS = {"/v1/messages": "anthropic", "/v1/responses": "openai", CHAT_PATH: "chat"}


class _ProviderHandler(ScriptedHandler):
    """Answers a model API from the provider's scenario; anything else is recorded and 404s."""

    provider: ClassVar[ScriptedProvider]

    def do_GET(self) -> None:
        self.provider._record("GET", self.path, self.lower_headers(), None, None)
        self._whole(404, "application/json", b'{"error": "not found"}')

    do_HEAD = do_GET

    def do_POST(self) -> None:
        body = self.read_json()
        vendor = _vendor_of_path(self.api_path())
        number = self.provider._record("POST", self.path, self.lower_headers(), body, vendor)
        if vendor is None or not isinstance(body, dict):
            self._whole(404, "application/json", b'{"error": "no such API here"}')
            return
        step = self.provider.answer(vendor, body, number)
        if isinstance(step, Hang):
            if not self.provider._hold(step) or step.then is None:
                self.reset_connection()
                return
            step = step.then
        if isinstance(step, Fail):
            failure = step.failure
            headers = [("content-type", failure.content_type), *failure.headers]
            self._send(failure.status, headers, [failure.body], whole=True)
        elif vendor == "anthropic":
            self._send_anthropic(step, body, number)
        elif vendor in ("gemini", "chat"):
            self._send_rendered(self._dialect(vendor, step, body, number))
        else:
            item = _responses_item(step, _responses_exchange(body), number)
            events = responses_events(item, body, number, self.provider.usage)
            self._send(200, [("content-type", "text/event-stream")], events)

    def _send_anthropic(self, step: Action, body: Mapping[str, Any], number: int) -> None:
        calls = _anthropic_calls(step, _anthropic_exchange(body), number)
        completion = ScriptedCompletion(
            text=calls.text,
            tool_calls=calls.tool_calls,
            input_tokens=self.provider.usage["input_tokens"],
            output_tokens=self.provider.usage["output_tokens"],
        )
        self._send_rendered(_ANTHROPIC.render(completion, body, number))

    def _dialect(self, vendor: str, step: Action, body: Mapping[str, Any], number: int) -> Rendered:
        usage = self.provider.usage
        if vendor == "gemini":
            stream = "streamGenerateContent" in self.path
            return gemini_answer(step, gemini_exchange(body), usage, stream=stream)
        return chat_answer(step, chat_exchange(body), usage, number)

    def _send_rendered(self, rendered: Rendered) -> None:
        if rendered.events is None:
            self._send(rendered.status, list(rendered.headers), [rendered.body], True)
        else:
            self._send(rendered.status, list(rendered.headers), list(rendered.events))

    def _whole(self, status: int, content_type: str, body: bytes) -> None:
        self._send(status, [("content-type", content_type)], [body], whole=True)

    def _send(
        self,
        status: int,
        headers: Iterable[tuple[str, str]],
        chunks: list[bytes],
        whole: bool = False,
    ) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if whole:
            self.send_header("content-length", str(sum(len(c) for c in chunks)))
        else:
            self.send_header("cache-control", "no-cache")
        self.end_headers()
        # The CLI may hang up mid-answer; what it missed is its own concern.
        with contextlib.suppress(OSError):
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
