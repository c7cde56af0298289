"""CLI agents report the same limits in their output; they must get the same classes.

Shapes: Claude Code stream-json `rate_limit_event` (https://github.com/paperclipai/paperclip/pull/5776,
https://github.com/handarbeit/fabrik/issues/1815), its "usage limit reached|<epoch>" result
(https://github.com/anthropics/claude-code/issues/11429), "You've hit your limit · resets …"
(https://github.com/anthropics/claude-code/issues/52575, /issues/22976), and Codex's
`usage_limit_reached` error with `resets_in_seconds` (openai/codex codex-rs/core/src/client.rs).

`cli_outputs.json` holds one row per output the harness tells apart, each with the lines the
CLI printed (and the exit code where it says something) and where they came from: most recorded
from the five real CLIs against the scripted provider, the rest quoted from issues and sources.
A row of class `none` is output that must not be read as a failure (the model talking about
limits in its own messages).
docs/PROVIDERS.md shows the same rows as a table, and a test keeps the two alike.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent_harness.models.agent_output import (
    agent_wait_until,
    classify_agent_output,
    http_status_of_exit,
    retrying_limit,
)
from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.limits import next_midnight

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, 10, 0, tzinfo=UTC).timestamp()


def at(year: int, month: int, day: int, hour: int, minute: int, tz: str = "UTC") -> float:
    return datetime(year, month, day, hour, minute, tzinfo=ZoneInfo(tz)).timestamp()


def test_claude_rate_limit_event_rejected_is_a_window_with_its_epoch() -> None:
    lines = [
        json.dumps({"type": "system", "subtype": "init", "session_id": "s"}),
        json.dumps(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "rejected",
                    "resetsAt": 1767276000,
                    "rateLimitType": "five_hour",
                    "overageStatus": "rejected",
                    "isUsingOverage": False,
                },
            }
        ),
        json.dumps({"type": "result", "is_error": True, "result": "You've hit your limit"}),
    ]
    failure = classify_agent_output("claude", lines, now=NOW)
    assert failure is not None
    assert failure.kind is FailureKind.WINDOW
    assert failure.reset_at == 1767276000
    assert failure.raw_code == "five_hour"


def test_claude_rate_limit_event_is_found_however_deeply_nested() -> None:
    line = json.dumps(
        {
            "type": "rate_limit_event",
            "event": {
                "info": {
                    "status": "rejected",
                    "resetsAt": 1767276000000,
                    "rateLimitType": "seven_day",
                }
            },
        }
    )
    failure = classify_agent_output("claude", line, now=NOW)
    assert failure is not None and failure.kind is FailureKind.WINDOW
    assert failure.reset_at == 1767276000  # milliseconds were read as such
    assert failure.raw_code == "seven_day"


@pytest.mark.parametrize("status", ["allowed", "allowed_warning"])
def test_a_served_rate_limit_event_is_not_a_failure(status: str) -> None:
    line = json.dumps(
        {
            "type": "rate_limit_event",
            "rate_limit_info": {
                "status": status,
                "resetsAt": 1767276000,
                "rateLimitType": "seven_day",
            },
        }
    )
    assert (
        classify_agent_output("claude", [line, '{"type":"result","result":"ok"}'], now=NOW) is None
    )


def test_claude_usage_limit_pipe_epoch() -> None:
    line = json.dumps(
        {"type": "result", "is_error": True, "result": "Claude AI usage limit reached|1767272400"}
    )
    failure = classify_agent_output("claude", line, now=NOW)
    assert failure is not None and failure.kind is FailureKind.WINDOW
    assert failure.reset_at == 1767272400


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # later today
        ("You've hit your session limit · resets 11:37am (UTC)", at(2026, 1, 1, 11, 37)),
        # already past today: tomorrow
        ("You've hit your session limit · resets 8:37am (UTC)", at(2026, 1, 2, 8, 37)),
        ("5-hour limit reached ∙ resets at 2am (UTC)", at(2026, 1, 2, 2, 0)),
        (
            "Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).",
            at(2026, 1, 1, 17, 0, "Europe/Warsaw"),
        ),
        (
            "You've hit your limit · resets 2pm (Asia/Shanghai)",
            at(2026, 1, 2, 14, 0, "Asia/Shanghai"),
        ),
        (
            "You've hit your limit - resets Feb 7, 11am (Asia/Seoul)",
            at(2026, 2, 7, 11, 0, "Asia/Seoul"),
        ),
    ],
)
def test_resets_wall_clock_text_is_the_next_such_time(text: str, expected: float) -> None:
    failure = classify_agent_output("claude", text, now=NOW)
    assert failure is not None and failure.kind is FailureKind.WINDOW
    assert failure.reset_at == expected
    assert failure.reset_at > NOW


def test_codex_usage_limit_reached_with_resets_in_seconds() -> None:
    line = json.dumps(
        {
            "type": "error",
            "error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_in_seconds": 3600,
            },
        }
    )
    failure = classify_agent_output("codex", line, now=NOW)
    assert failure is not None and failure.kind is FailureKind.WINDOW
    assert failure.reset_at == NOW + 3600
    assert failure.raw_code == "usage_limit_reached"


def test_codex_usage_limit_reached_with_resets_at() -> None:
    line = json.dumps({"error": {"type": "usage_limit_reached", "resets_at": NOW + 90}})
    failure = classify_agent_output("codex", ["thinking…", line], now=NOW)
    assert failure is not None and failure.reset_at == NOW + 90


def test_codex_usage_not_included_is_a_cap() -> None:
    line = json.dumps({"error": {"type": "usage_not_included", "message": "Upgrade to Plus"}})
    failure = classify_agent_output("codex", line, now=NOW)
    assert failure is not None and failure.kind is FailureKind.CAP


def test_a_limit_without_a_reset_time_is_a_window_of_unknown_length() -> None:
    failure = classify_agent_output("codex", "■ You've hit your usage limit.", now=NOW)
    assert failure is not None and failure.kind is FailureKind.WINDOW
    assert failure.reset_at is None


def test_a_spend_limit_sentence_is_a_cap() -> None:
    text = "You've hit your monthly spend limit · raise it at claude.ai/settings/usage"
    failure = classify_agent_output("claude", text, now=NOW)
    assert failure is not None and failure.kind is FailureKind.CAP


def test_overload_and_context_sentences() -> None:
    overload = classify_agent_output("claude", "API Error: 529 Overloaded", now=NOW)
    context = classify_agent_output("claude", "API Error: prompt is too long", now=NOW)
    assert overload is not None and overload.kind is FailureKind.OVERLOAD
    assert context is not None and context.kind is FailureKind.CONTEXT_TOO_LONG


def test_the_models_own_words_about_limits_are_not_a_failure() -> None:
    said = {
        "type": "assistant",
        "message": {
            "content": [
                {
                    "type": "text",
                    "text": "I added a retry for 'API Error: 429' and for when you've "
                    "hit your limit.",
                }
            ]
        },
    }
    assert classify_agent_output("claude", json.dumps(said), now=NOW) is None


def test_ordinary_output_is_not_a_failure() -> None:
    text = "Edited src/app.py\nAll 12 tests passed.\nThe rate limiter module now resets state."
    assert classify_agent_output("claude", text, now=NOW) is None
    assert classify_agent_output("codex", text.splitlines(), now=NOW) is None


ROWS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "cli_outputs.json").read_text(encoding="utf-8")
)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "PROVIDERS.md"
TABLE_HEADING = "## What each CLI agent's output is"


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['agent']}: {r['output']}" for r in ROWS])
def test_each_recorded_cli_output_gets_its_class(row: dict[str, Any]) -> None:
    failure = classify_agent_output(
        row["agent"], row["lines"], now=NOW, exit_code=row.get("exit_code")
    )

    if row["kind"] == "none":  # the model's own words, however alarming, are no failure
        assert failure is None, failure
        return
    assert failure is not None, row["source"]
    assert (failure.kind.value, failure.vendor) == (row["kind"], row["agent"])
    assert failure.retry_after == pytest.approx(row.get("retry_after"))
    if "reset_at" in row:
        assert failure.reset_at == row["reset_at"]
    if row.get("reset") == "next midnight America/Los_Angeles":
        assert failure.reset_at == next_midnight(NOW, "America/Los_Angeles")


def _docs_rows() -> list[tuple[str, str, str]]:
    text = DOCS.read_text(encoding="utf-8").split(TABLE_HEADING, 1)[1]
    rows = []
    for line in text.splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and len(cells) >= 3 and cells[0] not in ("agent", "---"):
            rows.append((cells[0], cells[1], cells[2].strip("`")))
    return rows


def test_the_docs_table_lists_exactly_the_recorded_outputs() -> None:
    recorded = [(r["agent"], r["output"], r["kind"]) for r in ROWS]
    assert _docs_rows() == recorded


def test_a_retry_still_under_way_is_not_why_codex_stopped() -> None:
    line = json.dumps(
        {"type": "error", "message": "Reconnecting... 1/2 (exceeded retry limit, last status: 429)"}
    )
    assert classify_agent_output("codex", line, now=NOW) is None


def burst(retry_after: float | None = None, reset_at: float | None = None) -> Failure:
    return Failure(FailureKind.BURST, "codex", 429, "slow down", reset_at, retry_after)


@pytest.mark.parametrize(
    ("failure", "low", "high"),
    [
        (burst(), 60.0, 66.0),  # nothing stated: a minute
        (burst(retry_after=120.0), 120.0, 132.0),  # the provider's retry-after
        (burst(reset_at=NOW + 900.0), 900.0, 990.0),  # a reset header
        (burst(retry_after=7200.0), 3600.0, 3960.0),  # capped at an hour
    ],
)
def test_an_agent_stopped_at_a_rate_limit_waits_what_was_stated_capped_and_jittered(
    failure: Failure, low: float, high: float
) -> None:
    waits = {agent_wait_until(failure, NOW, random.Random(seed)) - NOW for seed in range(20)}
    assert all(low <= wait <= high for wait in waits)
    assert len(waits) > 1  # jittered: items limited together do not all come back together


def test_a_spent_window_waits_for_its_exact_reset() -> None:
    window = Failure(FailureKind.WINDOW, "claude", None, "rejected", reset_at=NOW + 5 * 3600)
    assert agent_wait_until(window, NOW, random.Random(1)) == NOW + 5 * 3600


def _recorded(agent: str, starts: str) -> dict[str, Any]:
    [row] = [r for r in ROWS if r["agent"] == agent and r["output"].startswith(starts)]
    return row


def test_aider_s_first_retry_of_a_429_is_where_the_harness_stops_it() -> None:
    lines = _recorded("aider", "exit 0 after its own retries")["lines"]
    first_retry = next(i for i, line in enumerate(lines) if line.startswith("Retrying in"))
    assert retrying_limit("aider", lines[:first_retry], now=NOW) is None  # not retrying yet
    found = retrying_limit("aider", lines[: first_retry + 1], now=NOW)
    assert found is not None and found.kind is FailureKind.BURST
    assert "Rate limit reached for requests" in found.message  # joined across the wrap


def test_a_failure_aider_does_not_retry_is_not_a_retry() -> None:
    lines = _recorded("aider", 'exit 0, "litellm.AuthenticationError')["lines"]
    assert retrying_limit("aider", lines, now=NOW) is None
    found = classify_agent_output("aider", lines, now=NOW)
    assert found is not None and "Incorrect API key provided" in found.message


@pytest.mark.parametrize(("code", "status"), [(173, 429), (145, 401), (144, 400), (244, 500)])
def test_gemini_exit_codes_are_http_statuses_modulo_256(code: int, status: int) -> None:
    assert http_status_of_exit("gemini", code) == status


@pytest.mark.parametrize(
    ("agent", "code"), [("gemini", 41), ("gemini", 55), ("gemini", 1), ("claude", 173)]
)
def test_other_exit_codes_are_no_http_status(agent: str, code: int) -> None:
    assert http_status_of_exit(agent, code) is None


# What opencode 1.18.33 (--print-logs --log-level ERROR) printed, recorded against the scripted
# provider answering 429 with retry-after: 3600; it then waited, printing nothing more.
OPENCODE_WAITING = [
    'timestamp=2026-11-30T21:24:34.011Z level=ERROR run=8785d078 message="stream error" '
    "providerID=anthropic modelID=claude-haiku-4-5-20251001 "
    "session.id=ses_dd1a827f5ffe0vacTdgC6jFBAI "
    'small=true agent=title mode=primary error.error="AI_RetryError: Failed after 3 attempts. '
    'Last error: Number of request tokens has exceeded your per-minute rate limit"',
    'timestamp=2026-11-30T21:25:05.413Z level=ERROR run=8785d078 message="stream error" '
    "providerID=anthropic modelID=claude-sonnet-4-5 session.id=ses_dd1a827f5ffe0vacTdgC6jFBAI "
    'small=false agent=build mode=primary error.error="AI_APICallError: Number of request tokens '
    'has exceeded your per-minute rate limit"',
]


def test_opencode_waiting_out_a_429_is_stopped_at_its_logged_error() -> None:
    # The title side call's failure is not the session's: only the build agent's counts.
    assert retrying_limit("opencode", OPENCODE_WAITING[:1], now=NOW) is None
    found = retrying_limit("opencode", OPENCODE_WAITING, now=NOW)
    assert found is not None and found.kind is FailureKind.BURST
    assert "per-minute rate limit" in found.message


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Please try again in 2.5s.", 2.5),
        ("Please retry in 38.962214405s.", 38.962214405),
        ("Please try again in 23m58.56s. Need more tokens?", 23 * 60 + 58.56),
        ("try again in 1m0.363s", 60.363),
        ("Please retry after 86400 seconds.", 86400.0),
        ("or try again in 5 days 22 hours 11 minutes.", 5 * 86400 + 22 * 3600 + 11 * 60),
        ("try again in 2 days, 3 hours and 4 minutes", 2 * 86400 + 3 * 3600 + 4 * 60),
        ("Please try again in 20ms.", 0.02),
        ("Retrying in 1 seconds… (attempt 1/10)", None),  # the CLI's own backoff, no wait asked
        ("please wait before trying again", None),
    ],
)
def test_a_wait_is_read_in_every_form_the_providers_write_it(
    text: str, seconds: float | None
) -> None:
    from agent_harness.models.limits import stated_wait

    assert stated_wait(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "line",
    [
        "You've hit your limit · resets 13pm (UTC)",  # no clock shows it
        "You've hit your limit · resets 3:99pm (UTC)",
        "You've hit your limit · resets Feb 30, 3pm (UTC)",
        "You've hit your limit · resets 3pm (Mars/Olympus_Mons)",  # a zone not known here
    ],
)
def test_a_reset_that_cannot_be_read_is_a_window_without_one_not_a_guess(line: str) -> None:
    found = classify_agent_output("claude", [line], now=NOW)
    assert found is not None and found.kind is FailureKind.WINDOW
    assert found.reset_at is None
    # ... so a run waits the default for a window, not a guessed time, nor a minute.
    again = agent_wait_until(found, NOW, random.Random(0)) - NOW
    assert 900.0 <= again <= 990.0


def test_a_reset_with_no_zone_is_on_this_machines_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        found = classify_agent_output("claude", ["5-hour limit reached ∙ resets 3pm"], now=NOW)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert found is not None and found.reset_at == at(2026, 1, 1, 15, 0, "America/New_York")


def test_a_reset_in_a_fixed_offset_is_read() -> None:
    found = classify_agent_output("claude", ["You've hit your limit · resets 8pm (UTC+2)"], now=NOW)
    assert found is not None and found.reset_at == at(2026, 1, 1, 18, 0)


def test_a_reset_date_the_cli_wrote_in_words_is_when_the_window_reopens() -> None:
    line = json.dumps(
        {
            "type": "turn.failed",
            "error": {
                "message": "You've hit your usage limit. Try again at Jan 3rd, 2026 1:36 PM."
            },
        }
    )
    found = classify_agent_output("codex", [line], now=NOW)
    assert found is not None and found.kind is FailureKind.WINDOW
    assert found.reset_at == datetime(2026, 1, 3, 13, 36).timestamp()  # this machine's clock


def test_a_reset_already_past_waits_the_default_window_not_nothing() -> None:
    window = Failure(FailureKind.WINDOW, "codex", None, "spent", reset_at=NOW - 3600)
    assert 900.0 <= agent_wait_until(window, NOW, random.Random(0)) - NOW <= 990.0


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":"NaN"}}',
        '{"type":"error","code":"usage_limit_reached","message":"x","resets_at":"Infinity"}',
        '{"type":"error","error":{"name":"APIError","data":{"message":"slow down",'
        '"statusCode":429,"responseHeaders":{"retry-after":"1e400"}}}}',
    ],
)
def test_numbers_that_are_no_moment_give_no_reset_and_no_crash(line: str) -> None:
    agent = "opencode" if "APIError" in line else "claude"
    found = classify_agent_output(agent, [line], now=NOW)
    assert found is not None and found.reset_at is None
    assert found.retry_after is None


@pytest.mark.parametrize(
    ("agent", "line", "kind"),
    [
        (
            "claude",
            '{"type":"result","is_error":true,"api_error_status":"429","result":"API Error"}',
            FailureKind.BURST,
        ),
        (
            "opencode",
            '{"type":"error","error":{"name":"APIError","data":{"message":"m","statusCode":"401"}}}',
            FailureKind.AUTH,
        ),
    ],
)
def test_a_status_given_as_digits_in_a_string_is_still_the_status(
    agent: str, line: str, kind: FailureKind
) -> None:
    found = classify_agent_output(agent, [line], now=NOW)
    assert found is not None and found.kind is kind


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ('API Error: 500 {"type":"error","error":{"type":"api_error"}}', FailureKind.SERVER),
        ("API Error (429 Too many tokens, please wait before trying again.)", FailureKind.BURST),
        ("API Error: 403 The security token included in the request is invalid.", FailureKind.AUTH),
        (
            'API Error: 402 {"error":{"message":"This request requires more credits"}}',
            FailureKind.CAP,
        ),
    ],
)
def test_claude_codes_plain_text_errors_are_read_by_their_status(
    line: str, kind: FailureKind
) -> None:
    found = classify_agent_output("claude", [line], now=NOW)
    assert found is not None and found.kind is kind


def test_a_reset_later_the_same_day_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    line = json.dumps(
        {
            "type": "turn.failed",
            "error": {"message": "You've hit your usage limit. Upgrade or try again at 8:14 PM."},
        }
    )
    try:
        found = classify_agent_output("codex", [line], now=NOW)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert found is not None and found.kind is FailureKind.WINDOW
    assert found.reset_at == at(2026, 1, 1, 20, 14)


def test_the_models_plans_and_commands_in_codex_events_are_no_limit() -> None:
    todo = {"type": "item.updated", "item": {"type": "todo_list", "items": [
        {"text": "Enforce 1000 requests per day per user", "completed": False}]}}  # fmt: skip
    command = {"type": "item.started", "item": {"type": "command_execution",
               "command": "grep -rn budget_exceeded src/"}}  # fmt: skip
    lines = [json.dumps(todo), json.dumps(command), '{"type":"turn.completed"}']
    assert classify_agent_output("codex", lines, now=NOW, exit_code=0) is None
    # ... nor a custom agent's own words about the feature it built.
    said = ["Added a budget_exceeded error code and a 100 requests per day limit per user."]
    assert classify_agent_output("mytool", said, now=NOW) is None
