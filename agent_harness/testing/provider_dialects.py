"""The scripted provider's other two dialects: Gemini's `generateContent` (Gemini CLI) and OpenAI
Chat Completions with edits written as text (aider).

Gemini CLI calls `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` (and the
unstreamed `:generateContent` for its side questions); a step becomes a `functionCall` to the
tool the request offers (`write_file`, `replace`, `run_shell_command`). aider offers no tools:
it reads edits from the model's text, whole files under their path ("whole" format) or
SEARCH/REPLACE blocks ("diff" format), whichever its system prompt asked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from agent_harness.testing.provider_steps import (
    Action,
    EditFile,
    Exchange,
    RunShell,
    Say,
    WriteFile,
)
from agent_harness.testing.scripted_turns import ScriptedCompletion
from agent_harness.testing.wire_formats import OpenAIChat, Rendered, split_in_two

GEMINI_PATH = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<method>\w+)$")
CHAT_PATH = "/v1/chat/completions"

_GEMINI_CWD = re.compile(
    r"(?:working in the directory|current working directory|Working directory)[^/\n]*"
    r"(?P<path>/[^\s'\"`]+)",
    re.IGNORECASE,
)


# -- Gemini generateContent ---------------------------------------------------------------------


def _gemini_parts_text(parts: Any) -> list[str]:
    return [str(p["text"]) for p in parts or [] if isinstance(p, dict) and "text" in p]


def gemini_exchange(body: Mapping[str, Any]) -> Exchange:
    """A Gemini request read as an exchange: model turns are `role: model` contents."""
    tools: list[str] = []
    for group in body.get("tools") or []:
        if isinstance(group, dict):
            tools += [
                str(d.get("name"))
                for d in group.get("functionDeclarations") or []
                if isinstance(d, dict)
            ]
    turn = 0
    user: list[str] = []
    outputs: list[str] = []
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        if content.get("role") == "model":
            turn += 1
            continue
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if "text" in part:
                user.append(str(part["text"]))
            elif isinstance(part.get("functionResponse"), dict):
                outputs.append(json.dumps(part["functionResponse"].get("response")))
    system = body.get("systemInstruction")
    system_text = (
        "\n".join(_gemini_parts_text(system.get("parts"))) if isinstance(system, dict) else ""
    )
    text = "\n".join(user)
    found = _GEMINI_CWD.search(text) or _GEMINI_CWD.search(system_text)
    cwd = found.group("path").rstrip(".,;:") if found else None
    return Exchange("gemini", body, tuple(tools), turn, text, tuple(outputs), cwd)


def _gemini_call(step: Action, exchange: Exchange) -> dict[str, Any]:
    """The step as one `functionCall` part (paths absolute, as Gemini CLI's tools want them)."""
    if isinstance(step, WriteFile) and "write_file" in exchange.tools:
        path = _absolute(exchange.cwd, step.path)
        return {"name": "write_file", "args": {"file_path": path, "content": step.content}}
    if isinstance(step, EditFile) and "replace" in exchange.tools:
        path = _absolute(exchange.cwd, step.path)
        args = {"file_path": path, "old_string": step.old, "new_string": step.new}
        return {"name": "replace", "args": args}
    command = step.command if isinstance(step, RunShell) else _shell_of(step)
    return {"name": "run_shell_command", "args": {"command": command}}


def gemini_answer(
    step: Action, exchange: Exchange, usage: Mapping[str, int], *, stream: bool
) -> Rendered:
    """The step as Gemini answers it: SSE chunks for `?alt=sse`, else one JSON body."""
    meta = {
        "promptTokenCount": usage["input_tokens"],
        "candidatesTokenCount": usage["output_tokens"],
        "totalTokenCount": usage["input_tokens"] + usage["output_tokens"],
    }
    if isinstance(step, Say):
        pieces: list[list[dict[str, Any]]] = [[{"text": p}] for p in split_in_two(step.text)]
    else:
        pieces = [[{"functionCall": _gemini_call(step, exchange)}]]
    pieces = pieces or [[{"text": ""}]]
    chunks = []
    for index, parts in enumerate(pieces):
        last = index == len(pieces) - 1
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "scripted"}
        if last:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = meta
        chunks.append(chunk)
    if not stream:
        whole = [part for parts in pieces for part in parts]
        if whole and all("text" in p for p in whole):
            whole = [{"text": "".join(p["text"] for p in whole)}]
        body = dict(chunks[-1], candidates=[dict(chunks[-1]["candidates"][0])])
        body["candidates"][0]["content"] = {"role": "model", "parts": whole}
        return Rendered(200, (("content-type", "application/json"),), json.dumps(body).encode())
    events = tuple(f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks)
    return Rendered(200, (("content-type", "text/event-stream"),), events=events)


