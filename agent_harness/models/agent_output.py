"""What a CLI agent's own output says about why it stopped: a spent window, a cap, a bad key.

Agents report a provider's failure in three ways: structured events that carry the HTTP status
or an exact reset (Claude Code's `result` with `api_error_status`, its `rate_limit_event`,
Codex's `turn.failed`, Gemini CLI's error `result`, opencode's `APIError` with the response
headers), sentences the CLI writes for a person ("exceeded retry limit, last status: 429",
"The API provider has rate limited you"), and nothing at all. Each is read into the same
`Failure` the HTTP classifiers produce, a status going through the vendor's own classifier, and
a structured report is trusted over prose whenever it states a reset.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from agent_harness.errors import UNREADABLE_JSON, read_json
from agent_harness.models.agent_sentences import http_failure, one_line, text_failure
from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.limits import epoch_seconds
from agent_harness.secrets.redact import redact

# Events that carry what the model wrote or read (its turns, tool calls and their output), per
# CLI: Claude Code and Codex, Gemini CLI's stream-json, opencode's --format json.
_CONVERSATION_TYPES = frozenset(
    {
        "assistant",
        "user",
        "stream_event",
        "item.completed",
        "message",
        "tool_use",
        "tool_result",
        "text",
        "reasoning",
        "step_start",
        "step_finish",
    }
)

# Gemini CLI exits with the HTTP status of the request it gave up on, modulo 256 (429 -> 173,
# 401 -> 145, 400 -> 144). Its own fatal codes (41 auth, 42 input, 52 config, 53 turn limit,
# 55 untrusted folder) lie below this range, so 144..255 can only be a status from 400 to 511.
_GEMINI_STATUS_EXITS = range(400 - 256, 512 - 256)
_GEMINI_API_ERROR = re.compile(r"\[API Error: (?P<inner>.*)\]", re.DOTALL)
# aider prints a provider failure as litellm's line, then its own sentence, both wrapped at the
# terminal width; everything else it prints (the model's reply among it) is not a report.
_AIDER_REPORT = re.compile(
    r"^(?:litellm\.\w+(?:Error|Exception)|The API provider|Model \S+ has hit a token limit)"
)
_AIDER_RETRY = re.compile(r"^Retrying in \d+(?:\.\d+)? seconds", re.IGNORECASE)
# opencode (with --print-logs) logs a failed model call of the session's own agent before it
# waits out the provider's retry-after, which it honours up to days, printing nothing else.
_OPENCODE_STREAM_ERROR = re.compile(
    r'level=ERROR .*message="stream error" .*\bsmall=false\b.*error\.error="(?P<error>[^"]*)"'
)
_RATE_WORDS = re.compile(
    r"rate.?limit|too many requests|\b429\b|resource.?exhausted", re.IGNORECASE
)

# Limits that outlast the run: a later one of these outranks an earlier, shorter reading.
_LASTING = frozenset({FailureKind.WINDOW, FailureKind.CAP})

# When an agent stopped at a limit without saying when it lifts, it is run again after this.
DEFAULT_AGENT_WAIT_S = 60.0
# ... and after this when the limit is a spent window (hours long), not a burst.
DEFAULT_WINDOW_WAIT_S = 900.0
# A rate limit whose stated wait is this long or longer is a spent window of the account (a
# daily quota: "retry after 86400 seconds"), for every item alike, not a burst of this one.
WINDOW_WAIT_S = 300.0
# ... but a stated wait past the longest window known (a week, and a day of slack) is no
# provider's: the window is taken to reopen then.
LONGEST_WINDOW_S = 8 * 86400.0
# A stated wait longer than this is not taken at its word: the item comes back after an hour.
MAX_AGENT_WAIT_S = 3600.0
# Up to this share of the wait is added at random, so items limited together come back apart.
AGENT_WAIT_JITTER = 0.1


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


# -- structured reports -----------------------------------------------------------------------


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


def _claude_api_error(doc: dict[str, Any], agent: str, now: float) -> Failure | None:
    """Claude Code's final `result` after an API error: the status, and Anthropic's own error
    type and code, which the Anthropic classifier reads as if the response were ours."""
    status = _status_number(doc.get("api_error_status"))
    if doc.get("type") != "result" or not doc.get("is_error") or status is None:
        return None
    message = str(doc.get("result") or f"API error {status}")
    said = text_failure(message, agent, now)
    if said is not None and said.kind in _LASTING:
        return said  # "usage limit reached|<epoch>", a spend limit: the sentence knows more
    error: dict[str, Any] = {"type": str(doc.get("api_error_type") or ""), "message": message}
    if doc.get("api_error_code"):
        error["details"] = {"error_code": str(doc["api_error_code"])}
    body = json.dumps({"type": "error", "error": error})
    return http_failure(agent, "anthropic", status, message, now, body=body)


def _codex_turn_failed(doc: dict[str, Any], agent: str, now: float) -> Failure | None:
    """Codex's `turn.failed`: the message it ended the turn with (its `error` events repeat it
    or report retries still under way)."""
    error = doc.get("error")
    if doc.get("type") != "turn.failed" or not isinstance(error, dict):
        return None
    return text_failure(str(error.get("message") or ""), agent, now)


def _gemini_result_error(doc: dict[str, Any], agent: str, now: float) -> Failure | None:
    """Gemini CLI's stream-json `result` with `status: error`, or its one-object json output
    with an `error`: the message is Google's, wrapped as "[API Error: ...]"."""
    error = doc.get("error")
    final = doc.get("type") == "result" and doc.get("status") == "error"
    whole = "type" not in doc and "session_id" in doc
    if not (final or whole) or not isinstance(error, dict):
        return None
    message = str(error.get("message") or error.get("type") or "")
    found = text_failure(message, agent, now)
    if found is None and "auth" in str(error.get("type") or "").lower():
        found = Failure(FailureKind.AUTH, agent, None, one_line(message))
    return found


