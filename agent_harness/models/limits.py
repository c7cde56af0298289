"""When a limit lifts: the many ways providers and agents write a wait or a reset time.

Vendors state resets as seconds, milliseconds, HTTP dates, Go durations, RFC 3339 stamps,
epoch numbers or a wall-clock time in some zone; each reader here turns one of them into
epoch seconds (or seconds to wait), and answers None rather than guess at what it cannot read.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_harness.models.bodies import lower_headers
from agent_harness.models.failures import Headers


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


def epoch_seconds(value: Any) -> float | None:
    """Epoch seconds from an int/float/str, accepting milliseconds by magnitude."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number / 1000.0 if number > 1e11 else number


def next_midnight(now: float, tz_name: str) -> float:
    """The first midnight after `now` on the clocks of `tz_name`, in epoch seconds."""
    tz = ZoneInfo(tz_name)
    local = datetime.fromtimestamp(now, tz)
    midnight = datetime(local.year, local.month, local.day, tzinfo=tz) + timedelta(days=1)
    return midnight.timestamp()


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
