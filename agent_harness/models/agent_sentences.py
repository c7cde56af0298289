"""What a CLI agent writes for a person about why it stopped, read into a `Failure`.

The sentences of Claude Code, Codex, Gemini CLI, aider and opencode (and of the providers and
proxies they pass on: Anthropic, OpenAI, Google, Bedrock, Azure, Groq, OpenRouter, DeepSeek,
LiteLLM): a spent window with its reset in words, a spent cap, a status the CLI names ("unexpected
status 429", "API Error: 500"), and the phrases each class is known by. `agent_output` reads the
structured reports first and comes here for the rest.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping

from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.limits import (
    clock_hour,
    epoch_seconds,
    month_number,
    next_midnight,
    next_wall_clock,
    stated_reset,
    stated_wait,
)
from agent_harness.models.providers import SPEND_CAP_TEXT, classify_response

_CLAUDE_PIPE_RESET = re.compile(r"Claude AI usage limit reached\|(\d{9,13})")
_RESETS_AT = re.compile(
    r"(?P<lead>(?:hit your|usage limit|limit reached|limit will reset|out of)[^\n]*?)"
    r"resets?(?: at)?\s+(?P<when>[A-Za-z]{3,9}\s+\d{1,2}(?:st|nd|rd|th)?(?:,|\s+at)\s*)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm)"
    r"(?:\s*\((?P<tz>[A-Za-z_/+\-0-9]+)\))?",
    re.IGNORECASE,
)
_LIMIT_NO_RESET = re.compile(
    r"hit your (?:\w+ )?limit|usage limit (?:has been )?reached|\b\d+[- ]hour limit reached",
    re.IGNORECASE,
)
# A per-day quota of tokens or requests (Groq's TPD, Bedrock's "tokens per day"): spent for the
# account, not for one request, so it is a window whatever status it came with.
_PER_DAY = re.compile(r"\b(?:tokens|requests) per day\b|\((?:TPD|RPD)\)", re.IGNORECASE)
# ... said of a limit met, not of a feature ("enforce 1000 requests per day per user").
_LIMITED = re.compile(r"rate.?limit|too many|\b429\b|quota|limit reached|\bexceeded\b", re.I)

# The HTTP status of a request the CLI gave up on, in its own words: Codex's "unexpected status
# 429", "last status: 429" (anywhere in its message); Claude Code's plain text "API Error: 500
# {…}", "API Error (429 …)", "API Error: Request rejected (429)", only where a line starts
# with it (a test's output saying "api error 500" in passing is no report of the agent's).
_SAID_STATUS = re.compile(
    r"(?:unexpected status|last status:|^\W*api error:?\s*(?:\(|request rejected \()?)\s*"
    r"(?P<status>[1-5]\d\d)\b",
    re.IGNORECASE,
)
# Whose HTTP classifier reads a status a CLI names in its text (OpenAI's for the rest).
_AGENT_VENDOR = {"claude": "anthropic", "gemini": "gemini"}
# A retry the CLI is still making is not why it stopped ("Reconnecting... 1/5 (...)").
_STILL_RETRYING = re.compile(r"^\s*reconnecting\.\.\.", re.IGNORECASE)
# Google's daily quotas reopen at midnight Pacific time; the per-day quota ids say "PerDay".
_GEMINI_DAY_RESET_TZ = "America/Los_Angeles"
_DAILY_QUOTA = re.compile(r"daily (?:\S+ )?quota", re.IGNORECASE)
_PER_DAY_QUOTA_ID = re.compile(r"PerDay")

# Sentences that name one class whatever CLI prints them, checked in this order (the first
# that matches wins). Google's status names are matched in capitals only, as Google writes them.
_SENTENCES: tuple[tuple[re.Pattern[str], FailureKind], ...] = (
    (
        re.compile(
            r"prompt is too long|exceeds the context window|ran out of room in the model's "
            r"context window|has hit a token limit|ContextWindowExceededError|"
            r"maximum context length is|context_length_exceeded|"
            # One request over a per-minute token limit (OpenAI, Groq): it never fits.
            r"request too large for",
            re.IGNORECASE,
        ),
        FailureKind.CONTEXT_TOO_LONG,
    ),
    # Google's 429 says "You exceeded your current quota" too, but of a per-minute quota that
    # refills by itself (a per-day one is read as a window before these rules).
    (
        re.compile(
            r"RESOURCE_EXHAUSTED|(?i:resource exhausted\. please try again)|ai\.google\.dev|"
            r"generativelanguage\.googleapis"
        ),
        FailureKind.BURST,
    ),
    (
        re.compile(
            r"exceeded your current quota|quota exceeded\. check your plan and billing|"
            r"to use codex with your chatgpt plan, upgrade",
            re.IGNORECASE,
        ),
        FailureKind.CAP,
    ),
    (
        re.compile(r"api error: 529|overloaded_error|selected model is at capacity", re.I),
        FailureKind.OVERLOAD,
    ),
    (
        re.compile(
            r"invalid api key|authentication_error|incorrect api key provided|api key not valid|"
            r"not able to authenticate you|litellm\.AuthenticationError|please set an auth "
            r"method|invalid auth method selected|refresh token was already used|log out and "
            r"sign in again|security token included in the request is invalid|is not "
            r"authorized to perform|(?:don't|do not) have access to the model",
            re.IGNORECASE,
        ),
        FailureKind.AUTH,
    ),
    # FAILED_PRECONDITION: a project not allowed a model, a region not served; a person acts.
    (
        re.compile(
            r"\b(?:PERMISSION_DENIED|UNAUTHENTICATED|API_KEY_INVALID|FAILED_PRECONDITION)\b"
        ),
        FailureKind.AUTH,
    ),
    (
        re.compile(r"api error: 429|has rate limited you|litellm\.RateLimitError", re.I),
        FailureKind.BURST,
    ),
    (
        re.compile(r"refused the request due to a safety policy|ContentPolicyViolationError", re.I),
        FailureKind.REFUSAL,
    ),
    (
        re.compile(
            r"experiencing high demand|servers are down or overloaded|timed out without "
            r"returning a response|stream disconnected before completion|ECONNREFUSED|"
            r"ECONNRESET|ETIMEDOUT|"
            r"litellm\.(?:InternalServerError|ServiceUnavailableError|Timeout|APIConnectionError)",
            re.IGNORECASE,
        ),
        FailureKind.SERVER,
    ),
    # What the provider refused as asked (a model it does not have, a malformed request),
    # reported through litellm by aider; the same request fails the same way again.
    (
        re.compile(r"litellm\.(?:BadRequestError|NotFoundError|UnprocessableEntityError)"),
        FailureKind.BAD_REQUEST,
    ),
)


def one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def _as_agent(found: Failure, agent: str, message: str) -> Failure:
    """A vendor's classification told as the agent's, in the agent's words."""
    wait = found.retry_after
    if found.kind is FailureKind.BURST and wait is None:
        wait = stated_wait(message)
    return dataclasses.replace(found, vendor=agent, message=one_line(message), retry_after=wait)


