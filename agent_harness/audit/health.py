"""`audit health`: is anything being recorded? The last event, the lag behind the work log,
drops, bad lines and the last ingest, with the problems in words.

A fleet running unaudited looks exactly like one running audited, since observation never
stops work; this answer is the only place the difference shows.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from agent_harness.audit.database import unprotected
from agent_harness.audit.ingest import high_water, log_id
from agent_harness.store.database import Store

DROPS_KEY = "audit.drops"


class Drops(BaseModel):
    count: int = Field(description="Times the audit database could not be written.")
    last_at: float | None = Field(
        default=None, description="When the last drop happened, epoch seconds; null if none."
    )
    last_reason: str | None = Field(
        default=None, description="Why the last drop happened; null if none."
    )


class AuditHealth(BaseModel):
    """The answer to "is anything being recorded?"."""

    ok: bool = Field(description="True when nothing below is a problem.")
    problems: list[str] = Field(description="What is wrong, in words.")
    last_event_id: int | None = Field(description="Newest raw audit row; null once thinned.")
    last_event_ts: float | None = Field(description="When the newest event ingested happened.")
    last_event_kind: str | None = Field(
        description="Kind of the newest raw audit row; null if none."
    )
    last_ingest_at: float | None = Field(
        description="When an ingest last ran, epoch seconds; null if never."
    )
    last_ingest_added: int | None = Field(description="Rows the last ingest added; null if never.")
    work_events_waiting: int | None = Field(
        description="Work-log events not yet in the audit; null without the work database."
    )
    lag_s: float | None = Field(
        description="How far the audit is behind the work log, in the events' own time: the "
        "newest work event's time less that of the last one recorded; null without it."
    )
    skipped_lines: int = Field(description="Lines and records ingest could not read, in all.")
    drops: Drops = Field(
        description="Times recording into the audit failed (counted in the work database)."
    )
    protected: bool = Field(description="The append-only triggers are intact.")
    last_maintenance_at: float | None = Field(
        description="When maintenance last ran, epoch seconds; null if never."
    )


def count_drop(work: Store, reason: str) -> None:
    """Record, in the work database, that the audit could not be written just now."""
    with work.transaction() as tx:
        row = tx.one("SELECT value FROM meta WHERE key = ?", (DROPS_KEY,))
        count = int(json.loads(str(row[0])).get("count", 0)) if row else 0
        value = json.dumps({"count": count + 1, "last_at": work.clock(), "last_reason": reason})
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (DROPS_KEY, value),
        )


def drops(work: Store) -> Drops:
    found = work.get_meta(DROPS_KEY)
    return Drops.model_validate_json(found) if found else Drops(count=0)


def _behind(audit: Store, work: Store) -> tuple[int, float]:
    """Work-log events not yet recorded, and the time between the newest and the last recorded."""
    ident = log_id(work)
    mark = high_water(audit, f"work:{ident}") if ident else 0
    with work.transaction(write=False) as tx:
        after, params = tx.dialect.after_cursor(mark)
        top = tx.one(f"SELECT COUNT(*), MAX(ts) FROM events WHERE {after}", params)
        seen = tx.one("SELECT ts FROM events WHERE id <= ? ORDER BY id DESC LIMIT 1", (mark,))
        first = tx.one("SELECT ts FROM events ORDER BY id LIMIT 1")
    if top is None or not top[0]:
        return 0, 0.0
    behind, newest_ts = int(top[0]), float(top[1])
    since = float(seen[0]) if seen else float(first[0]) if first else newest_ts
    return behind, max(0.0, newest_ts - since)


# Sources read whole on every ingest (other tools' logs, `ingest --from`): their last run says
# how many lines cannot be read now, and adding their runs would count one bad line once per
# ingest, for ever. Every other source reads only what is new, so its runs add up.
REREAD_SOURCES = ("claude-code", "codex")
_SKIPPED = (
    "SELECT COALESCE(SUM(skipped), 0) FROM ingest_runs WHERE source NOT IN (?, ?) "
    "OR id IN (SELECT MAX(id) FROM ingest_runs WHERE source IN (?, ?) GROUP BY source)"
)


def health(
    audit: Store, work: Store | None = None, *, stale_after_s: float = 3600.0
) -> AuditHealth:
    """How the record stands; `work` (the work database, if it still exists) gives the lag."""
    with audit.transaction(write=False) as tx:
        last = tx.one("SELECT id, ts, kind FROM audit_events ORDER BY id DESC LIMIT 1")
        seen = tx.one(
            "SELECT last_ts, last_kind FROM ingest_runs WHERE last_ts IS NOT NULL "
            "ORDER BY last_ts DESC LIMIT 1"
        )
        run = tx.one("SELECT finished, added FROM ingest_runs ORDER BY id DESC LIMIT 1")
        skipped = tx.one(_SKIPPED, REREAD_SOURCES + REREAD_SOURCES)
        maintained = tx.one("SELECT MAX(ran_at) FROM maintenance_runs")
    missing = unprotected(audit)
    problems = list(missing)
    waiting: int | None = None
    lag: float | None = None
    dropped = Drops(count=0)
    if work is not None:
        dropped = drops(work)
        waiting, lag = _behind(audit, work)
    now = audit.clock()
    if run is None:
        problems.append("nothing has ever been ingested")
    elif waiting and now - float(run[0]) > stale_after_s:
        problems.append(
            f"{waiting} work events wait and the last ingest was "
            f"{int((now - float(run[0])) // 60)} minutes ago"
        )
    if dropped.count:
        problems.append(
            f"{dropped.count} time(s) the audit could not be written: {dropped.last_reason}"
        )
    skipped_total = int(skipped[0]) if skipped else 0
    if skipped_total:
        problems.append(f"{skipped_total} lines or records could not be read")
    return AuditHealth(
        ok=not problems,
        problems=problems,
        last_event_id=int(last[0]) if last else None,
        last_event_ts=float(seen[0]) if seen else None,
        last_event_kind=str(seen[1]) if seen else None,
        last_ingest_at=float(run[0]) if run else None,
        last_ingest_added=int(run[1]) if run else None,
        work_events_waiting=waiting,
        lag_s=lag,
        skipped_lines=skipped_total,
        drops=dropped,
        protected=not missing,
        last_maintenance_at=float(maintained[0]) if maintained and maintained[0] else None,
    )
