"""Codex's session logs: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`.

Usage is read from `token_count` events, whose `total_token_usage` is the session's running
total: each record is the growth of that total since the previous one, never the sum of the
per-turn figures on top of it. The model is the one the latest `turn_context` named. OpenAI's
`input_tokens` already includes `cached_input_tokens`.
"""

from __future__ import annotations

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
from agent_harness.audit.pricing import Usage

_FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")


def default_root() -> Path:
    return env_path("CODEX_HOME", "sessions") or Path.home() / ".codex" / "sessions"


class _Session:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.id = path.stem
        self.cwd: str | None = None
        self.model: str | None = None
        self.totals = dict.fromkeys(_FIELDS, 0)


def read(path: Path) -> LogRead:
    """Usage records of one session log; unreadable lines are reported with their number."""
    session = _Session(path)
    recognised = False

    def each(line: Any, number: int, out: LogRead) -> None:
        nonlocal recognised
        if not isinstance(line, dict) or not isinstance(line.get("payload"), dict):
            return
        kind, payload = line.get("type"), line["payload"]
        if kind == "session_meta":
            recognised = True
            session.id = str(payload.get("id") or session.id)
            session.cwd = _text(payload.get("cwd"))
        elif kind == "turn_context":
            recognised = True
            session.model = _text(payload.get("model")) or session.model
            session.cwd = _text(payload.get("cwd")) or session.cwd
        elif kind == "event_msg" and payload.get("type") == "token_count":
            found = _growth(session, payload, iso_ts(line.get("timestamp")), number)
            if found is not None:
                out.usages.append(found)

    out = read_lines(path, each)
    if not recognised:
        out.skipped.append(
            Skipped(str(path), "not a Codex session log (no session_meta or turn_context line)")
        )
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _growth(
    session: _Session, payload: dict[str, Any], ts: float | None, number: int
) -> LogUsage | None:
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict) or ts is None:
        return None
    now = {name: token_count(total.get(name)) for name in _FIELDS}
    grew = {name: now[name] - session.totals[name] for name in _FIELDS}
    if min(grew.values()) < 0:
        grew = now  # the total fell: it counts again from zero, and all of it is new
    session.totals = now
    if not any(grew.values()):
        return None
    return LogUsage(
        source_id=f"codex:{session.id}:{number}",
        ts=ts,
        session=session.id,
        cwd=session.cwd,
        vendor="openai",
        model=session.model,
        usage=Usage(
            tokens_in=grew["input_tokens"],
            tokens_out=grew["output_tokens"],
            cache_read=grew["cached_input_tokens"],
            cache_write=grew["cache_write_input_tokens"],
        ),
    )
