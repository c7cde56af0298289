"""/api/control: pause, drain or resume a project's workers (every project's when none is
named), and read what was asked and what the running fleet reports. Work in flight is never
interrupted; a fleet follows within one poll (`agent_harness.queue.control`)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import AUTH, BAD, BODY, MISSING, REFUSED
from agent_harness.queue import control
from agent_harness.queue.control import VERBS, Control
from agent_harness.queue.projects import PROJECT_PATTERN

router = APIRouter(prefix="/api/control", tags=["control"], responses=AUTH)

Ctx = Annotated[ApiContext, Depends(context)]


class ControlList(BaseModel):
    """Each project's control: asked state, and its running pool's last report."""

    model_config = ConfigDict(extra="forbid")

    controls: list[Control] = Field(description="One per project, sorted by project.")


class ControlAsk(BaseModel):
    """What to ask of the workers."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["pause", "drain", "resume"] = Field(
        description="pause: claim nothing new; drain: finish what is held, then stop; resume."
    )
    project: str | None = Field(
        default=None,
        pattern=PROJECT_PATTERN,
        description="owner/repo:plankey; null: every project a run works now (a resume also "
        "every project still asked to pause or drain). With none running, a 400.",
    )


@router.get(
    "",
    summary="What was asked of each project's workers, and what they report",
    responses={**BAD, **MISSING},
)
def get_control(
    ctx: Ctx,
    project: Annotated[
        str | None, Query(pattern=PROJECT_PATTERN, description="Only this project.")
    ] = None,
) -> ControlList:
    return ControlList(controls=control.get_control(ctx.store, project))


@router.post(
    "",
    summary="Pause, drain or resume (supervised mode); never interrupts work in flight",
    responses={**BAD, **BODY, **MISSING, **REFUSED},
)
def set_control(body: ControlAsk, ctx: Ctx) -> ControlList:
    """Each change is a `control` event of its project, so a monitoring server answers 409."""
    ctx.writable(body.action)
    asked = control.set_control(ctx.store, VERBS[body.action], body.project, by="api")
    return ControlList(controls=asked)
