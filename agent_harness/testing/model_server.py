"""A scripted model server on loopback that speaks the vendors' real wire formats.

Tests queue turns as data (a completion, a vendor failure with its real status, headers and
body, a hang, a dropped connection); the server plays them in order to whoever calls, renders
each in the wire format of the path that was hit, and records every request with its secrets
blanked. Adding an API is adding a `WireFormat` for its path; the turns stay the same.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from types import MappingProxyType
from typing import Any, Protocol

from agent_harness.testing.loopback import LoopbackServer

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"})
REDACTED = "<redacted>"


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call the scripted model makes."""

    name: str
    arguments: Mapping[str, Any]
    id: str = "call_1"


@dataclass(frozen=True)
class ScriptedCompletion:
    """A successful answer. `cut_after_events` drops the connection (RST) mid-stream."""

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    stop_reason: str | None = None  # None: the format's normal stop for text / tool calls
    input_tokens: int | None = 12
    output_tokens: int | None = 7
    cached_tokens: int | None = None
    model: str | None = None  # None: echo the requested model
    cut_after_events: int | None = None


@dataclass(frozen=True)
class ScriptedFailure:
    """A response with exactly this status, these headers and this body."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"

    @classmethod
    def raw(
        cls,
        status: int,
        body: str | bytes | Mapping[str, Any] | list[Any],
        headers: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> ScriptedFailure:
        data = (
            body
            if isinstance(body, bytes)
            else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        )
        return cls(status, data, tuple((headers or {}).items()), content_type)

    # -- Anthropic (https://docs.anthropic.com/en/api/errors) --------------------------------

    @classmethod
    def anthropic(
        cls,
        status: int,
        etype: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> ScriptedFailure:
        body = {
            "type": "error",
            "error": {"type": etype, "message": message, **extra},
            "request_id": "req_scripted",
        }
        return cls.raw(status, body, headers)

    @classmethod
    def anthropic_rate_limit(cls, retry_after: float = 1.0) -> ScriptedFailure:
        return cls.anthropic(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            {"retry-after": _num(retry_after)},
        )

    @classmethod
    def anthropic_overloaded(cls) -> ScriptedFailure:
        return cls.anthropic(529, "overloaded_error", "Overloaded")

    @classmethod
    def anthropic_spend_cap(cls) -> ScriptedFailure:
        return cls.anthropic(
            429,
            "rate_limit_error",
            "You have reached your monthly spend limit.",
            details={"error_code": "enforced_spend_limit_reached"},
        )

    @classmethod
    def anthropic_unified_window(
        cls, reset: float, windows: Iterable[str] = ("5h",), retry_after: float | None = None
    ) -> ScriptedFailure:
        headers = {
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": _num(reset),
        }
        for window in windows:
            headers[f"anthropic-ratelimit-unified-{window}-status"] = "rejected"
            headers[f"anthropic-ratelimit-unified-{window}-reset"] = _num(reset)
        if retry_after is not None:
            headers["retry-after"] = _num(retry_after)
        return cls.anthropic(
            429, "rate_limit_error", "This request would exceed your account's rate limit.", headers
        )

    @classmethod
    def anthropic_auth(cls) -> ScriptedFailure:
        return cls.anthropic(401, "authentication_error", "invalid x-api-key")

    @classmethod
    def anthropic_prompt_too_long(cls) -> ScriptedFailure:
        return cls.anthropic(
            400, "invalid_request_error", "prompt is too long: 214312 tokens > 200000 maximum"
        )

    # -- OpenAI (https://platform.openai.com/docs/guides/error-codes) ------------------------

    @classmethod
    def openai(
        cls,
        status: int,
        message: str,
        etype: str,
        code: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> ScriptedFailure:
        body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
        return cls.raw(status, body, headers)

    @classmethod
    def openai_rate_limit(
        cls,
        reset_requests: str = "1s",
        reset_tokens: str = "6m0s",
        retry_after: float | None = None,
    ) -> ScriptedFailure:
        headers = {
            "x-ratelimit-reset-requests": reset_requests,
            "x-ratelimit-reset-tokens": reset_tokens,
        }
        if retry_after is not None:
            headers["retry-after"] = _num(retry_after)
        return cls.openai(
            429, "Rate limit reached for requests", "requests", "rate_limit_exceeded", headers
        )

    @classmethod
    def openai_insufficient_quota(cls) -> ScriptedFailure:
        return cls.openai(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        )

    @classmethod
    def openai_context_length(cls) -> ScriptedFailure:
        return cls.openai(
            400,
            "This model's maximum context length is 128000 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        )

    @classmethod
    def openai_server_error(cls) -> ScriptedFailure:
        return cls.openai(
            500, "The server had an error while processing your request.", "server_error", None
        )

    # -- Anything in front of a model ------------------------------------------------------

    @classmethod
    def html_bad_gateway(cls) -> ScriptedFailure:
        page = (
            "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway"
            "</h1><hr>nginx</body></html>"
        )
        return cls.raw(502, page, content_type="text/html")

    @classmethod
    def malformed_json(cls, status: int = 200) -> ScriptedFailure:
        return cls.raw(status, b'{"id": "msg_1", "content": [', content_type="application/json")


@dataclass(frozen=True)
class ScriptedHang:
    """Accept the request and answer nothing until the server closes (or `max_s` passes)."""

    max_s: float = 10.0


@dataclass(frozen=True)
class ScriptedDisconnect:
    """Reset the connection before sending a single byte of response."""


ScriptedTurn = ScriptedCompletion | ScriptedFailure | ScriptedHang | ScriptedDisconnect


@dataclass(frozen=True)
class ScriptedResponder:
    """A turn decided by the request: `respond(body)` returns the turn to play.

    It stays at the head of the script (answering every later request too) unless `once`.
    Used where the answer depends on what was asked, e.g. a scripted reviewer reading a diff.
    """

    respond: Callable[[Any], ScriptedTurn]
    once: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it, with secret header values blanked."""

    path: str
    headers: Mapping[str, str]
    body: Any
    format: str


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


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _pieces(text: str) -> list[str]:
    """Split text in two so streaming clients must really concatenate deltas."""
    if len(text) < 2:
        return [text] if text else []
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def _wants_stream(request: Any) -> bool:
    return isinstance(request, dict) and request.get("stream") is True