def _opencode_error(doc: dict[str, Any], agent: str, now: float) -> Failure | None:
    """opencode's `error` event: a named error whose `APIError` keeps the provider's status,
    response headers and body, so the vendor's classifier sees what opencode saw."""
    error = doc.get("error")
    if doc.get("type") != "error" or not isinstance(error, dict) or "name" not in error:
        return None
    raw = error.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    name = str(error["name"])
    message = str(data.get("message") or name)
    named = {
        "ProviderAuthError": FailureKind.AUTH,
        "ContextOverflowError": FailureKind.CONTEXT_TOO_LONG,
        "ContentFilterError": FailureKind.REFUSAL,
    }
    if name in named:
        return Failure(named[name], agent, None, one_line(message), raw_code=name)
    if name != "APIError":
        return None
    status = _status_number(data.get("statusCode"))
    if status is None:
        kind = FailureKind.SERVER if data.get("isRetryable") else FailureKind.BAD_REQUEST
        return Failure(kind, agent, None, one_line(message), raw_code=name)
    sent = data.get("responseHeaders")
    headers = {str(k): str(v) for k, v in sent.items()} if isinstance(sent, dict) else {}
    body = data.get("responseBody") if isinstance(data.get("responseBody"), str) else None
    vendor = _vendor_of(headers, body or "")
    return http_failure(agent, vendor, status, message, now, headers=headers, body=body)


def _status_number(value: Any) -> int | None:
    """An HTTP status as a report gives it: a number, or digits in a string ("429")."""
    if isinstance(value, str) and value.strip().isdecimal() and value.strip().isascii():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def _vendor_of(headers: Mapping[str, str], body: str) -> str:
    """Which vendor answered, from what only that vendor sends: Anthropic's headers and its
    `{"type": "error"}` envelope, Google's status names; anything else is read as OpenAI's."""
    if any(str(name).lower().startswith("anthropic-") for name in headers):
        return "anthropic"
    try:
        doc = read_json(body)
    except UNREADABLE_JSON:
        return "openai"
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(doc, dict) and doc.get("type") == "error":
        return "anthropic"
    if isinstance(error, dict) and isinstance(error.get("status"), str):
        return "gemini"
    return "openai"


def _structured(doc: Any, agent: str, now: float) -> Failure | None:
    found = _claude_rate_limit_event(doc, agent) or _codex_usage_limit(doc, agent, now)
    if found is not None or not isinstance(doc, dict):
        return found
    for reader in (_claude_api_error, _codex_turn_failed, _gemini_result_error, _opencode_error):
        found = reader(doc, agent, now)
        if found is not None:
            return found
    return None


def _outranks(found: Failure, held: Failure | None) -> bool:
    """Whether a failure read later replaces the one read so far from prose: a lasting limit
    replaces a passing one (a per-day quota whose 429 line came first)."""
    return held is None or (found.kind in _LASTING and held.kind not in _LASTING)


