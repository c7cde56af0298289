"""What the planner must answer, checked field by field, and the session as a caller sees it.

The planner answers in JSON. `ScopeAnswer` and `TasksAnswer` are the only shapes accepted: text
fields are one line of prose, paths are relative globs with no commas, ids are plan ids, and a
task list's dependencies point at known items without a cycle and no item may touch a protected
path. Whatever does not fit is named in one line (`fit_error`), which is what the planner is
shown when it is asked once more.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from agent_harness.errors import HarnessError
from agent_harness.git.protect import glob_matches
from agent_harness.plan.grammar import ID_RE
from agent_harness.secrets.redact import strip_terminal_codes
from agent_harness.store.inception_events import GRADES, Grade, Question, Scope

__all__ = [
    "GRADES",
    "BlockingOpen",
    "Grade",
    "InceptionError",
    "PlannerAnswerInvalid",
    "Question",
    "Scope",
    "ScopeAnswer",
    "SessionView",
    "StepRefused",
    "TasksAnswer",
    "UnknownQuestion",
    "UnknownSession",
    "fit_error",
]

_PATH = re.compile(r"^[A-Za-z0-9_.*?/\[\]{}@+=~-]+$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._/+-]{0,40}$")
# A title's closing words that the plan's reader takes as dependencies (`(depends on T1)`,
# `(after T1)`, `[needs: T1]`, `— depends on T1`): dependencies go in depends_on.
_TRAILING_DEPS = re.compile(
    r"(?:[(\[]\s*(?:depends|deps|dependencies|blocked|after|needs|requires|waits)\b[^()\[\]]*"
    r"[)\]]|\s[—–-]{1,2}\s*(?:depends\s+on|after|needs)\s+\S+)\s*[.]?\s*$",
    re.I,
)


# Any control character left once terminal codes are taken out whole: an escape sequence
# would clear or retitle the terminal the scope is shown on, and stay in PLAN.md.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _printable(value: object) -> str:
    return _CONTROL.sub("", strip_terminal_codes(str(value)))


def _line(value: str) -> str:
    text = " ".join(_printable(value).split())
    if not text:
        raise ValueError("must not be empty")
    return text


def _path(value: str) -> str:
    text = str(value).strip()
    if not text or not _PATH.match(text):
        raise ValueError(
            f"{text!r} is not a relative path or glob (letters, digits, . _ - / * ?; "
            "no spaces, commas or backticks)"
        )
    if text.startswith("/") or ".." in text.split("/"):
        raise ValueError(f"{text!r} must be relative to the repository root, without '..'")
    return text


def _label(value: str) -> str:
    text = str(value).strip()
    if not _LABEL.match(text):
        raise ValueError(f"{text!r} is not a label (one word: letters, digits, : . _ / + -)")
    return text


def _title(value: str) -> str:
    text = _line(value)
    if text.startswith("[") or text.endswith("#") or _TRAILING_DEPS.search(text):
        raise ValueError(
            f"{text!r}: a title is plain words; no leading [marker], trailing '#' or "
            "'(depends on ...)', '(after ...)', '(needs ...)' (dependencies go in depends_on)"
        )
    if len(text) > 120:
        raise ValueError("a title is at most 120 characters")
    return text


Line = Annotated[str, AfterValidator(_line)]
Path_ = Annotated[str, AfterValidator(_path)]
Label = Annotated[str, AfterValidator(_label)]
Title = Annotated[str, AfterValidator(_title)]


class _Answer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _no_control_characters(cls, data: Any) -> Any:
        return _without_control(data)


def _without_control(value: Any) -> Any:
    """`value` (the planner's JSON) with the control characters of every string taken out; a
    tab or a line break stays (the fields that are one line fold them into spaces)."""
    if isinstance(value, str):
        return _printable(value)
    if isinstance(value, dict):
        return {key: _without_control(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_control(item) for item in value]
    return value


class FilesAnswer(_Answer):
    change: list[Path_] = Field(min_length=1)
    protect: list[Path_] = Field(default_factory=list)


class QuestionAnswer(_Answer):
    id: Annotated[str, Field(pattern=r"^Q[0-9]{1,3}$")]
    text: Line
    grade: Grade
    default: Line
    why: str = ""


class ScopeAnswer(_Answer):
    """The planner's scope: objective, goals, non-goals, risks, files, graded questions."""

    objective: Line
    goals: list[Line] = Field(min_length=1, max_length=12)
    non_goals: list[Line] = Field(default_factory=list, max_length=12)
    risks: list[Line] = Field(default_factory=list, max_length=12)
    files: FilesAnswer
    questions: list[QuestionAnswer] = Field(default_factory=list, max_length=12)

    def problems(self) -> list[str]:
        ids = [q.id for q in self.questions]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        found = [f"questions: id {i} is used twice" for i in twice]
        for path in self.files.change:
            hit = [p for p in self.files.protect if glob_matches(p, path) or p == path]
            if hit:
                found.append(f"files: {path} is both to change and protected ({hit[0]})")
        return found

    def scope(self) -> Scope:
        return Scope(
            objective=self.objective,
            goals=tuple(self.goals),
            non_goals=tuple(self.non_goals),
            risks=tuple(self.risks),
            change=tuple(self.files.change),
            protect=tuple(self.files.protect),
        )

    def questions_asked(self) -> list[Question]:
        return [
            Question(id=q.id, text=q.text, grade=q.grade, default=q.default, why=_one(q.why))
            for q in self.questions
        ]


class TaskAnswer(_Answer):
    id: str
    title: Title
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)
    files: list[Path_] = Field(min_length=1)
    labels: list[Label] = Field(default_factory=list)
    check: Line


