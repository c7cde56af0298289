"""Claude Code's project transcripts: `~/.claude/projects/<sanitised cwd>/<session>.jsonl`
(under `CLAUDE_CONFIG_DIR` when that is set).

Each assistant line carries `message.usage` in Anthropic's terms: `input_tokens` is the
uncached part only, beside `cache_creation_input_tokens` and `cache_read_input_tokens`. A
message is written as several lines (one per content block) while it streams, and its
`output_tokens` grows to the last of them, so records are keyed by message id and request id
and counted once, at the line that counts the most (by message id within the session when a
line has no request id, as from a local stand-in of the API). A message still streaming (the
file's last, no line of it with a stop reason, the file written in the last few minutes) is
left for the next ingest: rows are never changed, so a partial count kept now would stay.
Synthetic messages (the CLI's own notices, model `<synthetic>`) are no model call and are
skipped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agent_harness.audit.adapters import (
    LogRead,
    LogUsage,
    env_path,
    iso_ts,
    read_lines,
    token_count,
)
from agent_harness.audit.ingest import Skipped
from agent_harness.audit.pricing import Extra, Usage

SYNTHETIC = "<synthetic>"


def default_root() -> Path:
    return env_path("CLAUDE_CONFIG_DIR", "projects") or Path.home() / ".claude" / "projects"


# A transcript written to within this long may still be streaming its last message.
STILL_WRITING_S = 600.0


def read(path: Path) -> LogRead:
    """Usage records of one transcript; unreadable lines are reported with their number."""
    recognised = False
    finished: set[str] = set()  # messages a line of which gave a stop reason

    def each(line: Any, number: int, out: LogRead) -> None:
        nonlocal recognised
        if not isinstance(line, dict) or "sessionId" not in line or "type" not in line:
            return
        recognised = True
        found = _usage(line, path, number, out.skipped)
        if found is not None:
            out.usages.append(found)
            if line["message"].get("stop_reason") is not None:
                finished.add(found.source_id)

    out = read_lines(path, each)
    if not recognised:
        out.skipped.append(
            Skipped(str(path), "not a Claude Code transcript (no line has a type and sessionId)")
        )
    out.usages = _most_counted(out.usages)
    if out.usages and out.usages[-1].source_id not in finished and _recent(path):
        out.usages.pop()  # still streaming: the next ingest finds it whole
        out.held += 1
    return out


def _most_counted(usages: list[LogUsage]) -> list[LogUsage]:
    """One record per call, the line that counts the most output (the last of a streamed
    message; a resumed session's copy of it counts no more), in the order calls first
    appeared."""
    best: dict[str, LogUsage] = {}
    for found in usages:
        kept = best.get(found.source_id)
        if kept is None or (found.usage.tokens_out or 0) >= (kept.usage.tokens_out or 0):
            best[found.source_id] = found
    return list(best.values())


def _recent(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime < STILL_WRITING_S
    except OSError:
        return False


def _usage(
    line: dict[str, Any], path: Path, number: int, skipped: list[Skipped]
) -> LogUsage | None:
    message = line.get("message")
    if line.get("type") != "assistant" or not isinstance(message, dict):
        return None
    usage = message.get("usage")
    model = message.get("model")
    if model == SYNTHETIC or not isinstance(usage, dict):
        return None
    message_id, request_id = message.get("id"), line.get("requestId")
    ts = iso_ts(line.get("timestamp"))
    if not isinstance(message_id, str) or ts is None:
        skipped.append(Skipped(f"{path}:{number}", "an assistant message without id or timestamp"))
        return None
    session = str(line.get("sessionId"))
    # Message id + request id name one API call wherever it was copied (a resumed session
    # repeats earlier messages); without a request id, only within its own session.
    key = f"{message_id}:{request_id}" if isinstance(request_id, str) else f"{session}:{message_id}"
    fresh = token_count(usage.get("input_tokens"))
    written = token_count(usage.get("cache_creation_input_tokens"))
    read_back = token_count(usage.get("cache_read_input_tokens"))
    return LogUsage(
        source_id=f"claude-code:{key}",
        ts=ts,
        session=session,
        cwd=line.get("cwd") if isinstance(line.get("cwd"), str) else None,
        vendor="anthropic",
        model=model if isinstance(model, str) else None,
        usage=Usage(
            tokens_in=fresh + written + read_back,  # the whole prompt, as genai-prices counts it
            tokens_out=token_count(usage.get("output_tokens")),
            cache_read=read_back,
            cache_write=written,
        ),
        extra=_extra(usage),
    )


def _extra(usage: dict[str, Any]) -> Extra | None:
    """The part of the cache writes that went to the one-hour cache (`cache_creation`'s
    `ephemeral_1h_input_tokens`; the rest is the five-minute one) and the web searches the
    server ran (`server_tool_use.web_search_requests`): each has a rate of its own."""
    split, tools = usage.get("cache_creation"), usage.get("server_tool_use")
    hour = token_count(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else 0
    searches = token_count(tools.get("web_search_requests")) if isinstance(tools, dict) else 0
    return Extra(hour, searches) if hour or searches else None