def classify_agent_output(
    agent: str,
    text_or_lines: str | Iterable[str],
    *,
    now: float,
    exit_code: int | None = None,
) -> Failure | None:
    """Find the limit or failure a CLI agent reported in its output, if any.

    Structured reports win over prose: Claude Code's `rate_limit_event` and its failed `result`
    (with the API status and error type), Codex's `turn.failed`, Gemini CLI's error `result`,
    opencode's `error` event. Otherwise the known sentences are read ("Claude AI usage limit
    reached|<epoch>", "You've hit your session limit · resets 8:37am (UTC)", "exceeded retry
    limit, last status: 429", "The API provider has rate limited you"), with wall-clock times
    resolved to the next such moment after `now`. Only failure reports are read: what the model
    wrote (conversation events; for aider, any line outside its own error reports) never is.
    Gemini CLI's `exit_code` carries the HTTP status it gave up on, which classifies its error
    unless the words name a longer limit (a spent daily quota).
    """
    name = agent.lower()
    lines = _lines(text_or_lines)
    found = _aider_failure(lines, now) if name == "aider" else _reported_failure(name, lines, now)
    status = http_status_of_exit(name, exit_code)
    if status is not None and (found is None or found.kind not in _LASTING):
        found = _gemini_status_failure(status, lines, now) or found
    if found is None:
        return None
    # An agent told a bad key often prints it back: the message is shown and kept, the key not.
    return _long_wait_is_a_window(dataclasses.replace(found, message=redact(found.message)), now)


def _long_wait_is_a_window(found: Failure, now: float) -> Failure:
    """A rate limit that asks for a wait of WINDOW_WAIT_S or more is a spent window of the
    account (a daily quota), which every item meets alike, not a burst of this one."""
    if found.kind is not FailureKind.BURST:
        return found
    reset = found.reset_at
    if reset is None and found.retry_after is not None:
        reset = now + found.retry_after
    if reset is None or reset - now < WINDOW_WAIT_S:
        return found
    reset = min(reset, now + LONGEST_WINDOW_S)
    return dataclasses.replace(found, kind=FailureKind.WINDOW, reset_at=reset)


def http_status_of_exit(agent: str, exit_code: int | None) -> int | None:
    """The HTTP status an agent's exit code stands for, where the CLI encodes one (Gemini CLI)."""
    if agent.lower() != "gemini" or exit_code is None or exit_code not in _GEMINI_STATUS_EXITS:
        return None
    return exit_code + 256


def _reported_failure(name: str, lines: list[str], now: float) -> Failure | None:
    structured: Failure | None = None
    textual: Failure | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        doc: Any = None
        if stripped.startswith(("{", "[")):
            try:
                doc = read_json(stripped)
            except UNREADABLE_JSON:
                doc = None
        if doc is not None:
            # What the model itself wrote (or read from files) is not the agent's status: a
            # transcript discussing rate limits must not be mistaken for hitting one.
            if isinstance(doc, dict) and (doc.get("type") in _CONVERSATION_TYPES or _answered(doc)):
                continue
            found = _structured(doc, name, now)
            if found is not None:
                structured = structured or found
                continue
            if not _failure_shaped(doc):
                continue  # a todo list, a command started, progress: the model's, not a report
            texts = list(_strings(doc))
        else:
            texts = [stripped]
        for text in texts:
            found = text_failure(text, name, now)
            if found is not None and _outranks(found, textual):
                textual = found
    if structured is not None:
        if structured.reset_at is None and textual is not None and textual.reset_at is not None:
            return textual
        return structured
    return textual


# The event types that report what went wrong, in the CLIs' JSON: an event of another type
# (Codex's `item.started` and `item.updated`, Gemini's `init`) carries the model's plans and
# commands, which may well say "1000 requests per day" or "budget_exceeded".
_REPORT_TYPES = frozenset({"error", "turn.failed", "result", "system", "rate_limit_event"})


def _failure_shaped(doc: Any) -> bool:
    """Whether a JSON line may report a failure in its words: an event of a reporting type,
    one that names an error, or JSON with no event type at all (a tool's own error object)."""
    if not isinstance(doc, dict):
        return True
    kind = doc.get("type")
    return kind is None or kind in _REPORT_TYPES or "error" in doc or bool(doc.get("is_error"))


def _answered(doc: dict[str, Any]) -> bool:
    """A final `result` that is no error (Claude Code's carries the model's last words)."""
    return doc.get("type") == "result" and not doc.get("is_error") and doc.get("status") != "error"


