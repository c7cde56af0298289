"""/api/inception: a paragraph argued into an approved scope, then a PLAN.md.

Each route is one step of `inception.session`, which records it as an `inception.*` event in
the work store. A monitoring server writes nothing, so it refuses every step (409) and answers
only `GET .../plan` of a session already planned; `serve --supervise` takes them all.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Request, Response
from fastapi import Path as PathParam

from agent_harness.api.context import ApiContext, context
from agent_harness.api.errors import AUTH, BAD, BODY, Responses
from agent_harness.api.guard import HEAD_ONLY
from agent_harness.api.schemas import (
    QUESTION_PATTERN,
    SESSION_PATTERN,
    ErrorBody,
    InceptionPlanOut,
    InceptionScopeIn,
    InceptionStart,
    QuestionStep,
)
from agent_harness.inception.model import SessionView, StepRefused
from agent_harness.inception.session import InceptionSession, planner_route

router = APIRouter(prefix="/api/inception", tags=["inception"], responses=AUTH)

Ctx = Annotated[ApiContext, Depends(context)]
SessionId = Annotated[
    str, PathParam(pattern=SESSION_PATTERN, description="Session id, as POST answered it.")
]
QuestionId = Annotated[str, PathParam(pattern=QUESTION_PATTERN, description="Question id: Q1.")]


def _doc(text: str) -> dict[str, object]:
    return {"model": ErrorBody, "description": text}


MISSING: Responses = {404: _doc("No such session, or no such question in it.")}
REFUSED: Responses = {
    409: _doc(
        "Refused as the session stands (e.g. approval while a BLOCKING question is open, "
        "named in detail), or the server is monitoring only."
    )
}
PLANNER: Responses = {
    502: _doc("The planner failed: its answer did not fit twice, or its provider refused.")
}


@router.post(
    "",
    status_code=201,
    summary="Start a session from a paragraph (supervised mode)",
    responses={**BAD, **BODY, **REFUSED},
)
def start(body: InceptionStart, ctx: Ctx, request: Request, response: Response) -> SessionView:
    """The planner route and its key are checked before anything is kept. `Location` names
    the session, which `GET` reads back."""
    ctx.writable("an inception session")
    planner_route(body.planner, ctx.model_env())
    view = InceptionSession.start(ctx.store, body.paragraph, body.planner).view()
    response.headers["Location"] = f"{request.scope.get('root_path', '')}/api/inception/{view.id}"
    return view


@router.get("/{session_id}", summary="The session as it stands", responses=MISSING)
def read(session_id: SessionId, ctx: Ctx) -> SessionView:
    """What every step answers: the scope, the questions and their grades, its status."""
    return InceptionSession.resume(ctx.store, session_id).view()


@router.post(
    "/{session_id}/scope",
    summary="Ask the planner for the scope and its graded questions, or revise it with feedback",
    responses={**BAD, **BODY, **MISSING, **REFUSED, **PLANNER},
)
def scope(
    session_id: SessionId, ctx: Ctx, body: Annotated[InceptionScopeIn | None, Body()] = None
) -> SessionView:
    session = _open(ctx, session_id, "proposing a scope", planner=True)
    return session.propose_scope(body.feedback if body is not None else None)


@router.post(
    "/{session_id}/questions/{question_id}",
    summary="Answer, defer or re-grade one question",
    responses={**BAD, **BODY, **MISSING, **REFUSED},
)
def question(
    session_id: SessionId, question_id: QuestionId, body: QuestionStep, ctx: Ctx
) -> SessionView:
    session = _open(ctx, session_id, "settling a question")
    if body.action == "answer":
        return session.answer(question_id, body.answer or "", by="api")
    if body.action == "defer":
        return session.defer(question_id, by="api")
    return session.regrade(question_id, body.grade or "", by="api", reason=body.reason)


@router.post(
    "/{session_id}/approve",
    summary="Approve the scope (409 naming the BLOCKING questions still open)",
    responses={**MISSING, **REFUSED},
)
def approve(session_id: SessionId, ctx: Ctx) -> SessionView:
    return _open(ctx, session_id, "approving a scope").approve(by="api")


@router.get(
    "/{session_id}/plan",
    summary="The approved session's PLAN.md (the planner writes it on the first call)",
    responses={**BAD, **MISSING, **REFUSED, **PLANNER},
)
def plan(session_id: SessionId, ctx: Ctx, request: Request) -> InceptionPlanOut:
    """Idempotent: the planner is asked once per session; later calls read the plan back. A
    monitoring server answers only a plan already written, and so does a HEAD."""
    session = InceptionSession.resume(ctx.store, session_id)
    view = session.view()
    if view.status == "approved":
        if getattr(request.state, HEAD_ONLY, False):
            raise StepRefused("a HEAD asks nothing of the planner: GET writes the plan")
        session = _open(ctx, session_id, "writing a plan", planner=True)
    view = session.plan()
    assert view.plan is not None
    return InceptionPlanOut(
        session=view.id, markdown=view.plan, items=list(view.items), flagged=list(view.flagged)
    )


def _open(ctx: ApiContext, session_id: str, what: str, planner: bool = False) -> InceptionSession:
    ctx.writable(what)
    session = InceptionSession.resume(ctx.store, session_id)
    if planner:
        session.planner = ctx.planner(session_id, session.view().planner)
    return session
