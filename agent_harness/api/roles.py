"""/api/roles: which route serves each model role of a project, and re-routing one live: the
running pass's next model call takes the new route, and it is kept for every later pass (and
across restarts) without a redeploy (`agent_harness.models.roles`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import AUTH, BAD, BODY, MISSING, REFUSED
from agent_harness.api.schemas import MODEL_PATTERN, ROLE_PATTERN
from agent_harness.queue.projects import PROJECT_PATTERN

router = APIRouter(prefix="/api/roles", tags=["roles"], responses=AUTH)

Ctx = Annotated[ApiContext, Depends(context)]


class RolesOut(BaseModel):
    """A registered project's model roles."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(description="owner/repo:plankey.")
    routes: dict[str, str] = Field(
        description="Role -> route: the running pass's ('vendor:model at endpoint'), else the "
        "ones set over the API and kept ('vendor:model')."
    )
    live: bool = Field(description="A pass is running: `routes` are what its calls use now.")


class RoleChange(BaseModel):
    """Route one role of a project to another model."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(pattern=PROJECT_PATTERN, description="owner/repo:plankey.")
    role: str = Field(pattern=ROLE_PATTERN, description="reviewer, implementer or planner.")
    route: str = Field(
        pattern=MODEL_PATTERN,
        description="vendor:model, e.g. anthropic:claude-sonnet-4-5.",
    )


@router.get("", summary="The route serving each model role of a project", responses=MISSING)
def get_roles(
    ctx: Ctx,
    project: Annotated[str, Query(pattern=PROJECT_PATTERN, description="owner/repo:plankey.")],
) -> RolesOut:
    routes, live = ctx.roles(project)
    return RolesOut(project=project, routes=routes, live=live)


@router.put(
    "",
    summary="Re-route a role live (supervised mode); kept across restarts",
    responses={**BAD, **BODY, **MISSING, **REFUSED},
)
def put_role(body: RoleChange, ctx: Ctx) -> RolesOut:
    """A change the run's rules refuse (a reviewer of the implementer's vendor) changes
    nothing and answers 400."""
    routes, live = ctx.writable("re-routing a role").set_role(body.project, body.role, body.route)
    return RolesOut(project=body.project, routes=routes, live=live)
