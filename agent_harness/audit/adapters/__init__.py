"""Opt-in readers of other tools' logs, into the same usage records as the harness's own.

Each reader turns one log file into `LogUsage` records (and the lines it could not read); this
module finds the files, attributes a session to the item whose worktree it ran in, prices the
usage and hands the rows to ingest. A file of a format no reader recognises is reported as
such, never guessed at.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_harness.audit.ingest import IngestReport, Skipped, write_rows
from agent_harness.audit.pricing import MAX_TOKENS, Extra, Usage, counts_fit, extra_fits
from agent_harness.audit.records import AuditRow, UsageFacts, audit_row, priced
from agent_harness.errors import UNREADABLE_JSON, UsageError, read_json
from agent_harness.secrets.process import process_env
from agent_harness.store.database import Store


@dataclass(frozen=True)
class LogUsage:
    """One model call (Claude Code) or one step of a session's cumulative total (Codex)."""

    source_id: str
    ts: float
    session: str
    cwd: str | None
    vendor: str
    model: str | None
    usage: Usage
    extra: Extra | None = None  # what the call reported beyond token counts, priced apart


@dataclass
class LogRead:
    usages: list[LogUsage]
    skipped: list[Skipped]
    held: int = 0  # records held back for the next ingest (a message still being written)


Reader = Callable[[Path], LogRead]

# What a record read from another tool's log may hold to be kept: a count no call reaches
# would overflow the database's integers (`counts_fit`), an instant past 9999 breaks every
# date shown, and one more than a day ahead of this machine's clock is no call made yet.
FUTURE_SLACK_S = 86_400.0
_LATEST_TS = 253_402_128_000.0  # 9999-12-30, a day short of the calendar's end in any zone
_UNREADABLE = (ValueError, TypeError, OverflowError, AttributeError)


def misfit(found: LogUsage) -> str | None:
    """Why `found` cannot be kept as it is (a hostile or corrupt log line), or None."""
    extra_unfit = found.extra is not None and not extra_fits(found.extra)
    if not counts_fit(found.usage) or None in found.usage[:2] or extra_unfit:
        return f"token counts must be whole numbers from 0 to {MAX_TOKENS:,}"
    if not 0 <= found.ts <= _LATEST_TS:
        return "its time is before 1970 or past the year 9999"
    if found.ts > time.time() + FUTURE_SLACK_S:
        return "its time is more than a day ahead of this machine's clock"
    if not isinstance(found.model, str | None) or not isinstance(found.cwd, str | None):
        return "its model or working directory is not text"
    return None


def read_lines(path: Path, each: Callable[[Any, int, LogRead], None]) -> LogRead:
    """Run `each(line, number, out)` on every JSON line of `path`; a line that is not JSON, or
    whose fields are not what the format says (a count of "abc", a model that is an object),
    is reported with its number instead of ending the read, and so is a record `misfit`
    refuses."""
    out = LogRead([], [])
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            try:
                line = read_json(raw)
            except UNREADABLE_JSON:
                out.skipped.append(Skipped(where, "not JSON"))
                continue
            kept = len(out.usages)
            try:
                each(line, number, out)
            except _UNREADABLE as exc:
                out.skipped.append(Skipped(where, f"unreadable: {_said(exc)}"))
                continue
            for found in out.usages[kept:]:
                why = misfit(found)
                if why is not None:
                    out.usages.remove(found)
                    out.skipped.append(Skipped(where, why))
    return out


def _said(exc: Exception) -> str:
    """What was wrong with a line, in a few words: the reader's own words where it gave some."""
    text = str(exc).strip()
    return text[:200] if isinstance(exc, LineUnfit) and text else type(exc).__name__


class LineUnfit(ValueError):
    """A field of a log line is not what its format says (a count that is no whole number)."""


