"""A work item's step plan as data, and the file it is kept in between runs.

The plan is the executor's whole memory: each step's status, attempts and result, the
replans made and the model calls spent. It is written atomically after every change, so a
run killed at any moment resumes from a plan that is whole, never half written.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from agent_harness.errors import InputError


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


CheckKind = Literal["command", "file_exists", "regex", "item_checks"]


class Check(BaseModel):
    """How the verifier knows a step worked, without asking a model.

    `command`: a shell command run in the worktree must exit 0. `file_exists`: `path` exists.
    `regex`: `pattern` (Python syntax, multiline) matches the file at `path`. `item_checks`:
    every check command configured for the item exits 0.
    """

    kind: CheckKind
    command: str | None = None
    path: str | None = None
    pattern: str | None = None

    def describe(self) -> str:
        if self.kind == "command":
            return f"`{self.command}` exits 0"
        if self.kind == "file_exists":
            return f"{self.path} exists"
        if self.kind == "regex":
            return f"/{self.pattern}/ matches in {self.path}"
        return "the item's checks pass"


class Step(BaseModel):
    """One step of a plan. `attempts` counts verdicts (tries that ran to an outcome)."""

    id: str
    description: str
    success_check: Check
    status: StepStatus = StepStatus.PENDING
    attempts: int = 0
    result: str | None = Field(default=None, description="What it did, or why it failed.")
    depends_on: list[str] = Field(default_factory=list)


class Replan(BaseModel):
    """Why a plan was revised: the step that failed and the reason it gave."""

    revision: int
    failed_step: str
    reason: str


class StepPlan(BaseModel):
    """A work item's plan and where it got to; this is what `plan.json` holds."""

    goal: str
    steps: list[Step] = Field(default_factory=list)
    revision: int = Field(default=0, description="Replans made so far.")
    item_id: str = ""
    item_hash: str = ""
    status: Literal["running", "done", "blocked"] = "running"
    blocker: str | None = None
    blocking_step: str | None = None
    calls: int = Field(default=0, description="Model calls made for this plan, all runs.")
    tokens_in: int | None = Field(default=0, description="None once any answer left it unsaid.")
    tokens_out: int | None = 0
    replans: list[Replan] = Field(default_factory=list)

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def next_runnable(self) -> Step | None:
        done = {s.id for s in self.steps if s.status is StepStatus.DONE}
        for step in self.steps:
            if step.status is StepStatus.PENDING and all(d in done for d in step.depends_on):
                return step
        return None

    def dependents_of(self, step_id: str) -> list[Step]:
        """Every step that needs `step_id`, directly or through another step."""
        blocked = {step_id}
        found: list[Step] = []
        for step in self.steps:  # dependencies only point backwards, so one pass suffices
            if step.id not in blocked and blocked.intersection(step.depends_on):
                blocked.add(step.id)
                found.append(step)
        return found


class PlanFileUnreadable(InputError):
    """A saved step plan could not be read."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(f"cannot read the step plan {path}: {why}")


def save_plan(plan: StepPlan, path: Path) -> None:
    """Write the plan so a reader sees the old file or the new one, never half of either."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(plan.model_dump_json(indent=2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_plan(path: Path) -> StepPlan:
    try:
        return StepPlan.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanFileUnreadable(path, exc.strerror or str(exc)) from exc
    except UnicodeDecodeError as exc:
        said = f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        raise PlanFileUnreadable(path, said) from None
    except ValidationError as exc:
        raise PlanFileUnreadable(path, f"not a step plan: {_first_problem(exc)}") from None


def _first_problem(exc: ValidationError) -> str:
    """What is wrong with a plan file, in a line: where and what, and how many more."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the file"
    more = exc.error_count() - 1
    extra = f" (and {more} more problem{'s' if more != 1 else ''})" if more else ""
    return f"{where}: {first['msg']}{extra}"
