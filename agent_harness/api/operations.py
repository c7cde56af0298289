"""/api/errors, /api/events and /api/summary: what a status line and a log view need."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import AUTH, MISSING
from agent_harness.api.schemas import ErrorsOut, EventOut, EventPage, SummaryOut
from agent_harness.queue import items, views
from agent_harness.queue.projects import ITEM_PATTERN, PROJECT_PATTERN

router = APIRouter(prefix="/api", tags=["operations"], responses=AUTH)

Ctx = Annotated[ApiContext, Depends(context)]
ProjectFilter = Annotated[
    str | None, Query(pattern=PROJECT_PATTERN, description="Only this project (owner/repo:key).")
]


@router.get("/errors", summary="Rate limits and failures by class", responses=MISSING)
def errors(
    ctx: Ctx,
    project: ProjectFilter = None,
    window: Annotated[
        int, Query(ge=1, le=10_000_000, description="How many of the latest events to read.")
    ] = 100_000,
) -> ErrorsOut:
    if project is not None:
        items.require_project(ctx.store, project)
    return ErrorsOut.of(views.errors_view(ctx.store, project=project, window=window))


@router.get(
    "/events",
    summary="Events after a row id, oldest first (page by id, not time)",
    responses=MISSING,
)
def events(
    ctx: Ctx,
    after: Annotated[int, Query(ge=0, le=2**62, description="Last id already seen.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size.")] = 100,
    project: ProjectFilter = None,
    item: Annotated[
        str | None, Query(pattern=ITEM_PATTERN, description="Only this item's events.")
    ] = None,
) -> EventPage:
    if project is not None:
        items.require_project(ctx.store, project)
    page = ctx.store.events(after, limit, project=project, item=item)
    return EventPage(
        events=[EventOut.of(e) for e in page], next_after=page[-1].id if page else after
    )


@router.get("/summary", summary="Enough for a status line")
def summary(ctx: Ctx) -> SummaryOut:
    return SummaryOut.of(views.summary(ctx.store), ctx.mode, ctx.running())