def token_count(value: Any) -> int:
    """A token count as a log wrote it: a whole number, or nothing (0); anything else is the
    line's fault, reported with it, never read as 0."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise LineUnfit(f"a token count that is not a whole number: {str(value)[:40]!r}")
    return value


def _readers() -> dict[str, tuple[Reader, Callable[[], Path]]]:
    from agent_harness.audit.adapters import claude_code, codex

    return {
        "claude-code": (claude_code.read, claude_code.default_root),
        "codex": (codex.read, codex.default_root),
    }


def env_path(name: str, *parts: str) -> Path | None:
    value = process_env().get(name)
    return Path(value).joinpath(*parts) if value else None


def iso_ts(text: Any) -> float | None:
    """Epoch seconds of an ISO 8601 time as the CLIs write it (`...Z`), or None."""
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if when.tzinfo is None:  # no zone written: UTC, as the CLIs write, not this machine's
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    except (ValueError, OverflowError):  # year 0, or past 9999 once made UTC
        return None


def log_files(root: Path, skipped: list[Skipped]) -> Iterator[Path]:
    """The log files under `root`; one that is no regular file (a link to nothing, a folder
    or a pipe so named, which would block the read) is named in `skipped` instead."""
    if root.is_file():
        yield root
    elif root.is_dir():
        for path in sorted(root.rglob("*.jsonl")):
            try:
                regular = stat.S_ISREG(path.stat().st_mode)
            except OSError as exc:
                skipped.append(Skipped(str(path), f"cannot be read: {exc.strerror or exc}"))
                continue
            if regular:
                yield path
            else:
                skipped.append(Skipped(str(path), "not a regular file"))


def worktrees(audit: Store) -> dict[str, tuple[str, str]]:
    """Each item worktree the audit knows of (from worktree and agent_started events)."""
    with audit.transaction(write=False) as tx:
        rows = tx.all(
            "SELECT project, item, payload FROM audit_events WHERE item IS NOT NULL AND kind "
            "IN ('worktree', 'agent_started')"
        )
    found: dict[str, tuple[str, str]] = {}
    for project, item, payload in rows:
        data = json.loads(payload)
        place = data.get("path") or data.get("worktree")
        if isinstance(place, str) and place:
            found[str(Path(place))] = (str(project), str(item))
    return found


def to_row(tool: str, found: LogUsage, places: dict[str, tuple[str, str]]) -> AuditRow:
    place = places.get(str(Path(found.cwd))) if found.cwd else None
    project, item = place if place else (None, None)
    facts = UsageFacts(
        role="agent",
        vendor=found.vendor,
        model=found.model,
        usage_source=tool,
        usage=found.usage,
    )
    return audit_row(
        source_id=found.source_id,
        source=tool,
        ts=found.ts,
        project=project or f"local:{found.cwd or '?'}",
        item=item,
        kind="agent.usage",
        payload=json.dumps(
            {"session": found.session, "cwd": found.cwd, "model": found.model}, sort_keys=True
        ),
        facts=facts,
        price=priced(facts, found.ts, found.extra),
    )


def ingest_logs(audit: Store, tool: str, path: Path | None) -> IngestReport:
    """Read `tool`'s logs under `path` (or their usual place) into the audit, each record once."""
    readers = _readers()
    if tool not in readers:
        raise UsageError(f"no reader for {tool!r}: use claude-code or codex")
    read, default_root = readers[tool]
    root = path or default_root()
    if not root.exists():
        raise UsageError(f"{root} does not exist: nothing of {tool} to read there")
    places = worktrees(audit)
    report = IngestReport(source=tool)
    skipped: list[Skipped] = []
    for file in log_files(root, skipped):
        try:
            found = read(file)
        except OSError as exc:  # gone, or no longer readable, since it was listed
            skipped.append(Skipped(str(file), f"cannot be read: {exc.strerror or exc}"))
            continue
        rows = [to_row(tool, usage, places) for usage in found.usages]
        written = write_rows(audit, tool, rows, 0, ())
        report.added += written.added
        report.duplicates += written.duplicates
        report.held += found.held
        skipped.extend([*found.skipped, *written.skipped])  # a thinned day's, say
    # Recorded once, in the run's last record, always written: every file is read whole each
    # time, so `audit health` takes the last record's count as the lines unreadable now.
    report.absorb(write_rows(audit, tool, [], 0, skipped, record=True))
    return report