def _aider_reports(lines: list[str]) -> Iterator[tuple[str, bool]]:
    """aider's own failure reports, each joined back from its wrapped lines, and whether aider
    went on to retry (a "Retrying in ... seconds" line right after it)."""
    report: list[str] = []
    for line in [*lines, ""]:
        stripped = line.strip()
        if report and _AIDER_RETRY.match(stripped):
            yield " ".join(report), True
            report = []
        elif _AIDER_REPORT.match(stripped) and not (report and stripped.startswith("The API")):
            # litellm's line opens a report; aider's own sentence after it belongs to it.
            if report:
                yield " ".join(report), False
            report = [stripped]
        elif report and stripped:
            report.append(stripped)
        elif report:
            yield " ".join(report), False
            report = []


def _aider_failure(lines: list[str], now: float) -> Failure | None:
    found: Failure | None = None
    for report, _retried in _aider_reports(lines):
        read = text_failure(report, "aider", now)
        if read is not None and _outranks(read, found):
            found = read
    return found


def retrying_limit(agent: str, text_or_lines: str | Iterable[str], *, now: float) -> Failure | None:
    """A rate limit the CLI is still retrying by itself, with no way to bound it (aider backs
    off for over a minute whatever the provider said; opencode waits out a retry-after of
    hours, silently): the harness ends the run on the first such retry and parks the item."""
    if agent.lower() == "opencode":
        for line in _lines(text_or_lines):
            logged = _OPENCODE_STREAM_ERROR.search(line)
            if logged and _RATE_WORDS.search(logged.group("error")):
                message = one_line(logged.group("error"))
                return Failure(FailureKind.BURST, "opencode", None, message, raw_code="retrying")
        return None
    if agent.lower() != "aider":
        return None
    for report, retried in _aider_reports(_lines(text_or_lines)):
        read = text_failure(report, "aider", now)
        if retried and read is not None and read.kind in (FailureKind.BURST, *_LASTING):
            return read
    return None


def _gemini_status_failure(status: int, lines: list[str], now: float) -> Failure | None:
    """Gemini CLI's HTTP status (from its exit code) with the message of its error `result`,
    classified as the Gemini API's own answer."""
    message = ""
    for line in lines:
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            doc = read_json(stripped)
        except UNREADABLE_JSON:
            continue
        error = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(error, dict) and doc.get("status") == "error":
            message = str(error.get("message") or "")
    wrapped = _GEMINI_API_ERROR.search(message)
    inner = wrapped.group("inner") if wrapped else message
    try:
        body_doc = read_json(inner)
    except UNREADABLE_JSON:
        body_doc = None
    if isinstance(body_doc, dict) and isinstance(body_doc.get("error"), dict):
        body = inner
        shown = str(body_doc["error"].get("message") or inner)
    else:
        body = json.dumps({"error": {"code": status, "message": inner}})
        shown = inner or f"HTTP {status}"
    return http_failure("gemini", "gemini", status, shown, now, body=body)


def agent_wait_until(failure: Failure, now: float, rng: random.Random) -> float:
    """When to run an agent again after it stopped at `failure`, a limit it could not get past.

    A window's stated reset is kept as it is: that is when it reopens. Otherwise the wait the
    provider stated (a reset header or `retry-after`, as far as the CLI passed it on) is used,
    or `DEFAULT_AGENT_WAIT_S` when none was (`DEFAULT_WINDOW_WAIT_S` for a spent window),
    capped at `MAX_AGENT_WAIT_S`, plus up to `AGENT_WAIT_JITTER` of it at random.
    """
    moment = agent_wait_base(failure, now)
    if _reopens_at(failure, now) is not None:
        return moment
    return moment + rng.uniform(0.0, AGENT_WAIT_JITTER * (moment - now))


def agent_wait_base(failure: Failure, now: float) -> float:
    """`agent_wait_until` without its jitter: the earliest the agent runs again."""
    reopens = _reopens_at(failure, now)
    if reopens is not None:
        return reopens
    stated = failure.reset_at - now if failure.reset_at is not None else failure.retry_after
    unstated = DEFAULT_WINDOW_WAIT_S if failure.kind is FailureKind.WINDOW else DEFAULT_AGENT_WAIT_S
    return now + (unstated if stated is None or stated <= 0 else min(stated, MAX_AGENT_WAIT_S))


def _reopens_at(failure: Failure, now: float) -> float | None:
    """A window's reset still to come (one already past says nothing of the next)."""
    if failure.kind is FailureKind.WINDOW and failure.reset_at is not None:
        return failure.reset_at if failure.reset_at > now else None
    return None
