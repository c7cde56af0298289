"""Classify what a model provider said into the one reaction it calls for.

A 429 is not one thing: a burst limit clears in seconds, a spent window in hours, a spent cap
never by waiting. Each vendor says which in its own fields (error codes, quota ids, reset
headers), so there is one small classifier per vendor reading exactly those fields, all
returning the same `Failure` value. `classify_agent_output` does the same for CLI agents' text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class FailureKind(StrEnum):
    """What went wrong, named by what the caller should do about it."""

    BURST = "burst"  # short rate limit: wait seconds, retry this worker only
    WINDOW = "window"  # a rolling budget is spent: park the endpoint until its reset
    CAP = "cap"  # spend / credit / billing cap: never retry, a human must act
    OVERLOAD = "overload"  # the provider is busy for everyone: back off and retry
    SERVER = "server"  # 5xx, broken proxy page, dropped connection, timeout: retry a few times
    REFUSAL = "refusal"  # content policy: never resend the same input
    AUTH = "auth"  # bad or missing key, no permission: never retry
    CONTEXT_TOO_LONG = "context_too_long"  # the input must shrink; waiting never helps
    BAD_REQUEST = "bad_request"  # our request is wrong; retrying sends the same mistake


RETRYABLE_KINDS = frozenset({FailureKind.BURST, FailureKind.OVERLOAD, FailureKind.SERVER})


@dataclass(frozen=True)
class Failure:
    """One classified provider failure.

    `retryable` is true only for burst, overload and server failures: the same request may
    succeed after a jittered wait of at least `retry_after` seconds. A `window` is not retried
    in-process: the endpoint is parked until `reset_at` (epoch seconds). Every other kind is
    final for this input.
    """

    kind: FailureKind
    vendor: str
    status: int | None
    message: str
    reset_at: float | None = None
    retry_after: float | None = None
    raw_code: str | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def describe(self) -> str:
        """One line for a user: kind, vendor, status and the provider's own words."""
        status = f" {self.status}" if self.status is not None else ""
        code = f" ({self.raw_code})" if self.raw_code else ""
        return f"{self.kind.value} from {self.vendor}{status}{code}: {self.message}"


Headers = Mapping[str, str]
Body = bytes | str
Classifier = Callable[[int, Headers, Body, float], "Failure | None"]

# ---------------------------------------------------------------------------------------------
# Shared parsing helpers


def lower_headers(headers: Headers | Iterable[tuple[str, str]]) -> dict[str, str]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {str(k).lower(): str(v) for k, v in items}


def body_text(body: Body) -> str:
    return body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body


def json_documents(body: Body) -> list[Any]:
    """The JSON value of a body, or every JSON `data:` payload of an SSE stream."""
    text = body_text(body).strip()
    if not text:
        return []
    try:
        return [json.loads(text)]
    except ValueError:
        pass
    docs: list[Any] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            docs.append(json.loads(payload))
        except ValueError:
            continue
    return docs


def _first_error(docs: list[Any]) -> dict[str, Any] | None:
    """The first `error` object found, accepting Google's list-wrapped bodies."""
    for doc in docs:
        for item in doc if isinstance(doc, list) else [doc]:
            if isinstance(item, dict):
                err = item.get("error")
                if isinstance(err, dict):
                    return err
                if isinstance(err, str):
                    return {"message": err}
    return None


_TAG = re.compile(r"<[^>]+>")


