"""`audit events`: the raw history, paged by row id (ids rise in commit order)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from agent_harness.audit.coverage import coverage
from agent_harness.store.database import Store


class AuditEvent(BaseModel):
    id: int = Field(description="Audit row id; page by passing the last one back as `after`.")
    ts: float
    day: str
    project: str
    item: str | None
    kind: str
    source: str = Field(description="work, jsonl, claude-code or codex.")
    payload: dict[str, Any]
    role: str | None = None
    model: str | None = None
    cost_usd: float | None = None
    cost_reason: str | None = None
    price_version: str | None = None
    reported_cost_usd: float | None = None


class EventsPage(BaseModel):
    events: list[AuditEvent]
    next_after: int | None = Field(description="Pass as `after` for the next page; null at end.")
    thinned_before: str | None = Field(
        description="Raw rows of days before this were thinned; their rollups remain."
    )


def events(
    audit: Store,
    *,
    after: int = 0,
    limit: int = 100,
    project: str | None = None,
    item: str | None = None,
    kind: str | None = None,
) -> EventsPage:
    """Raw audit rows with id > `after`, oldest first."""
    sql = (
        "SELECT id, ts, day, project, item, kind, source, payload, role, model, cost_usd, "
        "cost_reason, price_version, reported_cost_usd FROM audit_events WHERE id > ?"
    )
    params: list[Any] = [after]
    for column, value in (("project", project), ("item", item), ("kind", kind)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    sql += " ORDER BY id LIMIT ?"
    params.append(limit)
    with audit.transaction(write=False) as tx:
        rows = tx.all(sql, params)
        covered = coverage(tx)
    found = [
        AuditEvent(
            id=r[0],
            ts=r[1],
            day=r[2],
            project=r[3],
            item=r[4],
            kind=r[5],
            source=r[6],
            payload=json.loads(r[7]),
            role=r[8],
            model=r[9],
            cost_usd=r[10],
            cost_reason=r[11],
            price_version=r[12],
            reported_cost_usd=r[13],
        )
        for r in rows
    ]
    thinned = covered.thinned_before if covered.through_id else None
    return EventsPage(
        events=found,
        next_after=found[-1].id if len(found) == limit else None,
        thinned_before=thinned if thinned and thinned > "0000-00-00" else None,
    )
