"""Answers given ahead of time: a JSON or TOML file, or the planner's own proposed defaults.

A file maps question ids to what to do with them:

    {"Q1": "No: a trailing newline ends the last line",
     "Q2": {"defer": true},
     "Q3": {"grade": "NICE", "answer": "feature"}}

A re-grade is applied before the answer or deferral beside it, so a BLOCKING question can be
re-graded and deferred in one entry.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_harness.errors import UNREADABLE_JSON, InputError, read_json
from agent_harness.inception.model import SessionView, fit_error
from agent_harness.inception.session import InceptionSession


class PlannedAnswer(BaseModel):
    """What to do with one question."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answer: str | None = None
    defer: bool = False
    grade: str | None = None
    reason: str | None = None


def read_answers(path: Path) -> dict[str, PlannedAnswer]:
    """The answers in `path` (`.toml`, else JSON); one clear line when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read answers file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"answers file {path} is not UTF-8 text") from exc
    try:
        data: Any = tomllib.loads(text) if path.suffix == ".toml" else read_json(text)
    except UNREADABLE_JSON as exc:  # TOMLDecodeError is a ValueError too
        raise InputError(f"answers file {path} cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"answers file {path} must map question ids to answers")
    out: dict[str, PlannedAnswer] = {}
    for key, value in data.items():
        if not isinstance(value, str | dict):
            raise InputError(
                f"answers file {path}, {key}: give the answer as text, or a table of answer, "
                "defer, grade and reason"
            )
        entry = {"answer": value} if isinstance(value, str) else value
        try:
            out[str(key)] = PlannedAnswer.model_validate(entry)
        except ValidationError as exc:
            raise InputError(f"answers file {path}, {key}: {fit_error(exc)}") from exc
    return out


def check_answers(view: SessionView, answers: dict[str, PlannedAnswer]) -> None:
    """Refuse the whole file before any of it is recorded: an unknown id, a grade that is none,
    an empty answer, a deferral of a question that would stay BLOCKING, or an entry that both
    answers and defers (one of the two would be dropped without a word)."""
    from agent_harness.errors import UsageError
    from agent_harness.inception.model import GRADES, StepRefused

    for question_id, planned in answers.items():
        question = view.question(question_id)
        grade = planned.grade.strip().upper() if planned.grade is not None else question.grade
        if grade not in GRADES:
            raise UsageError(
                f"{question_id}: grade {planned.grade!r} is not one of {', '.join(GRADES)}"
            )
        if planned.answer is not None and not planned.answer.strip():
            raise UsageError(f"the answer to {question_id} is empty")
        if planned.answer is not None and planned.defer:
            raise UsageError(f"{question_id} both answers and defers; give one of the two")
        if planned.defer and grade == "BLOCKING":
            raise StepRefused(
                f"{question_id} is BLOCKING: answer it, or re-grade it before deferring "
                "(a deferred BLOCKING question would still block approval)"
            )


def apply_answers(
    session: InceptionSession, answers: dict[str, PlannedAnswer], by: str
) -> SessionView:
    """Apply every entry in file order, once the whole file is found to apply."""
    view = session.view()
    check_answers(view, answers)
    for question_id, planned in answers.items():
        if planned.grade:
            view = session.regrade(question_id, planned.grade, by=by, reason=planned.reason)
        if planned.answer is not None:
            view = session.answer(question_id, planned.answer, by=by)
        elif planned.defer:
            view = session.defer(question_id, by=by)
    return view


def accept_defaults(session: InceptionSession) -> SessionView:
    """Take the planner's proposed answer for every question still open."""
    view = session.view()
    for question in view.in_grade_order():
        if question.state == "open":
            view = session.answer(question.id, question.default, by="defaults")
    return view
