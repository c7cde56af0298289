"""Classify what a model provider answered into the one reaction it calls for.

A 429 is not one thing: a burst limit clears in seconds, a spent window in hours, a spent cap
never by waiting. Each vendor says which in its own fields (error codes, quota ids, reset
headers), so there is one small classifier per vendor reading exactly those fields, and all
of them return the same `Failure` value; an unknown vendor gets the generic reading.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from agent_harness.models.bodies import error_message, first_error, json_documents, lower_headers
from agent_harness.models.failures import Body, Classifier, Failure, FailureKind, Headers
from agent_harness.models.limits import (
    epoch_seconds,
    next_midnight,
    parse_go_duration,
    parse_retry_after,
    parse_rfc3339,
)

_CONTEXT_TEXT = re.compile(
    r"prompt is too long|context length|context window|maximum context|too many tokens|"
    r"input token count|exceeds the maximum number of tokens|reduce the length",
    re.IGNORECASE,
)


# Spent money or credit in words, whoever says it: Anthropic, Claude Code, OpenRouter, DeepSeek,
# a LiteLLM proxy's budgets (`budget_exceeded`, with a 400 or a 429) and Bedrock's service quotas.
# Only in the forms the providers write them: "Insufficient Balance" as DeepSeek's message (in
# its JSON, or after its 402), LiteLLM's `budget_exceeded` as its JSON names the type, so an
# agent's own words about a budget check it wrote are not read as one.
SPEND_CAP_TEXT = re.compile(
    r"spend limit|credit balance (?:is )?too low|insufficient credits|"
    r"(?:\"|\b402\s+)insufficient balance|requires more credits|budget has been exceeded|"
    r"exceeded budget for|\"budget_exceeded\"|ServiceQuotaExceeded",
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
            reset = epoch_seconds(h.get(f"anthropic-ratelimit-unified-{window}-reset"))
            if reset is not None:
                resets.append(reset)
    overall = h.get("anthropic-ratelimit-unified-status", "").strip().lower() == "rejected"
    if not rejected and not overall:
        return None
    overall_reset = epoch_seconds(h.get("anthropic-ratelimit-unified-reset"))
    if overall_reset is not None:
        resets.append(overall_reset)
    # The windows are AND-composed: the account is usable only once every rejected one reopens.
    return (max(resets) if resets else None, ",".join(sorted(rejected)) or "unified")


def classify_anthropic(status: int, headers: Headers, body: Body, now: float) -> Failure | None:
    """Anthropic Messages API: error.type, spend-limit codes, unified subscription headers."""
    h = lower_headers(headers)
    docs = json_documents(body)
    err = first_error(docs)
    if 200 <= status < 300 and err is None:
        return _anthropic_refusal(docs, status)
    etype = str(err.get("type", "")) if err else ""
    message = error_message(err, body, status)
    retry_after = parse_retry_after(h, now)
    vendor = "anthropic"
    if err is not None and 200 <= status < 300:
        # An error event inside a successful stream: its type says what status it stands for.
        status = _ANTHROPIC_STATUS_FOR_TYPE.get(etype, 500)
    cap = _anthropic_spend_cap(err, etype, status, message)
    if cap is not None:
        return cap
    if status == 429:
        return _anthropic_rate_limit(h, status, message, retry_after, now, etype)
    if status == 529 or etype == "overloaded_error":
        return Failure(
            FailureKind.OVERLOAD,
            vendor,
            status,
            message,
            retry_after=retry_after,
            raw_code=etype or None,
        )
    if "prompt is too long" in message.lower():
        return Failure(
            FailureKind.CONTEXT_TOO_LONG, vendor, status, message, raw_code=etype or None
        )
    if etype in ("authentication_error", "permission_error"):
        return Failure(FailureKind.AUTH, vendor, status, message, raw_code=etype)
    if etype == "request_too_large":
        return Failure(FailureKind.BAD_REQUEST, vendor, status, message, raw_code=etype)
    return _status_fallback(vendor, status, message, retry_after, etype or None)


_ANTHROPIC_STATUS_FOR_TYPE = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}


def _anthropic_refusal(docs: list[Any], status: int) -> Failure | None:
    """A successful answer is still a refusal when its stop reason says the model declined."""
    for doc in docs:
        stop = doc.get("stop_reason") if isinstance(doc, dict) else None
        delta = doc.get("delta") if isinstance(doc, dict) else None
        if stop is None and isinstance(delta, dict):
            stop = delta.get("stop_reason")
        if stop == "refusal":
            return Failure(
                FailureKind.REFUSAL,
                "anthropic",
                status,
                "the model declined (stop_reason refusal)",
                raw_code="refusal",
            )
    return None


def _anthropic_spend_cap(
    err: dict[str, Any] | None, etype: str, status: int, message: str
) -> Failure | None:
    """A spent credit balance or spend limit, which no amount of waiting refills."""
    details = err.get("details") if err else None
    detail_code = str(details.get("error_code", "")) if isinstance(details, dict) else ""
    lowered = message.lower()
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
        return Failure(
            FailureKind.CAP, "anthropic", status, message, raw_code=cap_code or etype or None
        )
    return None


def _anthropic_rate_limit(
    h: dict[str, str],
    status: int,
    message: str,
    retry_after: float | None,
    now: float,
    etype: str,
) -> Failure:
    """A 429 is a spent subscription window when a unified header says rejected, else a burst."""
    window = _anthropic_unified_window(h)
    if window is not None:
        reset_at, names = window
        if reset_at is None and retry_after is not None:
            reset_at = now + retry_after
        return Failure(
            FailureKind.WINDOW,
            "anthropic",
            status,
            message,
            reset_at=reset_at,
            retry_after=retry_after,
            raw_code=f"unified:{names}",
        )
    return Failure(
        FailureKind.BURST,
        "anthropic",
        status,
        message,
        reset_at=_anthropic_bucket_reset(h),
        retry_after=retry_after,
        raw_code=etype or None,
    )


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


def _openai_cap(code: str, etype: str, message: str) -> bool:
    """A spent quota, balance or budget, by OpenAI's codes or by the words others use."""
    return bool(
        code
        in (
            "insufficient_quota",
            "credit_balance_exhausted",
            "billing_hard_limit_reached",  # OpenAI: the account's own monthly limit
            "billing_not_active",  # OpenAI: no payment method on the account
        )
        or etype in ("insufficient_quota", "budget_exceeded")
        or code.endswith("_spend_limit_exceeded")
        or SPEND_CAP_TEXT.search(f"{etype} {message}")
    )


