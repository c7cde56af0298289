"""When a limit lifts: the many ways providers and agents write a wait or a reset time.

Vendors state resets as seconds, milliseconds, HTTP dates, Go durations, RFC 3339 stamps,
epoch numbers or a wall-clock time in some zone; each reader here turns one of them into
epoch seconds (or seconds to wait), and answers None rather than guess at what it cannot read.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from email.utils import parsedate_to_datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent_harness.models.bodies import lower_headers
from agent_harness.models.failures import Headers


def parse_retry_after(headers: Headers, now: float) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    h = lower_headers(headers)
    ms = _finite(h.get("retry-after-ms"))
    if ms is not None:
        return max(0.0, ms / 1000.0)
    value = h.get("retry-after")
    if not value:
        return None
    seconds = _finite(value)
    if seconds is not None:
        return max(0.0, seconds)
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
    except (ValueError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _finite(value: Any) -> float | None:
    """`value` as a finite number; None for text that is none, NaN and the infinities."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


# Past this, a reset time is no time a provider means (year 5138 in seconds): it is unread.
_LATEST_EPOCH_MS = 1e14


def epoch_seconds(value: Any) -> float | None:
    """Epoch seconds from an int/float/str (milliseconds read by their magnitude) or an
    RFC 3339 stamp; None for what is neither, or no moment at all (NaN, infinite)."""
    if isinstance(value, bool):
        return None
    number = _finite(value)
    if number is None:
        return parse_rfc3339(value) if isinstance(value, str) else None
    if abs(number) > _LATEST_EPOCH_MS:
        return None
    return number / 1000.0 if number > 1e11 else number


def next_midnight(now: float, tz_name: str) -> float:
    """The first midnight after `now` on the clocks of `tz_name`, in epoch seconds."""
    tz = ZoneInfo(tz_name)
    local = datetime.fromtimestamp(now, tz)
    midnight = datetime(local.year, local.month, local.day, tzinfo=tz) + timedelta(days=1)
    return midnight.timestamp()


_UTC_OFFSET = re.compile(r"^(?:UTC|GMT)(?:(?P<sign>[+-])(?P<h>\d{1,2})(?::?(?P<m>\d{2}))?)?$")


def _zone(name: str | None) -> tzinfo | None:
    """The zone a time was written in; None for none named (this machine's own clock, which
    is what an agent running here prints). LookupError for a name not known here."""
    if not name:
        return None
    offset = _UTC_OFFSET.match(name.upper())
    if offset is not None:
        if not offset.group("sign"):
            return UTC
        minutes = int(offset.group("h")) * 60 + int(offset.group("m") or 0)
        if minutes >= 24 * 60:
            raise LookupError(name)
        return timezone(timedelta(minutes=minutes if offset.group("sign") == "+" else -minutes))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise LookupError(name) from None


def next_wall_clock(
    now: float,
    hour: int,
    minute: int,
    tz_name: str | None,
    month_day: tuple[int, int] | None = None,
) -> float | None:
    """The first moment after `now` when the clock in `tz_name` (this machine's, when none is
    named) shows hour:minute, on `month_day` when given. None when the zone is unknown here or
    no such moment exists (Feb 30, 25:00): a reset that cannot be read is not guessed."""
    try:
        zone = _zone(tz_name)  # None: naive times, read on this machine's clock
    except LookupError:
        return None
    if not (0 <= hour < 24 and 0 <= minute < 60):
        return None
    local = datetime.fromtimestamp(now, zone)
    if month_day is not None:
        month, day = month_day
        for year in (local.year, local.year + 1):
            try:
                candidate = datetime(year, month, day, hour, minute, tzinfo=zone)
            except ValueError:
                continue
            if candidate.timestamp() > now:
                return candidate.timestamp()
        return None
    candidate = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate.timestamp() <= now:
        candidate = candidate + timedelta(days=1)
    # Rebuild from fields so a DST change between today and tomorrow keeps the wall-clock time.
    return datetime(
        candidate.year, candidate.month, candidate.day, hour, minute, tzinfo=zone
    ).timestamp()


# -- waits and resets stated in words ------------------------------------------------------------

