"""What a scripted model server can be told to do for one request: answer, fail, hang or drop.

A turn is plain data, independent of any vendor's wire format; the vendor-specific failures are
built here from each vendor's documented error bodies and headers, so a test names the failure
it means ("Anthropic's spend cap") instead of spelling out the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


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
    cache_write_tokens: int | None = None  # Anthropic's cache_creation_input_tokens
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

    # -- Gemini (https://ai.google.dev/gemini-api/docs/troubleshooting) ----------------------

    @classmethod
    def gemini(
        cls,
        status: int,
        message: str,
        rpc_status: str,
        details: Iterable[Mapping[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> ScriptedFailure:
        """Google's error envelope: the HTTP code, a google.rpc status name, and details."""
        error: dict[str, Any] = {"code": status, "message": message, "status": rpc_status}
        if details:
            error["details"] = [dict(d) for d in details]
        return cls.raw(status, {"error": error}, headers)

    @classmethod
    def gemini_rate_limit(cls, retry_after: float = 3600) -> ScriptedFailure:
        return cls.gemini(
            429,
            "Resource has been exhausted (e.g. check quota).",
            "RESOURCE_EXHAUSTED",
            headers={"retry-after": _num(retry_after)},
        )

    @classmethod
    def gemini_bad_key(cls) -> ScriptedFailure:
        return cls.gemini(401, "API key not valid. Please pass a valid API key.", "UNAUTHENTICATED")

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


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