def _requested_model(turn: ScriptedCompletion, request: Any) -> str:
    if turn.model:
        return turn.model
    return str(request.get("model", "scripted")) if isinstance(request, dict) else "scripted"


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
        model = _requested_model(turn, request)
        stop = turn.stop_reason or ("tool_use" if turn.tool_calls else "end_turn")
        usage: dict[str, Any] = {}
        if turn.input_tokens is not None:
            usage["input_tokens"] = turn.input_tokens
        if turn.output_tokens is not None:
            usage["output_tokens"] = turn.output_tokens
        if turn.cached_tokens is not None:
            usage["cache_read_input_tokens"] = turn.cached_tokens
        blocks: list[dict[str, Any]] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": dict(call.arguments),
                }
            )
        message = {
            "id": f"msg_scripted_{number}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        json_headers = (("content-type", "application/json"),)
        if not _wants_stream(request):
            return Rendered(200, json_headers, json.dumps(message).encode())
        start_usage = {k: v for k, v in usage.items() if k != "output_tokens"}
        events = [
            _sse(
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": start_usage,
                    },
                },
                "message_start",
            )
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(
                    _sse(
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                        "content_block_start",
                    )
                )
                for piece in _pieces(block["text"]):
                    events.append(
                        _sse(
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "text_delta", "text": piece},
                            },
                            "content_block_delta",
                        )
                    )
            else:
                events.append(
                    _sse(
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {**block, "input": {}},
                        },
                        "content_block_start",
                    )
                )
                for piece in _pieces(json.dumps(block["input"])):
                    events.append(
                        _sse(
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": piece},
                            },
                            "content_block_delta",
                        )
                    )
            events.append(
                _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            )
        delta_usage = {"output_tokens": usage["output_tokens"]} if "output_tokens" in usage else {}
        events.append(
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": delta_usage,
                },
                "message_delta",
            )
        )
        events.append(_sse({"type": "message_stop"}, "message_stop"))
        return Rendered(200, (("content-type", "text/event-stream"),), events=tuple(events))


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
        model = _requested_model(turn, request)
        finish = turn.stop_reason or ("tool_calls" if turn.tool_calls else "stop")
        usage: dict[str, Any] | None = None
        if turn.input_tokens is not None and turn.output_tokens is not None:
            usage = {
                "prompt_tokens": turn.input_tokens,
                "completion_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
            }
            if turn.cached_tokens is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": turn.cached_tokens}
        calls: list[dict[str, Any]] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
            }
            for c in turn.tool_calls
        ]
        ident = f"chatcmpl-scripted-{number}"
        if not _wants_stream(request):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
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
            return Rendered(200, (("content-type", "application/json"),), json.dumps(body).encode())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            return _sse(
                {
                    "id": ident,
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                }
            )

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in _pieces(turn.text)]
        for index, call in enumerate(calls):
            function = call["function"]
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": function["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for piece in _pieces(function["arguments"]):
                events.append(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                )
        events.append(chunk({}, finish))
        options = request.get("stream_options") if isinstance(request, dict) else None
        if usage is not None and isinstance(options, dict) and options.get("include_usage"):
            events.append(
                _sse(
                    {
                        "id": ident,
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            )
        events.append(_sse("[DONE]"))
        return Rendered(200, (("content-type", "text/event-stream"),), events=tuple(events))


DEFAULT_FORMATS: Mapping[str, WireFormat] = MappingProxyType(
    {"/v1/messages": AnthropicMessages(), "/v1/chat/completions": OpenAIChat()}
)


@dataclass
class _Script:
    turns: deque[ScriptedTurn | ScriptedResponder] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ModelServer(LoopbackServer):
    """A loopback HTTP server playing a queue of scripted turns.

    Use as a context manager. `url` is the base (`http://127.0.0.1:<port>`); OpenAI-style
    clients want `url + "/v1"`, Anthropic-style clients want `url`. With `api_key` set, a request
    that does not carry that key gets the format's own 401, so tests can prove the key was sent
    without the server ever recording it.
    """

    def __init__(
        self,
        turns: Iterable[ScriptedTurn | ScriptedResponder] = (),
        *,
        api_key: str | None = None,
        formats: Mapping[str, WireFormat] = DEFAULT_FORMATS,
        port: int = 0,
    ) -> None:
        super().__init__(port)
        self._script = _Script(turns=deque(turns))
        self._api_key = api_key
        self._formats = dict(formats)

    # -- lifecycle -----------------------------------------------------------------------------

    thread_name = "model-server"
    what = "the model server"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    # -- script --------------------------------------------------------------------------------

    def enqueue(self, *turns: ScriptedTurn | ScriptedResponder) -> None:
        with self._script.lock:
            self._script.turns.extend(turns)

    def enqueue_first(self, *turns: ScriptedTurn | ScriptedResponder) -> None:
        """Play these turns before anything already queued (e.g. before a standing responder)."""
        with self._script.lock:
            self._script.turns.extendleft(reversed(turns))

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._script.lock:
            return list(self._script.requests)

    @property
    def remaining(self) -> int:
        with self._script.lock:
            return len(self._script.turns)

    # -- used by the handler -------------------------------------------------------------------

    def _take(
        self, path: str, headers: Mapping[str, str], body: Any, wire: WireFormat
    ) -> tuple[ScriptedTurn | None, int]:
        recorded = {k: (REDACTED if k in SECRET_HEADERS else v) for k, v in headers.items()}
        with self._script.lock:
            self._script.requests.append(RecordedRequest(path, recorded, body, wire.name))
            self._script.served += 1
            number = self._script.served
            if self._api_key is not None and wire.api_key(headers) != self._api_key:
                return wire.error(
                    401, "the API key sent is not the one this server expects"
                ), number
            turn = self._script.turns[0] if self._script.turns else None
            if not isinstance(turn, ScriptedResponder) or turn.once:
                turn = self._script.turns.popleft() if self._script.turns else None
        if isinstance(turn, ScriptedResponder):
            return turn.respond(body), number
        return turn, number


def _make_handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            return  # a library never prints; tests read `server.requests` instead

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/")
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            wire = server._formats.get(path)
            if wire is None:
                self._send_whole(
                    404,
                    (("content-type", "application/json"),),
                    json.dumps({"error": {"message": f"no API at {path}"}}).encode(),
                )
                return
            turn, number = server._take(path, headers, body, wire)
            if turn is None:
                turn = wire.error(500, f"the model server script is exhausted (request {number})")
            if body is None and isinstance(turn, ScriptedCompletion):
                turn = wire.error(400, "the request body is not JSON")
            self._play(turn, wire, body, number)

        def _play(self, turn: ScriptedTurn, wire: WireFormat, body: Any, number: int) -> None:
            if isinstance(turn, ScriptedFailure):
                headers = (("content-type", turn.content_type), *turn.headers)
                self._send_whole(turn.status, headers, turn.body)
            elif isinstance(turn, ScriptedHang):
                server._closing.wait(turn.max_s)
                self._reset()
            elif isinstance(turn, ScriptedDisconnect):
                self._reset()
            else:
                rendered = wire.render(turn, body, number)
                if rendered.events is None:
                    self._send_whole(rendered.status, rendered.headers, rendered.body)
                else:
                    self._send_stream(rendered, turn.cut_after_events)

        def _send_whole(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _send_stream(self, rendered: Rendered, cut_after: int | None) -> None:
            self.send_response(rendered.status)
            for name, value in rendered.headers:
                self.send_header(name, value)
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for index, event in enumerate(rendered.events or ()):
                if cut_after is not None and index >= cut_after:
                    self.wfile.flush()
                    self._reset()
                    return
                self.wfile.write(event)
                self.wfile.flush()

        def _reset(self) -> None:
            # SO_LINGER 0 makes close() send RST: the client sees a reset, not a clean EOF.
            try:
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
            except OSError:
                pass
            self.close_connection = True

        def finish(self) -> None:
            # The scripted turn may have closed the socket on purpose.
            with contextlib.suppress(OSError, ValueError):
                super().finish()

    return Handler


def approve_everything(_body: Any) -> ScriptedCompletion:
    """A reviewer that approves whatever it is shown (for trying the pipeline, not judging)."""
    verdict = {
        "approved": True,
        "reasons": ["scripted reviewer: approves every change"],
        "permanent": False,
    }
    return ScriptedCompletion(text=json.dumps(verdict))


def main(argv: list[str] | None = None) -> int:
    """Serve a reviewer that approves everything on loopback until interrupted (see --help).
    The demo's reviewer is `python -m agent_harness.demo.rules`."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m agent_harness.testing.model_server",
        description="A scripted model server on 127.0.0.1 speaking OpenAI and Anthropic wire "
        "formats. Point a route at it, e.g. OPENAI_BASE_URL=http://127.0.0.1:PORT/v1.",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    args = parser.parse_args(argv)
    serve(ScriptedResponder(approve_everything), args.port)
    return 0


def serve(responder: ScriptedResponder, port: int = 0) -> None:
    """Serve `responder` on loopback until Ctrl-C, printing where (for the command lines that
    run a scripted reviewer beside a real run: this module's and the demo's)."""
    import time

    with ModelServer([responder], port=port) as server:
        print(f"scripted model server at {server.url} (OpenAI: {server.url}/v1)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return


if __name__ == "__main__":
    raise SystemExit(main())
