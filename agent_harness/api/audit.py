"""/api/audit: the audited answers (health, cost, delivery, rollups, events, baselines) and the
three writes (a baseline, recording the work log now, maintenance), over `agent_harness.audit`.

The audit database is `serve --audit-db`, else audit.sqlite beside the work database, opened
per request. The writes follow the API's one rule: a monitoring server changes nothing, so
it answers them 409, although they touch only the audit database (see DEPLOYMENT.md).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BeforeValidator

from agent_harness.api.context import ApiContext, AuditNotRecorded, context
from agent_harness.api.errors import AUTH, BAD, BODY, NO_AUDIT, REFUSED
from agent_harness.api.schemas import (
    KIND_PATTERN,
    BaselineIn,
    BaselinesOut,
    ReconcileOut,
    RollupsOut,
)
from agent_harness.audit import baselines as audit_baselines
from agent_harness.audit import cost as audit_cost
from agent_harness.audit import delivery as audit_delivery
from agent_harness.audit import health as audit_health
from agent_harness.audit import history, maintenance
from agent_harness.errors import UsageError
from agent_harness.queue.items import require_project
from agent_harness.queue.projects import ITEM_PATTERN, PROJECT_PATTERN
from agent_harness.store.database import Store

router = APIRouter(prefix="/api/audit", tags=["audit"], responses={**AUTH, **NO_AUDIT})

Ctx = Annotated[ApiContext, Depends(context)]
ProjectFilter = Annotated[
    str | None, Query(pattern=PROJECT_PATTERN, description="Only this project (owner/repo:key).")
]


def _written_day(value: object) -> object:
    """A day as the schema says it (YYYY-MM-DD), not a count of seconds, which pydantic would
    otherwise read as a time (`until=0` was 1970-01-01)."""
    if isinstance(value, str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("write a day as YYYY-MM-DD")
    return value


Day = Annotated[date | None, BeforeValidator(_written_day)]
Since = Annotated[Day, Query(description="First UTC day, YYYY-MM-DD.")]
Until = Annotated[Day, Query(description="Last UTC day (inclusive), YYYY-MM-DD.")]


def _known(ctx: ApiContext, audit: Store, project: str | None) -> str | None:
    """The project filter, refused (404) when neither the audit nor the work database has
    heard of it: an empty answer would read as a project that cost nothing, not a typo."""
    if project is None or history.holds_project(audit, project):
        return project
    return require_project(ctx.store, project)


def _day(value: date | None) -> str | None:
    return None if value is None else value.isoformat()


def _days(since: date | None, until: date | None) -> tuple[str | None, str | None]:
    """The range asked for, refused when it ends before it starts (an empty answer would
    read as a quiet period, not a mistake)."""
    if since is not None and until is not None and since > until:
        raise UsageError(f"since ({since.isoformat()}) is after until ({until.isoformat()})")
    return _day(since), _day(until)


@router.get("/health", summary="Is anything being recorded? Lag, drops, last ingest, problems")
def health(ctx: Ctx) -> audit_health.AuditHealth:
    """`ok` is false when something below is a problem (answered 200 all the same)."""
    with ctx.open_audit(must_exist=True) as audit:
        return audit_health.health(audit, ctx.store)


@router.get(
    "/cost", summary="Spend by project, role, model and day; unknown price is null", responses=BAD
)
def cost(
    ctx: Ctx, project: ProjectFilter = None, since: Since = None, until: Until = None
) -> audit_cost.CostReport:
    """A call with no known price is counted in `unknown_calls` with its reason, never as $0."""
    with ctx.open_audit(must_exist=True) as audit:
        first, last = _days(since, until)
        project = _known(ctx, audit, project)
        return audit_cost.cost(audit, project=project, since=first, until=last)


@router.get(
    "/delivery",
    summary="Merged, closed and reverted per day; how fast; review verdicts",
    responses=BAD,
)
def delivery(
    ctx: Ctx, project: ProjectFilter = None, since: Since = None, until: Until = None
) -> audit_delivery.DeliveryReport:
    with ctx.open_audit(must_exist=True) as audit:
        first, last = _days(since, until)
        project = _known(ctx, audit, project)
        return audit_delivery.delivery(audit, project=project, since=first, until=last)


@router.get("/rollups", summary="The daily rollups maintenance made (kept forever)", responses=BAD)
def rollups(ctx: Ctx, since: Since = None, until: Until = None) -> RollupsOut:
    with ctx.open_audit(must_exist=True) as audit:
        first, last = _days(since, until)
        return RollupsOut(days=maintenance.rollups(audit, since=first, until=last))


@router.get("/events", summary="Raw audit rows after a row id, oldest first (page by id)")
def events(
    ctx: Ctx,
    after: Annotated[int, Query(ge=0, le=2**62, description="Last audit row id seen.")] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000, description="Page size.")] = 100,
    project: ProjectFilter = None,
    item: Annotated[str | None, Query(pattern=ITEM_PATTERN, description="Only this item.")] = None,
    kind: Annotated[
        str | None, Query(pattern=KIND_PATTERN, description="Only this kind of event.")
    ] = None,
) -> history.EventsPage:
    with ctx.open_audit(must_exist=True) as audit:
        project = _known(ctx, audit, project)
        return history.events(
            audit, after=after, limit=limit, project=project, item=item, kind=kind
        )


@router.get("/baselines", summary="Recorded baselines against the measured delivery and cost")
def baselines(ctx: Ctx, project: ProjectFilter = None) -> BaselinesOut:
    with ctx.open_audit(must_exist=True) as audit:
        project = _known(ctx, audit, project)
        return BaselinesOut(baselines=audit_baselines.baselines(audit, project=project))


@router.post(
    "/baselines",
    status_code=201,
    summary="Record a baseline; immutable, so a label already recorded is 409",
    responses={**BODY, **REFUSED},
)
def record_baseline(body: BaselineIn, ctx: Ctx) -> audit_baselines.Baseline:
    ctx.writable("recording a baseline")
    with ctx.open_audit(must_exist=False) as audit:
        return audit_baselines.record_baseline(audit, body.spec())


@router.post(
    "/reconcile",
    summary="Record the work log into the audit now (what `agent-harness ingest` does)",
    responses=REFUSED,
)
def reconcile(ctx: Ctx) -> ReconcileOut:
    """Reads this server's work log from the last event recorded on and appends what is new;
    again adds nothing twice. It touches no tracker: this is not `agent-harness reconcile`.
    When the audit cannot be written the drop is counted (`audit health`) and this is 503."""
    from agent_harness.audit.observe import observe

    ctx.writable("recording the work log into the audit")
    outcome = observe(ctx.store, ctx.audit_target())
    if isinstance(outcome, str):
        raise AuditNotRecorded(f"audit: not recorded ({outcome}); counted as a drop")
    return ReconcileOut.of(outcome)


@router.post(
    "/maintenance",
    summary="Roll complete UTC days up; thin covered raw rows past retention",
    responses=REFUSED,
)
def maintain(
    ctx: Ctx,
    retention_days: Annotated[
        float,
        Query(ge=0, le=36_500, description="Thin raw rows older than this many days."),
    ] = maintenance.DEFAULT_RETENTION_DAYS,
) -> maintenance.MaintenanceReport:
    """No audited answer changes: what is thinned is read from the rollups from then on."""
    ctx.writable("audit maintenance")
    with ctx.open_audit(must_exist=True) as audit:
        return maintenance.maintain(audit, now=ctx.store.clock(), retention_days=retention_days)
