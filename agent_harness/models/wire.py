"""The vendors' wire formats: a request built for one, and its answer read into a Completion.

Two formats cover every route: Anthropic's Messages API and OpenAI's Chat Completions (which
Gemini, OpenRouter and self-hosted servers also speak). Each answer, whole or streamed, is
read field by field without trusting its shape, so a broken or cut-off answer becomes a
retryable server `Failure` instead of an exception or an empty success.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent_harness.errors import UNREADABLE_JSON, read_json
from agent_harness.models.bodies import json_documents, snippet
from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.routes import Route
from agent_harness.models.transport import HttpRequest, HttpResponse

ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Completion:
    """A model's answer. Token counts are None when the provider did not say (never 0)."""

    text: str
    model: str
    vendor: str
    tokens_in: int | None
    tokens_out: int | None
    tokens_cached: int | None
    stop_reason: str | None
    latency_s: float
    raw: Any = field(repr=False, default=None)
    tool_calls: tuple[ToolCall, ...] = ()
    tokens_cache_write: int | None = None  # prompt tokens written to the cache (in tokens_in)
    # What the call cost by the price list (genai-prices) for its route's model and tokens;
    # None when no price is known (an unknown model, counts not reported), never 0.
    cost_usd: float | None = None


def build_request(
    route: Route,
    key: str,
    messages: Sequence[Mapping[str, Any]],
    system: str | None,
    max_tokens: int,
    timeout: float,
    stream: bool,
) -> HttpRequest:
    base = route.endpoint.rstrip("/")
    body: dict[str, Any] = {"model": route.model, "max_tokens": max_tokens}
    if route.api_format == "anthropic":
        body["messages"] = [dict(m) for m in messages]
        if system:
            body["system"] = system
        if stream:
            body["stream"] = True
        headers = {
            "x-api-key": key,
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
        }
        return HttpRequest("POST", f"{base}/v1/messages", headers, body, timeout, stream)
    chat = [{"role": "system", "content": system}] if system else []
    body["messages"] = chat + [dict(m) for m in messages]
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    return HttpRequest("POST", f"{base}/chat/completions", headers, body, timeout, stream)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _malformed(route: Route, response: HttpResponse, why: str) -> Failure:
    return Failure(
        FailureKind.SERVER,
        route.vendor,
        response.status,
        f"{why}: {snippet(response.body) or 'empty body'}",
        raw_code="malformed_response",
    )


def parse_completion(route: Route, response: HttpResponse, stream: bool) -> Completion | Failure:
    """Read a 2xx answer (JSON or SSE) into a Completion, or say why it is unusable."""
    if stream:
        docs = json_documents(response.body)
        if not docs:
            return _malformed(route, response, "the stream carried no JSON events")
        parsed = (
            _anthropic_stream(route, docs)
            if route.api_format == "anthropic"
            else _openai_stream(route, docs)
        )
        raw: Any = docs
    else:
        try:
            raw = read_json(response.body)
        except UNREADABLE_JSON:
            return _malformed(route, response, "the answer is not JSON")
        if not isinstance(raw, dict):
            return _malformed(route, response, "the answer is not a JSON object")
        parsed = (
            _anthropic_message(route, raw)
            if route.api_format == "anthropic"
            else _openai_message(route, raw)
        )
    if isinstance(parsed, Failure):
        return parsed
    if not parsed.text.strip() and not parsed.tool_calls:
        return Failure(
            FailureKind.SERVER,
            route.vendor,
            response.status,
            f"the model returned an empty completion (stop_reason "
            f"{parsed.stop_reason or 'unknown'})",
            raw_code="empty_completion",
        )
    return replace(parsed, raw=raw)


def _anthropic_usage(usage: Any) -> tuple[int | None, int | None, int | None, int | None]:
    """Tokens in (the whole prompt), out, read from the cache and written to it."""
    if not isinstance(usage, dict):
        return None, None, None, None
    fresh = _int_or_none(usage.get("input_tokens"))
    created = _int_or_none(usage.get("cache_creation_input_tokens"))
    cached = _int_or_none(usage.get("cache_read_input_tokens"))
    # Anthropic's input_tokens excludes cache reads and writes; the prompt's size is the sum.
    tokens_in = None if fresh is None else fresh + (created or 0) + (cached or 0)
    return tokens_in, _int_or_none(usage.get("output_tokens")), cached, created


