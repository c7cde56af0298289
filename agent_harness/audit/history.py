"""`audit events`: the raw history, paged by row id (ids rise in commit order)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from agent_harness.audit.coverage import coverage
from agent_harness.store.database import Store


class AuditEvent(BaseModel):
    id: int = Field(description="Audit row id; page by passing the last one back as `after`.")
    ts: float = Field(description="When it happened, epoch seconds.")
    day: str = Field(description="Its UTC day, YYYY-MM-DD.")
    project: str = Field(description="Project (owner/repo:key).")
    item: str | None = Field(description="Work item id; null for a project-wide event.")
    kind: str = Field(description="Kind of event (as in EVENTS.md).")
    source: str = Field(description="work, jsonl, claude-code or codex.")
    payload: dict[str, Any] = Field(description="The event as recorded.")
    role: str | None = Field(default=None, description="Role of a model call; null otherwise.")
    model: str | None = Field(default=None, description="Model of a model call; null otherwise.")
    cost_usd: float | None = Field(
        default=None, description="Priced cost of a call; null when unpriced or not a call."
    )
    cost_reason: str | None = Field(
        default=None, description="Why a call has no price; null when priced."
    )
    price_version: str | None = Field(default=None, description="The price data that priced it.")
    reported_cost_usd: float | None = Field(
        default=None, description="What the tool itself reported it cost; null if none."
    )


class EventsPage(BaseModel):
    events: list[AuditEvent] = Field(description="Up to `limit` rows, oldest first.")
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


def holds_project(audit: Store, project: str) -> bool:
    """Whether the audit has recorded anything of `project`: its events, its deliveries, or
    the daily rollups kept after its raw events were thinned."""
    with audit.transaction(write=False) as tx:
        found = tx.one(
            "SELECT 1 FROM audit_events WHERE project = ? UNION ALL "
            "SELECT 1 FROM deliveries WHERE project = ? UNION ALL "
            "SELECT 1 FROM rollup_cost WHERE project = ? UNION ALL "
            "SELECT 1 FROM rollup_activity WHERE project = ? LIMIT 1",
            (project, project, project, project),
        )
    return found is not None


def recorded_projects(audit: Store) -> list[str]:
    """Every project the audit has recorded something of, in order."""
    with audit.transaction(write=False) as tx:
        rows = tx.all(
            "SELECT project FROM audit_events UNION SELECT project FROM deliveries UNION "
            "SELECT project FROM rollup_cost UNION SELECT project FROM rollup_activity "
            "ORDER BY 1"
        )
    return [str(row[0]) for row in rows]
