"""What a CLI agent's own output says about why it stopped: a spent window, a cap, an overload.

Agents report limits two ways: structured events (Claude Code's `rate_limit_event`, Codex's
`usage_limit_reached`) that carry exact reset epochs, and sentences meant for a person. Both
are read into the same `Failure` the HTTP classifiers produce, with the structured report
trusted over the prose whenever it states a reset.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.limits import epoch_seconds, next_wall_clock

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
        reset = epoch_seconds(info.get("resetsAt") or info.get("resets_at") or info.get("reset"))
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
        reset = epoch_seconds(item.get("resets_at"))
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
            reset_at=epoch_seconds(pipe.group(1)),
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