def _anthropic_message(route: Route, raw: dict[str, Any]) -> Completion | Failure:
    content = raw.get("content")
    if not isinstance(content, list):
        return _unusable(route, "the answer has no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            args = block.get("input")
            calls.append(
                ToolCall(
                    str(block.get("id", "")),
                    str(block.get("name", "")),
                    args if isinstance(args, dict) else {},
                )
            )
    tokens_in, tokens_out, cached, created = _anthropic_usage(raw.get("usage"))
    return Completion(
        "".join(texts),
        str(raw.get("model") or route.model),
        route.vendor,
        tokens_in,
        tokens_out,
        cached,
        _str_or_none(raw.get("stop_reason")),
        0.0,
        tool_calls=tuple(calls),
        tokens_cache_write=created,
    )


def _anthropic_stream(route: Route, docs: list[Any]) -> Completion | Failure:
    model = route.model
    texts: dict[int, list[str]] = {}
    tools: dict[int, tuple[str, str, list[str]]] = {}
    usage: dict[str, Any] = {}
    stop: str | None = None
    finished = False
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        kind = doc.get("type")
        if kind == "message_start" and isinstance(doc.get("message"), dict):
            message = doc["message"]
            model = str(message.get("model") or model)
            if isinstance(message.get("usage"), dict):
                usage.update(message["usage"])
        elif kind == "content_block_start" and isinstance(doc.get("content_block"), dict):
            block, index = doc["content_block"], int(doc.get("index", 0))
            if block.get("type") == "tool_use":
                tools[index] = (str(block.get("id", "")), str(block.get("name", "")), [])
            else:
                texts.setdefault(index, []).append(str(block.get("text", "")))
        elif kind == "content_block_delta" and isinstance(doc.get("delta"), dict):
            delta, index = doc["delta"], int(doc.get("index", 0))
            if delta.get("type") == "text_delta":
                texts.setdefault(index, []).append(str(delta.get("text", "")))
            elif delta.get("type") == "input_json_delta" and index in tools:
                tools[index][2].append(str(delta.get("partial_json", "")))
        elif kind == "message_delta":
            delta = doc.get("delta")
            if isinstance(delta, dict):
                stop = _str_or_none(delta.get("stop_reason")) or stop
            if isinstance(doc.get("usage"), dict):
                usage.update(doc["usage"])
        elif kind == "message_stop":
            finished = True
    if not finished:
        return _unusable(route, "the stream ended before message_stop", "stream_incomplete")
    calls = _streamed_tool_calls(route, [tools[index] for index in sorted(tools)])
    if isinstance(calls, Failure):
        return calls
    text = "".join("".join(texts[i]) for i in sorted(texts))
    tokens_in, tokens_out, cached, created = _anthropic_usage(usage)
    return Completion(
        text,
        model,
        route.vendor,
        tokens_in,
        tokens_out,
        cached,
        stop,
        0.0,
        tool_calls=tuple(calls),
        tokens_cache_write=created,
    )


def _openai_usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None, None
    details = usage.get("prompt_tokens_details")
    cached = _int_or_none(details.get("cached_tokens")) if isinstance(details, dict) else None
    return (
        _int_or_none(usage.get("prompt_tokens")),
        _int_or_none(usage.get("completion_tokens")),
        cached,
    )


def _openai_message(route: Route, raw: dict[str, Any]) -> Completion | Failure:
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _unusable(route, "the answer has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    assert isinstance(message, dict)
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        try:
            args = read_json(function.get("arguments") or "{}")
        except UNREADABLE_JSON:
            args = {}
        calls.append(
            ToolCall(
                str(call.get("id", "")),
                str(function.get("name", "")),
                args if isinstance(args, dict) else {},
            )
        )
    tokens_in, tokens_out, cached = _openai_usage(raw.get("usage"))
    return Completion(
        str(message.get("content") or ""),
        str(raw.get("model") or route.model),
        route.vendor,
        tokens_in,
        tokens_out,
        cached,
        _str_or_none(choice.get("finish_reason")),
        0.0,
        tool_calls=tuple(calls),
    )


def _openai_stream(route: Route, docs: list[Any]) -> Completion | Failure:
    model = route.model
    texts: list[str] = []
    tools: dict[int, list[str]] = {}
    tool_meta: dict[int, tuple[str, str]] = {}
    usage: Any = None
    stop: str | None = None
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        model = str(doc.get("model") or model)
        if isinstance(doc.get("usage"), dict):
            usage = doc["usage"]
        for choice in doc.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            stop = _str_or_none(choice.get("finish_reason")) or stop
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            if isinstance(delta.get("content"), str):
                texts.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    _gather_tool_delta(call, tools, tool_meta)
    if stop is None:
        return _unusable(route, "the stream ended before a finish_reason", "stream_incomplete")
    pieces = [(*tool_meta.get(index, ("", "")), tools[index]) for index in sorted(tools)]
    calls = _streamed_tool_calls(route, pieces)
    if isinstance(calls, Failure):
        return calls
    tokens_in, tokens_out, cached = _openai_usage(usage)
    return Completion(
        "".join(texts),
        model,
        route.vendor,
        tokens_in,
        tokens_out,
        cached,
        stop,
        0.0,
        tool_calls=tuple(calls),
    )


def _gather_tool_delta(
    call: dict[str, Any], tools: dict[int, list[str]], tool_meta: dict[int, tuple[str, str]]
) -> None:
    """Add one streamed tool-call fragment: its id and name come once, its arguments in parts."""
    index = int(call.get("index", 0))
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    assert isinstance(function, dict)
    if call.get("id") or function.get("name"):
        tool_meta[index] = (str(call.get("id", "")), str(function.get("name", "")))
    tools.setdefault(index, []).append(str(function.get("arguments") or ""))


def _streamed_tool_calls(
    route: Route, pieces: Sequence[tuple[str, str, Sequence[str]]]
) -> list[ToolCall] | Failure:
    """Tool calls from (id, name, argument fragments); broken JSON makes the answer unusable."""
    calls: list[ToolCall] = []
    for ident, name, parts in pieces:
        try:
            args = read_json("".join(parts) or "{}")
        except UNREADABLE_JSON:
            return _unusable(route, f"tool call {name!r} arrived with broken JSON arguments")
        calls.append(ToolCall(ident, name, args if isinstance(args, dict) else {}))
    return calls


def _unusable(route: Route, why: str, code: str = "malformed_response") -> Failure:
    """A 2xx answer that cannot be used: a server fault, retried like one."""
    return Failure(FailureKind.SERVER, route.vendor, 200, why, raw_code=code)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