def snippet(body: Body, limit: int = 160) -> str:
    """A short, single-line, tag-free excerpt: enough to recognise a proxy's HTML page."""
    text = body_text(body)
    if "<" in text and ">" in text:
        title = re.search(r"<title>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        text = title.group(1) if title else _TAG.sub(" ", text)
    text = " ".join(text.split())
    return text[:limit] + ("…" if len(text) > limit else "")


def parse_retry_after(headers: Headers, now: float) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    h = lower_headers(headers)
    ms = h.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = h.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


_GO_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_GO_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")


def parse_go_duration(text: str) -> float | None:
    """Seconds in a Go duration such as `6m0s`, `1.5s`, `20ms` or `1h2m3s`; None if not one."""
    text = text.strip()
    if not text:
        return None
    pos, total = 0, 0.0
    for match in _GO_PART.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _GO_UNIT[match.group(2)]
        pos = match.end()
    if pos != len(text):
        # A bare number is what some OpenAI-compatible servers send: read it as seconds.
        try:
            return float(text) if pos == 0 else None
        except ValueError:
            return None
    return total


def parse_rfc3339(text: str) -> float | None:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _epoch(value: Any) -> float | None:
    """Epoch seconds from an int/float/str, accepting milliseconds by magnitude."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number / 1000.0 if number > 1e11 else number


_CONTEXT_TEXT = re.compile(
    r"prompt is too long|context length|context window|maximum context|too many tokens|"
    r"input token count|exceeds the maximum number of tokens|reduce the length",
    re.IGNORECASE,
)


def _status_fallback(
    vendor: str, status: int, message: str, retry_after: float | None, raw_code: str | None = None
) -> Failure | None:
    """What the HTTP status alone says; the generic classifier is this plus a few texts."""

    def make(kind: FailureKind) -> Failure:
        return Failure(kind, vendor, status, message, retry_after=retry_after, raw_code=raw_code)

    if 200 <= status < 300:
        return None
    if status == 429:
        return make(FailureKind.BURST)
    if status == 402:
        return make(FailureKind.CAP)
    if status in (401, 403, 407):
        return make(FailureKind.AUTH)
    if status in (503, 529):
        return make(FailureKind.OVERLOAD)
    if status == 408 or status >= 500:
        return make(FailureKind.SERVER)
    if _CONTEXT_TEXT.search(message):
        return make(FailureKind.CONTEXT_TOO_LONG)
    return make(FailureKind.BAD_REQUEST)


def _message(err: dict[str, Any] | None, body: Body, status: int) -> str:
    if err and isinstance(err.get("message"), str) and err["message"].strip():
        return " ".join(str(err["message"]).split())
    text = snippet(body)
    return text or f"HTTP {status} with an empty body"


# ---------------------------------------------------------------------------------------------
# Anthropic


_UNIFIED_WINDOW = re.compile(r"^anthropic-ratelimit-unified-(?P<window>[a-z0-9_]+)-status$")


def _anthropic_unified_window(h: dict[str, str]) -> tuple[float | None, str] | None:
    """(latest reset, names) when a subscription window is rejected, else None."""
    rejected: list[str] = []
    resets: list[float] = []
    for name, value in h.items():
        match = _UNIFIED_WINDOW.match(name)
        if match and value.strip().lower() == "rejected":
            window = match.group("window")
            rejected.append(window)
            reset = _epoch(h.get(f"anthropic-ratelimit-unified-{window}-reset"))
            if reset is not None:
                resets.append(reset)
    overall = h.get("anthropic-ratelimit-unified-status", "").strip().lower() == "rejected"
    if not rejected and not overall:
        return None
    overall_reset = _epoch(h.get("anthropic-ratelimit-unified-reset"))
    if overall_reset is not None:
        resets.append(overall_reset)
    # The windows are AND-composed: the account is usable only once every rejected one reopens.
    return (max(resets) if resets else None, ",".join(sorted(rejected)) or "unified")


def classify_anthropic(status: int, headers: Headers, body: Body, now: float) -> Failure | None:
    """Anthropic Messages API: error.type, spend-limit codes, unified subscription headers."""
    h = lower_headers(headers)
    docs = json_documents(body)
    err = _first_error(docs)
    etype = str(err.get("type", "")) if err else ""
    details = err.get("details") if err else None
    detail_code = str(details.get("error_code", "")) if isinstance(details, dict) else ""
    message = _message(err, body, status)
    retry_after = parse_retry_after(h, now)
    vendor = "anthropic"
    lowered = message.lower()

    if 200 <= status < 300 and err is None:
        for doc in docs:
            stop = doc.get("stop_reason") if isinstance(doc, dict) else None
            delta = doc.get("delta") if isinstance(doc, dict) else None
            if stop is None and isinstance(delta, dict):
                stop = delta.get("stop_reason")
            if stop == "refusal":
                return Failure(
                    FailureKind.REFUSAL,
                    vendor,
                    status,
                    "the model declined (stop_reason refusal)",
                    raw_code="refusal",
                )
        return None
    if err is not None and 200 <= status < 300:
        status_for_type = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}
        status = status_for_type.get(etype, 500)

    cap_code = detail_code or (
        "enforced_spend_limit_reached" if "enforced_spend_limit_reached" in lowered else ""
    )
    if (
        cap_code == "enforced_spend_limit_reached"
        or "credit balance is too low" in lowered
        or "reached your specified" in lowered
        or status == 402
        or etype == "billing_error"
    ):
        return Failure(FailureKind.CAP, vendor, status, message, raw_code=cap_code or etype or None)
    if status == 429:
        window = _anthropic_unified_window(h)
        if window is not None:
            reset_at, names = window
            if reset_at is None and retry_after is not None:
                reset_at = now + retry_after
            return Failure(
                FailureKind.WINDOW,
                vendor,
                status,
                message,
                reset_at=reset_at,
                retry_after=retry_after,
                raw_code=f"unified:{names}",
            )
        reset_at = _anthropic_bucket_reset(h)
        return Failure(
            FailureKind.BURST,
            vendor,
            status,
            message,
            reset_at=reset_at,
            retry_after=retry_after,
            raw_code=etype or None,
        )
    if status == 529 or etype == "overloaded_error":
        return Failure(
            FailureKind.OVERLOAD,
            vendor,
            status,
            message,
            retry_after=retry_after,
            raw_code=etype or None,
        )
    if "prompt is too long" in lowered:
        return Failure(
            FailureKind.CONTEXT_TOO_LONG, vendor, status, message, raw_code=etype or None
        )
    if etype in ("authentication_error", "permission_error"):
        return Failure(FailureKind.AUTH, vendor, status, message, raw_code=etype)
    if etype == "request_too_large":
        return Failure(FailureKind.BAD_REQUEST, vendor, status, message, raw_code=etype)
    return _status_fallback(vendor, status, message, retry_after, etype or None)


def _anthropic_bucket_reset(h: dict[str, str]) -> float | None:
    """Latest RFC 3339 reset among the per-minute buckets that are exhausted."""
    resets: list[float] = []
    for bucket in ("requests", "tokens", "input-tokens", "output-tokens"):
        remaining = h.get(f"anthropic-ratelimit-{bucket}-remaining")
        reset = h.get(f"anthropic-ratelimit-{bucket}-reset")
        if reset and remaining is not None and remaining.strip() == "0":
            when = parse_rfc3339(reset)
            if when is not None:
                resets.append(when)
    return max(resets) if resets else None


# ---------------------------------------------------------------------------------------------
# OpenAI (and the OpenAI-compatible error shape)


def _openai_reset_wait(h: dict[str, str]) -> float | None:
    waits = [
        wait
        for name in ("x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
        if name in h and (wait := parse_go_duration(h[name])) is not None
    ]
    return max(waits) if waits else None


def classify_openai(status: int, headers: Headers, body: Body, now: float) -> Failure | None:
    """OpenAI Chat Completions: error.code / error.type, Go-duration reset headers."""
    return _classify_openai_shaped("openai", status, headers, body, now)


def _classify_openai_shaped(
    vendor: str, status: int, headers: Headers, body: Body, now: float
) -> Failure | None:
    h = lower_headers(headers)
    docs = json_documents(body)
    err = _first_error(docs)
    code = str((err or {}).get("code") or "")
    etype = str((err or {}).get("type") or "")
    message = _message(err, body, status)
    lowered = message.lower()
    raw = code or etype or None
    retry_after = parse_retry_after(h, now)

    if 200 <= status < 300 and err is None:
        for doc in docs:
            choices = doc.get("choices") if isinstance(doc, dict) else None
            for choice in choices if isinstance(choices, list) else []:
                if isinstance(choice, dict) and choice.get("finish_reason") == "content_filter":
                    return Failure(
                        FailureKind.REFUSAL,
                        vendor,
                        status,
                        "the response was withheld (finish_reason content_filter)",
                        raw_code="content_filter",
                    )
        return None
    if err is not None and 200 <= status < 300:
        status = 500
    if (
        code == "insufficient_quota"
        or etype == "insufficient_quota"
        or code == "credit_balance_exhausted"
        or code.endswith("_spend_limit_exceeded")
    ):
        return Failure(FailureKind.CAP, vendor, status, message, raw_code=raw)
    if code == "context_length_exceeded" or "maximum context length" in lowered:
        return Failure(FailureKind.CONTEXT_TOO_LONG, vendor, status, message, raw_code=raw)
    if status == 429 and "request too large" in lowered:
        # One request bigger than the whole per-minute token budget: no wait can admit it, only
        # a smaller input (or a model with a bigger budget) can, exactly like a context overflow.
        return Failure(FailureKind.CONTEXT_TOO_LONG, vendor, status, message, raw_code=raw)
    if code in ("content_filter", "invalid_prompt", "content_policy_violation"):
        return Failure(FailureKind.REFUSAL, vendor, status, message, raw_code=raw)
    if status == 429:
        wait = retry_after if retry_after is not None else _openai_reset_wait(h)
        reset_at = now + wait if wait is not None else None
        return Failure(
            FailureKind.BURST,
            vendor,
            status,
            message,
            reset_at=reset_at,
            retry_after=wait,
            raw_code=raw,
        )
    if code == "server_is_overloaded" or "overloaded" in lowered:
        return Failure(
            FailureKind.OVERLOAD, vendor, status, message, retry_after=retry_after, raw_code=raw
        )
    return _status_fallback(vendor, status, message, retry_after, raw)


# ---------------------------------------------------------------------------------------------
# Gemini (generativelanguage.googleapis.com)

_GEMINI_DAY_RESET_TZ = "America/Los_Angeles"


def _gemini_details(err: dict[str, Any]) -> tuple[list[str], float | None]:
    quota_ids: list[str] = []
    delay: float | None = None
    details = err.get("details")
    for item in details if isinstance(details, list) else []:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("@type", ""))
        if kind.endswith("google.rpc.QuotaFailure"):
            for violation in item.get("violations") or []:
                if isinstance(violation, dict):
                    quota_ids.append(
                        str(violation.get("quotaId") or violation.get("quotaMetric") or "")
                    )
        elif kind.endswith("google.rpc.RetryInfo"):
            delay = parse_go_duration(str(item.get("retryDelay", "")))
    return quota_ids, delay


def next_midnight(now: float, tz_name: str) -> float:
    tz = ZoneInfo(tz_name)
    local = datetime.fromtimestamp(now, tz)
    midnight = datetime(local.year, local.month, local.day, tzinfo=tz) + timedelta(days=1)
    return midnight.timestamp()


def classify_gemini(status: int, headers: Headers, body: Body, now: float) -> Failure | None:
    """Gemini API: google.rpc status names plus QuotaFailure / RetryInfo details."""
    h = lower_headers(headers)
    docs = json_documents(body)
    err = _first_error(docs)
    rpc = str((err or {}).get("status") or "")
    message = _message(err, body, status)
    retry_after = parse_retry_after(h, now)
    vendor = "gemini"

    if 200 <= status < 300 and err is None:
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            feedback = doc.get("promptFeedback")
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                reason = str(feedback["blockReason"])
                return Failure(
                    FailureKind.REFUSAL,
                    vendor,
                    status,
                    f"the prompt was blocked (blockReason {reason})",
                    raw_code=reason,
                )
            for cand in doc.get("candidates") or []:
                finish = cand.get("finishReason") if isinstance(cand, dict) else None
                if finish in ("SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"):
                    return Failure(
                        FailureKind.REFUSAL,
                        vendor,
                        status,
                        f"the answer was blocked (finishReason {finish})",
                        raw_code=str(finish),
                    )
        return None
    if err is not None and 200 <= status < 300:
        status = int(err.get("code") or 500) if str(err.get("code", "")).isdigit() else 500
    if status == 429 or rpc == "RESOURCE_EXHAUSTED":
        quota_ids, delay = _gemini_details(err or {})
        daily = [q for q in quota_ids if "perday" in q.lower().replace("_", "")]
        if daily:
            # A spent daily quota (free tier or paid) returns at midnight Pacific; the short
            # RetryInfo delay it carries would only buy another 429.
            return Failure(
                FailureKind.WINDOW,
                vendor,
                status,
                message,
                reset_at=next_midnight(now, _GEMINI_DAY_RESET_TZ),
                retry_after=delay,
                raw_code=daily[0],
            )
        wait = delay if delay is not None else retry_after
        return Failure(
            FailureKind.BURST,
            vendor,
            status,
            message,
            reset_at=now + wait if wait is not None else None,
            retry_after=wait,
            raw_code=(quota_ids[0] if quota_ids else rpc) or None,
        )
    if rpc in ("PERMISSION_DENIED", "UNAUTHENTICATED") or _gemini_key_invalid(err):
        return Failure(FailureKind.AUTH, vendor, status, message, raw_code=rpc or None)
    if rpc == "FAILED_PRECONDITION":
        # "Free tier not available in your country; enable billing": an account matter.
        return Failure(FailureKind.AUTH, vendor, status, message, raw_code=rpc)
    if status == 503 or rpc == "UNAVAILABLE":
        return Failure(
            FailureKind.OVERLOAD,
            vendor,
            status,
            message,
            retry_after=retry_after,
            raw_code=rpc or None,
        )
    return _status_fallback(vendor, status, message, retry_after, rpc or None)


def _gemini_key_invalid(err: dict[str, Any] | None) -> bool:
    for item in (err or {}).get("details") or []:
        if isinstance(item, dict) and item.get("reason") == "API_KEY_INVALID":
            return True
    return False


# ---------------------------------------------------------------------------------------------
# OpenRouter


def classify_openrouter(status: int, headers: Headers, body: Body, now: float) -> Failure | None:
    """OpenRouter: numeric error.code, moderation metadata, errors inside 200 bodies/streams."""
    h = lower_headers(headers)
    docs = json_documents(body)
    err = _first_error(docs)
    message = _message(err, body, status)
    retry_after = parse_retry_after(h, now)
    vendor = "openrouter"
    if err is None:
        return _classify_openai_shaped(vendor, status, h, body, now)
    code = err.get("code")
    effective = int(str(code)) if str(code).isdigit() else status
    if 200 <= effective < 300:
        effective = 500
    raw_metadata = err.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    if effective == 403 and ("reasons" in metadata or "flagged_input" in metadata):
        reasons = metadata.get("reasons")
        why = ", ".join(map(str, reasons)) if isinstance(reasons, list) else message
        return Failure(
            FailureKind.REFUSAL, vendor, effective, f"input flagged: {why}", raw_code="moderation"
        )
    if isinstance(code, str) and not code.isdigit():
        shaped = _classify_openai_shaped(vendor, effective, h, body, now)
        if shaped is not None:
            return shaped
    return _status_fallback(
        vendor, effective, message, retry_after, str(code) if code is not None else None
    )


# ---------------------------------------------------------------------------------------------
# Generic OpenAI-compatible servers


def classify_generic(status: int, headers: Headers, body: Body, now: float) -> Failure | None:
    """Best effort for any OpenAI-compatible server (vLLM, LiteLLM, Ollama, proxies).

    It reads the status code, `retry-after`, and the OpenAI error codes such servers often copy
    (`insufficient_quota`, `context_length_exceeded`). It cannot tell a burst 429 from a spent
    window or a spent cap worded in prose, a policy refusal from any other 400, or an overloaded
    server from one that is down: all three guesses lean towards retrying a bounded number of
    times, which is safe for bursts and cheap for the rest.
    """
    return _classify_openai_shaped("generic", status, headers, body, now)


CLASSIFIERS: Mapping[str, Classifier] = MappingProxyType(
    {
        "anthropic": classify_anthropic,
        "openai": classify_openai,
        "gemini": classify_gemini,
        "openrouter": classify_openrouter,
        "generic": classify_generic,
    }
)


def classifier_for(name: str) -> Classifier:
    """The classifier for a vendor name; unknown vendors get the generic one."""
    return CLASSIFIERS.get(name.lower(), classify_generic)


def classify_response(
    vendor: str, status: int, headers: Headers, body: Body, *, now: float
) -> Failure | None:
    """Classify one HTTP response; None means it is a usable success."""
    return classifier_for(vendor)(status, headers, body, now)


# ---------------------------------------------------------------------------------------------
# CLI agents' output


_CLAUDE_PIPE_RESET = re.compile(r"Claude AI usage limit reached\|(\d{9,13})")
_RESETS_AT = re.compile(
    r"(?P<lead>(?:hit your|usage limit|limit reached|limit will reset|out of)[^\n]*?)"
    r"resets?(?: at)?\s+(?P<when>[A-Za-z]{3,9}\s+\d{1,2},\s*)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm)"
    r"(?:\s*\((?P<tz>[A-Za-z_/+\-0-9]+)\))?",
    re.IGNORECASE,
)
_SPEND_CAP_TEXT = re.compile(
    r"spend limit|credit balance is too low|insufficient credits",
    re.IGNORECASE,
)
_CONVERSATION_TYPES = frozenset({"assistant", "user", "stream_event", "item.completed"})
_LIMIT_NO_RESET = re.compile(
    r"hit your (?:\w+ )?limit|usage limit (?:has been )?reached", re.IGNORECASE
)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}


def _zone(name: str | None) -> ZoneInfo:
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return ZoneInfo("UTC")


def next_wall_clock(
    now: float,
    hour: int,
    minute: int,
    tz_name: str | None,
    month_day: tuple[int, int] | None = None,
) -> float:
    """The first moment after `now` when the clock in `tz_name` shows hour:minute."""
    tz = _zone(tz_name)
    local = datetime.fromtimestamp(now, tz)
    if month_day is not None:
        month, day = month_day
        for year in (local.year, local.year + 1):
            try:
                candidate = datetime(year, month, day, hour, minute, tzinfo=tz)
            except ValueError:
                continue
            if candidate.timestamp() > now:
                return candidate.timestamp()
    candidate = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate.timestamp() <= now:
        candidate = candidate + timedelta(days=1)
    # Rebuild from fields so a DST change between today and tomorrow keeps the wall-clock time.
    return datetime(
        candidate.year, candidate.month, candidate.day, hour, minute, tzinfo=tz
    ).timestamp()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dicts(item)


def _lines(text_or_lines: str | Iterable[str]) -> list[str]:
    if isinstance(text_or_lines, str):
        return text_or_lines.splitlines()
    return [line for chunk in text_or_lines for line in str(chunk).splitlines()]


def _claude_rate_limit_event(doc: Any, agent: str) -> Failure | None:
    if not isinstance(doc, dict) or doc.get("type") != "rate_limit_event":
        return None
    for info in _dicts(doc):
        status = info.get("status")
        if not isinstance(status, str):
            continue
        if status.lower() != "rejected":
            return None  # allowed / allowed_warning: the request was served
        reset = _epoch(info.get("resetsAt") or info.get("resets_at") or info.get("reset"))
        limit_type = str(info.get("rateLimitType") or info.get("rate_limit_type") or "")
        return Failure(
            FailureKind.WINDOW,
            agent,
            None,
            f"usage window rejected ({limit_type or 'unknown window'})",
            reset_at=reset,
            raw_code=limit_type or "rate_limit_event",
        )
    return None


def _codex_usage_limit(doc: Any, agent: str, now: float) -> Failure | None:
    for item in _dicts(doc):
        code = item.get("type") if item.get("type") != "error" else item.get("code")
        code = code or item.get("code")
        if code not in ("usage_limit_reached", "usage_not_included"):
            continue
        message = str(item.get("message") or code)
        if code == "usage_not_included":
            return Failure(FailureKind.CAP, agent, None, message, raw_code=code)
        reset = _epoch(item.get("resets_at"))
        seconds = item.get("resets_in_seconds")
        if reset is None and isinstance(seconds, int | float):
            reset = now + float(seconds)
        return Failure(
            FailureKind.WINDOW,
            agent,
            None,
            message,
            reset_at=reset,
            retry_after=(reset - now) if reset is not None else None,
            raw_code=code,
        )
    return None


def _text_failure(line: str, agent: str, now: float) -> Failure | None:
    pipe = _CLAUDE_PIPE_RESET.search(line)
    if pipe:
        return Failure(
            FailureKind.WINDOW,
            agent,
            None,
            "Claude usage limit reached",
            reset_at=_epoch(pipe.group(1)),
            raw_code="usage_limit",
        )
    if _SPEND_CAP_TEXT.search(line):
        return Failure(
            FailureKind.CAP, agent, None, " ".join(line.split())[:200], raw_code="spend_cap"
        )
    match = _RESETS_AT.search(line)
    if match:
        hour = int(match.group("hour")) % 12 + (12 if match.group("ampm").lower() == "pm" else 0)
        minute = int(match.group("minute") or 0)
        month_day = None
        if match.group("when"):
            month_name, day = match.group("when").replace(",", " ").split()[:2]
            month = _MONTHS.get(month_name[:3].lower())
            month_day = (month, int(day)) if month else None
        reset = next_wall_clock(now, hour, minute, match.group("tz"), month_day)
        return Failure(
            FailureKind.WINDOW,
            agent,
            None,
            " ".join(line.split())[:200],
            reset_at=reset,
            retry_after=reset - now,
            raw_code="usage_limit",
        )
    lowered = line.lower()
    if _LIMIT_NO_RESET.search(line):
        return Failure(
            FailureKind.WINDOW, agent, None, " ".join(line.split())[:200], raw_code="usage_limit"
        )
    if "prompt is too long" in lowered or "exceeds the context window" in lowered:
        return Failure(FailureKind.CONTEXT_TOO_LONG, agent, None, line.strip()[:200])
    if "api error: 529" in lowered or "overloaded_error" in lowered:
        return Failure(FailureKind.OVERLOAD, agent, None, line.strip()[:200])
    if "invalid api key" in lowered or "authentication_error" in lowered:
        return Failure(FailureKind.AUTH, agent, None, line.strip()[:200])
    if "api error: 429" in lowered:
        return Failure(FailureKind.BURST, agent, None, line.strip()[:200])
    return None


def classify_agent_output(
    agent: str, text_or_lines: str | Iterable[str], *, now: float
) -> Failure | None:
    """Find the limit or failure a CLI agent reported in its output, if any.

    Structured events win over prose: Claude Code's `rate_limit_event` (stream-json) and Codex's
    `usage_limit_reached` error carry exact reset epochs. Otherwise the known sentences are read
    ("Claude AI usage limit reached|<epoch>", "You've hit your session limit · resets 8:37am
    (UTC)"), with wall-clock times resolved to the next such moment after `now`.
    """
    name = agent.lower()
    structured: Failure | None = None
    textual: Failure | None = None
    for line in _lines(text_or_lines):
        stripped = line.strip()
        if not stripped:
            continue
        doc: Any = None
        if stripped.startswith(("{", "[")):
            try:
                doc = json.loads(stripped)
            except ValueError:
                doc = None
        if doc is not None:
            found = _claude_rate_limit_event(doc, name) or _codex_usage_limit(doc, name, now)
            if found is not None:
                structured = structured or found
                continue
            # What the model itself wrote (or read from files) is not the agent's status: a
            # transcript discussing rate limits must not be mistaken for hitting one.
            conversational = isinstance(doc, dict) and doc.get("type") in _CONVERSATION_TYPES
            texts = [] if conversational else list(_strings(doc))
        else:
            texts = [stripped]
        for text in texts:
            found = _text_failure(text, name, now)
            if found is not None and textual is None:
                textual = found
    if structured is not None:
        if structured.reset_at is None and textual is not None:
            return textual
        return structured
    return textual
