"""/api/work: a project's queue in one call, one item with its events and session, adding items
and retrying one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from fastapi import Path as PathParam

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import AUTH, BAD, BODY, MISSING, REFUSED
from agent_harness.api.schemas import AddWork, AddWorkOut, ItemDetail, RetryOut, WorkOut
from agent_harness.queue import items, projects, retries, views
from agent_harness.queue.items import ItemState
from agent_harness.queue.projects import ITEM_PATTERN, PROJECT_PATTERN

router = APIRouter(prefix="/api/work", tags=["work"], responses=AUTH)

Ctx = Annotated[ApiContext, Depends(context)]
ProjectQuery = Annotated[
    str | None,
    Query(pattern=PROJECT_PATTERN, description="owner/repo:plankey; needed when several."),
]
ItemId = Annotated[str, PathParam(pattern=ITEM_PATTERN, description="Item id, e.g. T4.")]


@router.get(
    "", summary="Backlog, counts and stale claims in one call", responses={**BAD, **MISSING}
)
def work(
    ctx: Ctx,
    project: ProjectQuery = None,
    state: Annotated[
        ItemState | None, Query(description="Page items in this state (default: not ended).")
    ] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000, description="Page start.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Page size.")] = 100,
) -> WorkOut:
    name = items.resolve_project(ctx.store, project)
    chosen = (state,) if state is not None else views.OPEN_STATES
    view = views.work_view(ctx.store, name, states=chosen, offset=offset, limit=limit)
    return WorkOut.of(view, offset)


@router.get(
    "/{item_id}", summary="One item, with its events and session link", responses={**BAD, **MISSING}
)
def item(
    item_id: ItemId,
    ctx: Ctx,
    project: ProjectQuery = None,
    limit: Annotated[int, Query(ge=1, le=5000, description="Latest events to include.")] = 1000,
) -> ItemDetail:
    name = items.resolve_project(ctx.store, project)
    return ItemDetail.of(views.item_view(ctx.store, name, item_id, limit=limit))


@router.post(
    "",
    status_code=201,
    summary="Add items to a registered project directly (supervised mode)",
    responses={
        **BAD,
        **BODY,
        **MISSING,
        **REFUSED,
        200: {"model": AddWorkOut, "description": "Every item was there already: none added."},
    },
)
def add(body: AddWork, ctx: Ctx, response: Response) -> AddWorkOut:
    """Items outside the plan file; their ids must be new (sending the same item again changes
    nothing, and is answered 200 instead of 201). The project's next pass mirrors them to
    issues and queues them with its plan."""
    ctx.writable("adding work")
    result = projects.add_items(ctx.store, body.project, [i.as_item() for i in body.items])
    if not result.added:
        response.status_code = 200
    return AddWorkOut(
        project=body.project, added=list(result.added), unchanged=list(result.unchanged)
    )


@router.post(
    "/{item_id}/retry",
    summary="Re-queue a failed, skipped, closed or reverted item (refused while claimed)",
    responses={**BAD, **MISSING, **REFUSED},
)
def retry(
    item_id: ItemId,
    ctx: Ctx,
    project: ProjectQuery = None,
    fresh: Annotated[bool, Query(description="Discard its old branch.")] = False,
) -> RetryOut:
    ctx.writable("retrying an item")
    name = items.resolve_project(ctx.store, project)
    return RetryOut(
        project=name, requeued=list(retries.retry(ctx.store, name, item_id, fresh=fresh))
    )