# -- OpenAI Chat Completions, edits as text (aider) ---------------------------------------------


def chat_exchange(body: Mapping[str, Any]) -> Exchange:
    """A chat request read as an exchange; aider's edit format is named by its system prompt."""
    tools = tuple(
        str((t.get("function") or {}).get("name"))
        for t in body.get("tools") or []
        if isinstance(t, dict)
    )
    turn = 0
    user: list[str] = []
    system: list[str] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        texts = _chat_texts(message.get("content"))
        if role == "assistant":
            # aider frames its context as exchanges the model "agreed" to ("Ok, I won't try
            # and edit those files ..."): those are not turns of this conversation.
            turn += not " ".join(texts).startswith("Ok,")
        elif role == "system":
            system += texts
        else:
            user += texts
    return Exchange("chat", body, tools, turn, "\n".join([*system, *user]), (), None)


def _chat_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b.get("text")) for b in content if isinstance(b, dict) and "text" in b]
    return []


def chat_text(step: Action, exchange: Exchange) -> str:
    """The step as aider reads it from a reply: a whole file under its path, or a
    SEARCH/REPLACE block when the system prompt asked for those."""
    if isinstance(step, Say):
        return step.text
    if isinstance(step, RunShell):
        return f"Run this:\n\n```bash\n{step.command}\n```\n"
    blocks = "SEARCH/REPLACE" in exchange.user_text or isinstance(step, EditFile)
    if not blocks:
        assert isinstance(step, WriteFile)
        return f"{step.path}\n```\n{step.content}```\n"
    old = step.old + "\n" if isinstance(step, EditFile) else ""
    new = step.new + "\n" if isinstance(step, EditFile) else step.content
    return f"{step.path}\n```\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n"


def chat_answer(
    step: Action, exchange: Exchange, usage: Mapping[str, int], number: int
) -> Rendered:
    turn = ScriptedCompletion(
        text=chat_text(step, exchange),
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
    )
    return OpenAIChat().render(turn, exchange.body, number)


# -- shared -----------------------------------------------------------------------------------


def _absolute(cwd: str | None, path: str) -> str:
    if PurePosixPath(path).is_absolute() or cwd is None:
        return path
    return str(PurePosixPath(cwd) / path)


def _shell_of(step: Action) -> str:
    """A write or an edit as one shell command, for a request that offers only a shell."""
    if isinstance(step, RunShell | Say):
        return step.command if isinstance(step, RunShell) else f"echo {json.dumps(step.text)}"
    path = json.dumps(step.path)
    if isinstance(step, WriteFile):
        body = f"{step.content}SCRIPTED_EOF\n"
        return f"mkdir -p \"$(dirname {path})\" && cat > {path} <<'SCRIPTED_EOF'\n{body}"
    program = (
        f"import pathlib; p = pathlib.Path({step.path!r}); "
        f"p.write_text(p.read_text().replace({step.old!r}, {step.new!r}, 1))"
    )
    return f"python3 -c {json.dumps(program)}"