_UNIT_SECONDS = (
    ("day", 86400.0),
    ("d", 86400.0),
    ("hour", 3600.0),
    ("hr", 3600.0),
    ("h", 3600.0),
    ("milli", 0.001),
    ("ms", 0.001),
    ("min", 60.0),
    ("m", 60.0),
    ("s", 1.0),
)
_DURATION_PART = re.compile(
    r"(?P<amount>\d+(?:\.\d+)?)\s*(?P<unit>days?|d|hours?|hrs?|h|milliseconds?|ms|minutes?|"
    r"mins?|m|seconds?|secs?|s)(?![a-z])\s*(?:,\s*|and\s+)?",
    re.IGNORECASE,
)
_WAIT_LEAD = re.compile(r"\b(?:try again|retry) (?:in|after) ", re.IGNORECASE)


def stated_wait(text: str) -> float | None:
    """Seconds a provider asked for in words, if it did: "Please try again in 2.5s", "retry
    after 86400 seconds", "try again in 5 days 22 hours 11 minutes", "in 23m58.56s"."""
    for lead in _WAIT_LEAD.finditer(text):
        pos, total, parts = lead.end(), 0.0, 0
        while (part := _DURATION_PART.match(text, pos)) is not None:
            unit = part.group("unit").lower()
            scale = next(seconds for prefix, seconds in _UNIT_SECONDS if unit.startswith(prefix))
            total += float(part.group("amount")) * scale
            pos, parts = part.end(), parts + 1
        if parts:
            return total
    return None


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_STATED_DATE = re.compile(
    r"\b(?:try again|retry) (?:at|on|after) (?P<month>[A-Za-z]{3,9})\.? (?P<day>\d{1,2})"
    r"(?:st|nd|rd|th)?,? (?:(?P<year>\d{4}),? )?(?:at )?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?"
    r"\s*(?P<ampm>[ap]\.?m\.?)?(?![a-z0-9])",
    re.IGNORECASE,
)


# A time of day alone ("try again at 8:14 PM."): later today on this machine's clock, or
# tomorrow. An hour with neither minutes nor am/pm ("retry after 5") is no time of day.
_STATED_TIME = re.compile(
    r"\b(?:try again|retry) (?:at|after) (?P<hour>\d{1,2})(?::(?P<minute>\d{2})\s*"
    r"(?P<ampm>[ap]\.?m\.?)?|\s*(?P<ampm2>[ap]\.?m\.?))(?![a-z0-9])",
    re.IGNORECASE,
)


def clock_hour(hour: int, ampm: str | None) -> int | None:
    """A 12-hour clock's hour (1 to 12, with am or pm) on the 24-hour clock; None if it is none."""
    if not ampm:
        return hour if 0 <= hour < 24 else None
    if not 1 <= hour <= 12:
        return None
    return hour % 12 + (12 if ampm.lower().startswith("p") else 0)


def month_number(name: str) -> int | None:
    lowered = name[:3].lower()
    return _MONTHS.index(lowered) + 1 if lowered in _MONTHS else None


def stated_reset(text: str, now: float) -> float | None:
    """When a limit lifts, as the words say: a date ("try again at May 11th, 2026 1:36 PM",
    on this machine's clock) or a wait from `now`; None when they say neither."""
    date = _STATED_DATE.search(text)
    if date is not None:
        month = month_number(date.group("month"))
        hour = clock_hour(int(date.group("hour")), date.group("ampm"))
        minute = int(date.group("minute") or 0)
        if month is None or hour is None or minute > 59:
            return None
        if date.group("year"):
            year, day = int(date.group("year")), int(date.group("day"))
            try:
                return datetime(year, month, day, hour, minute).timestamp()
            except ValueError:
                return None
        return next_wall_clock(now, hour, minute, None, (month, int(date.group("day"))))
    at = _STATED_TIME.search(text)
    if at is not None:
        hour = clock_hour(int(at.group("hour")), at.group("ampm") or at.group("ampm2"))
        minute = int(at.group("minute") or 0)
        return None if hour is None else next_wall_clock(now, hour, minute, None)
    wait = stated_wait(text)
    return None if wait is None else now + wait
