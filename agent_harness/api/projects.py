"""/api/projects: every project with counts and control state; register, start and stop one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi import Path as PathParam

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import AUTH, BODY, MISSING, REFUSED
from agent_harness.api.schemas import ErrorBody, ProjectList, ProjectOut
from agent_harness.plan.model import PLAN_KEY_PATTERN
from agent_harness.queue import projects
from agent_harness.queue.projects import NAME_PATTERN, OWNER_PATTERN, ProjectSpec

router = APIRouter(prefix="/api/projects", tags=["projects"], responses=AUTH)

Ctx = Annotated[ApiContext, Depends(context)]


def project_id(
    owner: Annotated[str, PathParam(pattern=OWNER_PATTERN, description="Repository owner.")],
    repo: Annotated[str, PathParam(pattern=NAME_PATTERN, description="Repository name.")],
    key: Annotated[str, PathParam(pattern=PLAN_KEY_PATTERN, description="Plan key.")],
    ctx: Ctx,
) -> str:
    """The project id, owner/repo:key, from the path /api/projects/{owner}/{repo}:{key}: as it
    was registered, its repository's name in any case (as registering compares them)."""
    return projects.registered_as(ctx.store, f"{owner}/{repo}:{key}")


ProjectId = Annotated[str, Depends(project_id)]
ONE = "/{owner}/{repo}:{key}"


@router.get("", summary="Every project, with counts and control state")
def list_projects(ctx: Ctx) -> ProjectList:
    return ProjectList(
        projects=[
            ProjectOut.from_overview(view, ctx.pool_error(view.id))
            for view in projects.overview(ctx.store)
        ]
    )


@router.post(
    "",
    status_code=201,
    summary="Register a project; it starts STOPPED",
    responses={
        **BODY,
        **REFUSED,
        422: {"model": ErrorBody, "description": "A path the server may not use."},
    },
)
def register(spec: ProjectSpec, ctx: Ctx) -> ProjectOut:
    """The work dir must be the top of a git clone on the server (inside `--work-root` when
    set); the plan a file inside it. Registering creates no worker: `start` does."""
    pools = ctx.writable("registering a project")
    projects.check_spec(spec, ctx.work_root)  # its paths, and one implementer, first
    pools.check_spec(spec)  # then its roles
    record = projects.register(ctx.store, spec, allowed_root=ctx.work_root)
    # Items a run queued before it was registered count too, as every later read says.
    return ProjectOut.from_overview(projects.describe(ctx.store, record.id))


@router.get(ONE, summary="One project", responses=MISSING)
def get_project(project: ProjectId, ctx: Ctx) -> ProjectOut:
    return ProjectOut.from_overview(projects.describe(ctx.store, project), ctx.pool_error(project))


@router.post(
    ONE + "/start",
    summary="Start its worker pool (supervised mode only)",
    responses={**MISSING, **REFUSED},
)
def start(project: ProjectId, ctx: Ctx) -> ProjectOut:
    """The only thing that creates workers. A monitoring server answers 409."""
    record = ctx.writable("start").start(project)
    return ProjectOut.from_overview(
        projects.describe(ctx.store, record.id), ctx.pool_error(record.id)
    )


@router.post(
    ONE + "/stop",
    summary="Stop its worker pool; work in flight is finished, never interrupted",
    responses={**MISSING, **REFUSED},
)
def stop(project: ProjectId, ctx: Ctx) -> ProjectOut:
    record = ctx.writable("stop").stop(project)
    return ProjectOut.from_overview(
        projects.describe(ctx.store, record.id), ctx.pool_error(record.id)
    )