def http_failure(
    agent: str,
    vendor: str,
    status: int,
    message: str,
    now: float,
    *,
    headers: Mapping[str, str] | None = None,
    body: str | None = None,
) -> Failure | None:
    """An HTTP status the agent reported, through the vendor's own classifier."""
    shown = body if body is not None else json.dumps({"error": {"message": message}})
    found = classify_response(vendor, status, dict(headers or {}), shown, now=now)
    return None if found is None else _as_agent(found, agent, message)


# -- sentences ----------------------------------------------------------------------------------


def _resets_at(match: re.Match[str], now: float) -> float | None:
    """The moment "resets 3pm", "resets Apr 23 at 4pm (America/Recife)" names, on the named
    zone's clock or else this machine's; None for a time no clock shows (13pm, 3:99pm)."""
    hour = clock_hour(int(match.group("hour")), match.group("ampm"))
    minute = int(match.group("minute") or 0)
    if hour is None or minute > 59:
        return None
    month_day = None
    if match.group("when"):
        month_name, day = match.group("when").replace(",", " ").split()[:2]
        month = month_number(month_name)
        day_number = int(day.rstrip("stndrh"))
        if month is None:
            return None
        month_day = (month, day_number)
    return next_wall_clock(now, hour, minute, match.group("tz"), month_day)


def _window_sentence(line: str, agent: str, now: float) -> Failure | None:
    """A spent window or cap in words, with its reset when the sentence gives one."""
    pipe = _CLAUDE_PIPE_RESET.search(line)
    if pipe:
        return Failure(
            FailureKind.WINDOW,
            agent,
            None,
            "Claude usage limit reached",
            reset_at=epoch_seconds(pipe.group(1)),
            raw_code="usage_limit",
        )
    if SPEND_CAP_TEXT.search(line):
        return Failure(FailureKind.CAP, agent, None, one_line(line), raw_code="spend_cap")
    match = _RESETS_AT.search(line)
    if match:
        return _window(agent, line, _resets_at(match, now), now, "usage_limit")
    if _LIMIT_NO_RESET.search(line):
        # "… or try again in 5 days 22 hours", "… try again at May 11th, 2026 1:36 PM"
        return _window(agent, line, stated_reset(line, now), now, "usage_limit")
    if _DAILY_QUOTA.search(line) or _PER_DAY_QUOTA_ID.search(line):
        reset = next_midnight(now, _GEMINI_DAY_RESET_TZ)  # known, not stated: no wait said
        return Failure(
            FailureKind.WINDOW, agent, None, one_line(line), reset_at=reset, raw_code="daily"
        )
    if _PER_DAY.search(line) and _LIMITED.search(line):
        return _window(agent, line, stated_reset(line, now), now, "daily")
    return None


def _window(agent: str, line: str, reset: float | None, now: float, code: str) -> Failure:
    """A spent window, with its reset when one could be read."""
    wait = None if reset is None else reset - now
    return Failure(
        FailureKind.WINDOW, agent, None, one_line(line), reset_at=reset, retry_after=wait,
        raw_code=code,
    )  # fmt: skip


def text_failure(line: str, agent: str, now: float) -> Failure | None:
    window = _window_sentence(line, agent, now)
    if window is not None:
        return window
    if _STILL_RETRYING.match(line):
        return None
    named = _SAID_STATUS.search(line)
    status = int(named.group("status")) if named else None
    for pattern, kind in _SENTENCES:
        if pattern.search(line):
            if kind is FailureKind.CAP and agent == "gemini":
                # Google words a per-minute 429 as "You exceeded your current quota" as well.
                kind = FailureKind.BURST
            wait = stated_wait(line) if kind is FailureKind.BURST else None
            return Failure(kind, agent, status, one_line(line), retry_after=wait)
    if status is not None:
        return http_failure(agent, _AGENT_VENDOR.get(agent, "openai"), status, line.strip(), now)
    return None
