"""Inception's events: a paragraph argued into an approved scope and a plan, one event a step.

A session is the events of the project `inception:<id>`, so it can be resumed, audited and
priced from the log alone (its planner calls are `model.call` events of the same project). The
scope and the questions are stored whole in the event that set them, so reading a session back
needs no other table.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_harness.store.payload import Payload


class InceptionKind(StrEnum):
    """The kinds of an inception session's events."""

    STARTED = "inception.started"
    SCOPE = "inception.scope"
    QUESTION = "inception.question"
    APPROVED = "inception.approved"
    PLANNED = "inception.planned"
    PLANNER_FAILED = "inception.planner_failed"


Grade = Literal["BLOCKING", "IMPORTANT", "NICE"]
GRADES: tuple[Grade, ...] = ("BLOCKING", "IMPORTANT", "NICE")
QuestionState = Literal["open", "answered", "deferred"]


class Scope(BaseModel):
    """What the work is and is not, and the files it expects to change or must leave alone."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    objective: str = Field(description="The goal in one or two sentences.")
    goals: tuple[str, ...] = Field(description="What the work delivers.")
    non_goals: tuple[str, ...] = Field(default=(), description="What it deliberately leaves out.")
    risks: tuple[str, ...] = Field(default=(), description="What could go wrong.")
    change: tuple[str, ...] = Field(description="Paths (globs) expected to change.")
    protect: tuple[str, ...] = Field(default=(), description="Paths no item may change.")


class Question(BaseModel):
    """A question the planner asked, graded, with its proposed answer and where it got to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="Q1, Q2, ...")
    text: str = Field(description="The question.")
    grade: Grade = Field(description="BLOCKING, IMPORTANT or NICE.")
    default: str = Field(description="The planner's proposed answer.")
    why: str = Field(default="", description="Why it matters.")
    state: QuestionState = Field(default="open", description="open, answered or deferred.")
    answer: str | None = Field(default=None, description="The answer taken, when answered.")
    graded_by: Literal["planner", "person"] = Field(
        default="planner", description="Who set the grade last."
    )


class InceptionStarted(Payload):
    """An inception session began from a paragraph."""

    KIND = InceptionKind.STARTED
    paragraph: str = Field(description="What the person wants, in their words.")
    planner: str = Field(description="The planner route, vendor:model.")


class ScopeProposed(Payload):
    """The planner proposed a scope and its questions (round 1), or revised them on feedback."""

    KIND = InceptionKind.SCOPE
    round: int = Field(description="1 for the first proposal, +1 per revision.")
    feedback: str | None = Field(default=None, description="The person's feedback it answers.")
    scope: Scope = Field(description="The scope proposed.")
    questions: tuple[Question, ...] = Field(description="Every question after this round.")
    kept_blocking: tuple[str, ...] = Field(
        default=(), description="BLOCKING questions the planner dropped or downgraded: kept."
    )
    reopened: tuple[str, ...] = Field(
        default=(), description="Settled questions the planner asked in other words: open again."
    )
    calls: int = Field(default=1, description="Planner calls it took (2 after a retry).")
    tokens_in: int | None = Field(default=None, description="Input tokens of those calls.")
    tokens_out: int | None = Field(default=None, description="Output tokens of those calls.")


class QuestionSettled(Payload):
    """A question was answered, deferred or re-graded."""

    KIND = InceptionKind.QUESTION
    question: str = Field(description="The question's id.")
    action: Literal["answer", "defer", "regrade"] = Field(description="What was done.")
    answer: str | None = Field(default=None, description="The answer, for `answer`.")
    grade: Grade | None = Field(default=None, description="The new grade, for `regrade`.")
    was: Grade | None = Field(default=None, description="The grade before, for `regrade`.")
    by: str = Field(default="person", description="person, defaults or an answers file.")
    reason: str | None = Field(default=None, description="Why, when given.")


class ScopeApproved(Payload):
    """The person approved the scope; no BLOCKING question was open."""

    KIND = InceptionKind.APPROVED
    by: str = Field(default="person", description="Who approved.")
    still_open: tuple[str, ...] = Field(
        default=(), description="Non-blocking questions left open: their defaults are assumed."
    )


class PlanWritten(Payload):
    """The approved scope became a PLAN.md the parser reads with no unread line."""

    KIND = InceptionKind.PLANNED
    markdown: str = Field(description="The plan as written.")
    items: tuple[str, ...] = Field(description="Its item ids, in order.")
    flagged: tuple[str, ...] = Field(
        default=(), description="Items whose check no command can observe, with why."
    )
    calls: int = Field(default=1, description="Planner calls it took (2 after a retry).")
    tokens_in: int | None = Field(default=None, description="Input tokens of those calls.")
    tokens_out: int | None = Field(default=None, description="Output tokens of those calls.")


class PlannerFailed(Payload):
    """The planner's answer could not be used; the session is as it was before the step."""

    KIND = InceptionKind.PLANNER_FAILED
    stage: Literal["scope", "plan"] = Field(description="The step that failed.")
    reason: str = Field(description="What was wrong, in one line.")
    calls: int = Field(default=0, description="Planner calls made for the step.")
