"""How a scripted completion looks on the wire of each vendor's API, whole or streamed.

One class per API path turns the same `ScriptedCompletion` into that vendor's JSON body or its
server-sent events. Streams split every text and argument string in two, so a client that does
not really join the deltas it receives fails its tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from agent_harness.testing.scripted_turns import ScriptedCompletion, ScriptedFailure

JSON_HEADERS = (("content-type", "application/json"),)
SSE_HEADERS = (("content-type", "text/event-stream"),)


@dataclass(frozen=True)
class Rendered:
    """A rendered answer: either a whole body or a list of SSE events to write one by one."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""
    events: tuple[bytes, ...] | None = None


class WireFormat(Protocol):
    """How one API path renders turns and says 'unauthorised' / 'script exhausted'."""

    name: str

    def api_key(self, headers: Mapping[str, str]) -> str | None: ...

    def render(self, turn: ScriptedCompletion, request: Any, number: int) -> Rendered: ...

    def error(self, status: int, message: str) -> ScriptedFailure: ...


def split_in_two(text: str) -> list[str]:
    """Split text in two so streaming clients must really concatenate deltas."""
    if len(text) < 2:
        return [text] if text else []
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: an optional `event:` line, then the data (JSON unless a string)."""
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def wants_stream(request: Any) -> bool:
    return isinstance(request, dict) and request.get("stream") is True


def requested_model(turn: ScriptedCompletion, request: Any) -> str:
    if turn.model:
        return turn.model
    return str(request.get("model", "scripted")) if isinstance(request, dict) else "scripted"


# -- Anthropic Messages ---------------------------------------------------------------------------


class AnthropicMessages:
    """`POST /v1/messages`, JSON or SSE (message_start … message_stop)."""

    name = "anthropic"

    def api_key(self, headers: Mapping[str, str]) -> str | None:
        return headers.get("x-api-key")

    def error(self, status: int, message: str) -> ScriptedFailure:
        etype = {401: "authentication_error", 404: "not_found_error"}.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        return ScriptedFailure.anthropic(status, etype, message)

    def render(self, turn: ScriptedCompletion, request: Any, number: int) -> Rendered:
        message = {
            "id": f"msg_scripted_{number}",
            "type": "message",
            "role": "assistant",
            "model": requested_model(turn, request),
            "content": _anthropic_blocks(turn),
            "stop_reason": turn.stop_reason or ("tool_use" if turn.tool_calls else "end_turn"),
            "stop_sequence": None,
            "usage": _anthropic_usage(turn),
        }
        if not wants_stream(request):
            return Rendered(200, JSON_HEADERS, json.dumps(message).encode())
        return Rendered(200, SSE_HEADERS, events=tuple(_anthropic_stream(message)))


def _anthropic_usage(turn: ScriptedCompletion) -> dict[str, Any]:
    # A figure scripted as None is left out, for clients that must cope with a partial usage.
    usage: dict[str, Any] = {}
    if turn.input_tokens is not None:
        usage["input_tokens"] = turn.input_tokens
    if turn.output_tokens is not None:
        usage["output_tokens"] = turn.output_tokens
    if turn.cached_tokens is not None:
        usage["cache_read_input_tokens"] = turn.cached_tokens
    if turn.cache_write_tokens is not None:
        usage["cache_creation_input_tokens"] = turn.cache_write_tokens
    return usage


def _anthropic_blocks(turn: ScriptedCompletion) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    for call in turn.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
        )
    return blocks


def _anthropic_event(kind: str, **fields: Any) -> bytes:
    return sse_event({"type": kind, **fields}, kind)


def _anthropic_stream(message: dict[str, Any]) -> list[bytes]:
    """The events that build `message` up: its head, each block, then the stop and usage."""
    usage = message["usage"]
    # Output tokens are not known when a real stream starts; they come in message_delta.
    start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
    head = {**message, "content": [], "stop_reason": None, "usage": start_usage}
    events = [_anthropic_event("message_start", message=head)]
    for index, block in enumerate(message["content"]):
        events += _anthropic_block_events(index, block)
    delta_usage = {"output_tokens": usage["output_tokens"]} if "output_tokens" in usage else {}
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(_anthropic_event("message_delta", delta=stop, usage=delta_usage))
    events.append(_anthropic_event("message_stop"))
    return events


def _anthropic_block_events(index: int, block: dict[str, Any]) -> list[bytes]:
    opening: dict[str, Any]
    if block["type"] == "text":
        opening = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in split_in_two(block["text"])]
    else:
        opening = {**block, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in split_in_two(json.dumps(block["input"]))
        ]
    return [
        _anthropic_event("content_block_start", index=index, content_block=opening),
        *(_anthropic_event("content_block_delta", index=index, delta=delta) for delta in deltas),
        _anthropic_event("content_block_stop", index=index),
    ]


# -- OpenAI Chat Completions ----------------------------------------------------------------------


class OpenAIChat:
    """`POST /v1/chat/completions`, JSON or SSE chunks ending in `data: [DONE]`."""

    name = "openai"

    def api_key(self, headers: Mapping[str, str]) -> str | None:
        value = headers.get("authorization", "")
        return value[7:] if value.lower().startswith("bearer ") else None

    def error(self, status: int, message: str) -> ScriptedFailure:
        etype = "server_error" if status >= 500 else "invalid_request_error"
        code = "invalid_api_key" if status == 401 else None
        return ScriptedFailure.openai(status, message, etype, code)

    def render(self, turn: ScriptedCompletion, request: Any, number: int) -> Rendered:
        ident = f"chatcmpl-scripted-{number}"
        model = requested_model(turn, request)
        finish = turn.stop_reason or ("tool_calls" if turn.tool_calls else "stop")
        usage = _openai_usage(turn)
        calls: list[dict[str, Any]] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
            }
            for c in turn.tool_calls
        ]
        if not wants_stream(request):
            body = _chat_completion(ident, model, turn.text, calls, finish, usage)
            return Rendered(200, JSON_HEADERS, json.dumps(body).encode())
        chunks = _ChatChunks(ident, model)
        events = chunks.stream(turn.text, calls, finish)
        options = request.get("stream_options") if isinstance(request, dict) else None
        if usage is not None and isinstance(options, dict) and options.get("include_usage"):
            events.append(chunks.chunk([], usage=usage))
        events.append(sse_event("[DONE]"))
        return Rendered(200, SSE_HEADERS, events=tuple(events))


def _openai_usage(turn: ScriptedCompletion) -> dict[str, Any] | None:
    # OpenAI reports usage whole or not at all.
    if turn.input_tokens is None or turn.output_tokens is None:
        return None
    usage: dict[str, Any] = {
        "prompt_tokens": turn.input_tokens,
        "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens,
    }
    if turn.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": turn.cached_tokens}
    return usage


def _chat_completion(
    ident: str,
    model: str,
    text: str,
    calls: list[dict[str, Any]],
    finish: str,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


@dataclass(frozen=True)
class _ChatChunks:
    """The chunks of one streamed chat completion, which all repeat its id and model."""

    ident: str
    model: str

    def chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return sse_event(
            {
                "id": self.ident,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": choices,
                **extra,
            }
        )

    def delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return self.chunk([{"index": 0, "delta": delta, "finish_reason": finish_reason}])

    def stream(self, text: str, calls: list[dict[str, Any]], finish: str) -> list[bytes]:
        """The role, the text in pieces, each call (its name, then its arguments in pieces),
        and the finish reason."""
        events = [self.delta({"role": "assistant", "content": ""})]
        events += [self.delta({"content": piece}) for piece in split_in_two(text)]
        for index, call in enumerate(calls):
            function = call["function"]
            opening = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": ""},
            }
            events.append(self.delta({"tool_calls": [opening]}))
            events += [
                self.delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in split_in_two(function["arguments"])
            ]
        events.append(self.delta({}, finish))
        return events


DEFAULT_FORMATS: Mapping[str, WireFormat] = MappingProxyType(
    {"/v1/messages": AnthropicMessages(), "/v1/chat/completions": OpenAIChat()}
)