class TasksAnswer(_Answer):
    """The planner's ordered tasks, with the plan's verification and rollback criteria."""

    milestone: Line
    items: list[TaskAnswer] = Field(min_length=1, max_length=40)
    verification: list[Line] = Field(min_length=1, max_length=12)
    rollback: list[Line] = Field(min_length=1, max_length=12)

    def problems(self, protect: tuple[str, ...] = ()) -> list[str]:
        """What no field validator can see: ids, dependencies, protected paths."""
        found: list[str] = []
        ids = [item.id for item in self.items]
        for item in self.items:
            if not ID_RE.match(item.id) or not item.id[-1].isdigit():
                found.append(f"items: {item.id!r} is not an item id (like T1 or AUTH-3)")
            if ids.count(item.id) > 1:
                found.append(f"items: id {item.id} is used twice")
            for dep in item.depends_on:
                if dep == item.id or dep not in ids:
                    found.append(f"items.{item.id}.depends_on: {dep!r} is not another item")
            for path in item.files:
                hit = [p for p in protect if glob_matches(p, path)]
                if hit:
                    found.append(f"items.{item.id}.files: {path} is protected ({hit[0]})")
        cycle = _cycle({item.id: list(item.depends_on) for item in self.items})
        if cycle:
            found.append(f"items: dependency cycle {' -> '.join(cycle)}")
        return sorted(set(found), key=found.index)


def _one(text: str) -> str:
    return " ".join(str(text).split())


def _cycle(graph: dict[str, list[str]]) -> list[str]:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt in graph and not state.get(nxt):
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = 2
        return []

    for root in graph:
        if not state.get(root):
            found = visit(root, [root])
            if found:
                return found
    return []


def fit_error(exc: ValidationError) -> str:
    """A validation error as one line: `where: what` for each of the first few problems."""
    parts = []
    for error in exc.errors()[:6]:
        where = ".".join(str(part) for part in error["loc"]) or "answer"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    more = len(exc.errors()) - 6
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


# --- the session, as a caller sees it --------------------------------------------------------

Status = Literal["started", "scoped", "approved", "planned"]


class SessionView(BaseModel):
    """An inception session as its events say it is now."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Session id; resume with it.")
    status: Status = Field(description="started, scoped, approved or planned.")
    paragraph: str = Field(description="What the person asked for.")
    planner: str = Field(description="The planner route, vendor:model.")
    round: int = Field(default=0, description="Scope proposals so far.")
    scope: Scope | None = Field(default=None, description="The scope proposed last.")
    questions: tuple[Question, ...] = Field(default=(), description="Every question.")
    kept_blocking: tuple[str, ...] = Field(
        default=(), description="BLOCKING questions the planner tried to drop or downgrade."
    )
    reopened: tuple[str, ...] = Field(
        default=(), description="Settled questions asked again in other words: open again."
    )
    plan: str | None = Field(default=None, description="PLAN.md, once planned.")
    items: tuple[str, ...] = Field(default=(), description="The plan's item ids.")
    flagged: tuple[str, ...] = Field(default=(), description="Items with unobservable checks.")

    def question(self, question_id: str) -> Question:
        for question in self.questions:
            if question.id == question_id:
                return question
        raise UnknownQuestion(self.id, question_id, [q.id for q in self.questions])

    @property
    def open_blocking(self) -> tuple[Question, ...]:
        return tuple(q for q in self.questions if q.grade == "BLOCKING" and q.state != "answered")

    def in_grade_order(self) -> list[Question]:
        return sorted(self.questions, key=lambda q: GRADES.index(q.grade))

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


# --- errors ----------------------------------------------------------------------------------


class InceptionError(HarnessError):
    """An inception step could not be taken."""


class UnknownSession(InceptionError):
    """No inception session has this id."""

    exit_code = 2

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no inception session {session_id!r} in this database")


class StepRefused(InceptionError):
    """The step does not apply to the session as it is (e.g. re-grading after approval)."""

    exit_code = 3


class UnknownQuestion(StepRefused):
    """The session has no question with this id."""

    exit_code = 2

    def __init__(self, session_id: str, question_id: str, known: list[str]) -> None:
        self.question_id = question_id
        listed = ", ".join(known) or "none yet"
        super().__init__(
            f"session {session_id} has no question {question_id!r} (its questions: {listed})"
        )


class BlockingOpen(StepRefused):
    """Approval refused: BLOCKING questions are unanswered."""

    def __init__(self, questions: tuple[Question, ...]) -> None:
        self.questions = questions
        named = "; ".join(f"{q.id}: {q.text}" for q in questions)
        super().__init__(
            f"approval refused: {len(questions)} BLOCKING question"
            f"{'s are' if len(questions) != 1 else ' is'} unanswered ({named})"
        )


class PlannerAnswerInvalid(InceptionError):
    """The planner's answer did not fit, twice; nothing was recorded as its result."""

    def __init__(self, stage: str, problem: str, calls: int) -> None:
        self.stage = stage
        self.problem = problem
        self.calls = calls
        super().__init__(f"the planner's {stage} answer did not fit after {calls} calls: {problem}")


class PlannerOverBudget(InceptionError):
    """The planner's next call could pass the session's budget (or its price is not known):
    nothing was asked, and the session is kept, to resume once the budget is raised (exit 75,
    as a run its budget stopped)."""

    exit_code = 75
