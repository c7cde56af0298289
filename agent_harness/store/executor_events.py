"""The direct-API executor's events: its plan, each step's tries and verdicts, its revisions.

Each is stored on the item like any other event (not as an `agent_state` line), so `work show`
and `attach` can tell the executor's story step by step, and `describe()` says each in a line.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from agent_harness.store.payload import Payload


class ExecutorKind(StrEnum):
    """The kinds of the direct-API executor's events."""

    PLAN = "executor.plan"
    PLAN_REJECTED = "executor.plan_rejected"
    PLAN_DISCARDED = "executor.plan_discarded"
    RESUMED = "executor.resumed"
    STEP_STARTED = "executor.step_started"
    STEP_RETRY = "executor.step_retry"
    STEP_DONE = "executor.step_done"
    STEP_FAILED = "executor.step_failed"
    STEP_SKIPPED = "executor.step_skipped"
    REPLAN = "executor.replan"
    BLOCKED = "executor.blocked"
    DONE = "executor.done"


class ExecutorEvent(Payload):
    """An event of the executor's plan at one revision."""

    revision: int = Field(default=0, description="Plan revisions made so far.")

    def describe(self) -> str:
        return self.kind


def _steps_text(steps: list[dict[str, Any]]) -> str:
    return "; ".join(f"{s.get('id')}. {s.get('description')}" for s in steps)


class ExecutorPlanned(ExecutorEvent):
    """The planner wrote the item's plan."""

    KIND = ExecutorKind.PLAN
    steps: list[dict[str, Any]] = Field(description="The steps: id, description, check.")

    def describe(self) -> str:
        return f"planned {len(self.steps)} steps: {_steps_text(self.steps)}"


class ExecutorPlanRejected(ExecutorEvent):
    """A plan answer was refused (asked again once)."""

    KIND = ExecutorKind.PLAN_REJECTED
    reasons: list[str] = Field(default_factory=list, description="Why it was refused.")
    ask: int = Field(default=1, description="Which ask it answered.")

    def describe(self) -> str:
        return f"plan answer {self.ask} refused: {'; '.join(self.reasons)}"


class ExecutorPlanDiscarded(ExecutorEvent):
    """A saved plan was not resumed (the item changed since)."""

    KIND = ExecutorKind.PLAN_DISCARDED
    reason: str = Field(default="", description="Why it was discarded.")

    def describe(self) -> str:
        return f"saved plan discarded: {self.reason}"


class ExecutorResumed(ExecutorEvent):
    """A saved plan was resumed; its done steps are not redone."""

    KIND = ExecutorKind.RESUMED
    done: list[str] = Field(default_factory=list, description="Steps already done.")

    def describe(self) -> str:
        return f"resumed the saved plan ({len(self.done)} steps done)"


class ExecutorStepStarted(ExecutorEvent):
    """A step's try began: the implementer model is asked for its edit."""

    KIND = ExecutorKind.STEP_STARTED
    step: str = Field(description="Step id.")
    attempt: int = Field(default=1, description="Try number of this step.")

    def describe(self) -> str:
        return f"step {self.step}: try {self.attempt}"


class ExecutorStepRetry(ExecutorEvent):
    """A step's try failed in a way another try may fix."""

    KIND = ExecutorKind.STEP_RETRY
    step: str = Field(description="Step id.")
    attempt: int = Field(default=1, description="Tries made.")
    reason: str = Field(default="", description="Why the try failed (fed to the next).")

    def describe(self) -> str:
        return f"step {self.step}: try {self.attempt} failed: {self.reason}"


class ExecutorStepDone(ExecutorEvent):
    """A step's check passed."""

    KIND = ExecutorKind.STEP_DONE
    step: str = Field(description="Step id.")
    attempt: int = Field(default=1, description="Tries it took.")
    result: str = Field(default="", description="What it did, and its check's verdict.")

    def describe(self) -> str:
        return f"step {self.step}: done: {self.result}"


class ExecutorStepFailed(ExecutorEvent):
    """A step failed for this revision of the plan (its dependents are skipped)."""

    KIND = ExecutorKind.STEP_FAILED
    step: str = Field(description="Step id.")
    attempt: int = Field(default=1, description="Tries made.")
    reason: str = Field(default="", description="Why.")
    permanent: bool = Field(default=False, description="No try of this step can pass.")

    def describe(self) -> str:
        return f"step {self.step}: failed: {self.reason}"


class ExecutorStepSkipped(ExecutorEvent):
    """A step was skipped: a step it needs failed."""

    KIND = ExecutorKind.STEP_SKIPPED
    step: str = Field(description="Step id.")
    because: str = Field(description="The failed step it needs.")

    def describe(self) -> str:
        return f"step {self.step}: skipped (needs step {self.because})"


class ExecutorReplanned(ExecutorEvent):
    """The plan was revised: failed steps, or finished work sent back, got new steps."""

    KIND = ExecutorKind.REPLAN
    failed: list[str] = Field(default_factory=list, description="Steps that failed.")
    steps: list[dict[str, Any]] = Field(default_factory=list, description="The new steps.")
    sent_back: str | None = Field(default=None, description="Feedback that sent it back.")

    def describe(self) -> str:
        why = f"steps {', '.join(self.failed)} failed" if self.failed else "the work was sent back"
        return f"revision {self.revision} ({why}): {_steps_text(self.steps)}"


class ExecutorBlocked(ExecutorEvent):
    """The run stopped short of done."""

    KIND = ExecutorKind.BLOCKED
    blocker: str = Field(description="What stopped it.")
    step: str | None = Field(default=None, description="The step it stopped at.")
    permanent: bool = Field(default=False, description="No other run of the plan can get further.")

    def describe(self) -> str:
        where = f" at step {self.step}" if self.step else ""
        return f"blocked{where}: {self.blocker}"


class ExecutorDone(ExecutorEvent):
    """Every step of the plan is done."""

    KIND = ExecutorKind.DONE
    steps: int = Field(description="Steps in the plan.")

    def describe(self) -> str:
        return f"done: all {self.steps} steps"