def _classify_openai_shaped(
    vendor: str, status: int, headers: Headers, body: Body, now: float
) -> Failure | None:
    h = lower_headers(headers)
    docs = json_documents(body)
    err = first_error(docs)
    code = str((err or {}).get("code") or "")
    etype = str((err or {}).get("type") or "")
    message = error_message(err, body, status)
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
    if _openai_cap(code, etype, message):
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


def classify_gemini(status: int, headers: Headers, body: Body, now: float) -> Failure | None:
    """Gemini API: google.rpc status names plus QuotaFailure / RetryInfo details."""
    h = lower_headers(headers)
    docs = json_documents(body)
    err = first_error(docs)
    if 200 <= status < 300 and err is None:
        return _gemini_blocked(docs, status)
    rpc = str((err or {}).get("status") or "")
    message = error_message(err, body, status)
    retry_after = parse_retry_after(h, now)
    vendor = "gemini"
    if err is not None and 200 <= status < 300:
        status = int(err.get("code") or 500) if str(err.get("code", "")).isdigit() else 500
    if status == 429 or rpc == "RESOURCE_EXHAUSTED":
        return _gemini_exhausted(err or {}, status, message, retry_after, now, rpc)
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


_GEMINI_BLOCKED_FINISH = ("SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII")


def _gemini_blocked(docs: list[Any], status: int) -> Failure | None:
    """A successful answer whose prompt or candidate a safety filter blocked."""
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        feedback = doc.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            reason = str(feedback["blockReason"])
            return Failure(
                FailureKind.REFUSAL,
                "gemini",
                status,
                f"the prompt was blocked (blockReason {reason})",
                raw_code=reason,
            )
        for cand in doc.get("candidates") or []:
            finish = cand.get("finishReason") if isinstance(cand, dict) else None
            if finish in _GEMINI_BLOCKED_FINISH:
                return Failure(
                    FailureKind.REFUSAL,
                    "gemini",
                    status,
                    f"the answer was blocked (finishReason {finish})",
                    raw_code=str(finish),
                )
    return None


def _gemini_exhausted(
    err: dict[str, Any],
    status: int,
    message: str,
    retry_after: float | None,
    now: float,
    rpc: str,
) -> Failure:
    """RESOURCE_EXHAUSTED: a spent daily quota waits for midnight, anything else is a burst."""
    quota_ids, delay = _gemini_details(err)
    daily = [q for q in quota_ids if "perday" in q.lower().replace("_", "")]
    if daily:
        # A spent daily quota (free tier or paid) returns at midnight Pacific; the short
        # RetryInfo delay it carries would only buy another 429.
        return Failure(
            FailureKind.WINDOW,
            "gemini",
            status,
            message,
            reset_at=next_midnight(now, _GEMINI_DAY_RESET_TZ),
            retry_after=delay,
            raw_code=daily[0],
        )
    wait = delay if delay is not None else retry_after
    return Failure(
        FailureKind.BURST,
        "gemini",
        status,
        message,
        reset_at=now + wait if wait is not None else None,
        retry_after=wait,
        raw_code=(quota_ids[0] if quota_ids else rpc) or None,
    )


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
    err = first_error(docs)
    message = error_message(err, body, status)
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
