"""/api/plan: read a plan (with what could not be read) and mirror it to issues."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import (
    AUTH,
    BAD,
    BODY,
    BUSY,
    MISSING,
    REFUSED,
    UPSTREAM,
    Responses,
)
from agent_harness.api.schemas import ErrorBody, PlanParseIn, PlanParseOut, PlanSyncIn, PlanSyncOut
from agent_harness.errors import UsageError
from agent_harness.plan.markdown import parse_plan
from agent_harness.queue import projects

router = APIRouter(prefix="/api/plan", tags=["plan"], responses=AUTH)

Ctx = Annotated[ApiContext, Depends(context)]
UNREADABLE: Responses = {
    422: {"model": ErrorBody, "description": "The plan was refused (duplicates, cycles)."}
}


@router.post(
    "/parse",
    summary="A plan's items, plus what it could NOT read",
    responses={**BAD, **BODY, **MISSING, **UNREADABLE, **BUSY},
)
def parse(body: PlanParseIn, ctx: Ctx) -> PlanParseOut:
    if (body.text is None) == (body.project is None):
        raise UsageError("give exactly one of text or project")
    with ctx.parsing():
        if body.text is not None:
            plan = parse_plan(body.text, source="request")
        else:
            plan = projects.read_plan(ctx.store, str(body.project))
    return PlanParseOut(
        source=plan.source, items=list(plan.items), unread=list(plan.unread), notes=list(plan.notes)
    )


@router.post(
    "/sync",
    summary="Mirror a registered project's plan to issues; a dry run unless told otherwise",
    responses={**BAD, **BODY, **MISSING, **REFUSED, **UPSTREAM, **UNREADABLE, **BUSY},
)
def sync(body: PlanSyncIn, ctx: Ctx) -> PlanSyncOut:
    """A dry run reads the tracker and writes nothing, so a monitoring server answers it; a
    real sync needs `serve --supervise`. It reads the plan file as `parse` does, so it takes
    one of the same turns (a plan of megabytes of brackets took a minute each, four at once)."""
    if not body.dry_run:
        ctx.writable("a sync that writes")
    with ctx.parsing():
        report = ctx.sync(body.project, dry_run=body.dry_run)
    return PlanSyncOut.model_validate(report.as_json())
