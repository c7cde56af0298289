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
        entry = {"answer": value} if isinstance(value, str) else value
        try:
            out[str(key)] = PlannedAnswer.model_validate(entry)
        except ValidationError as exc:
            raise InputError(f"answers file {path}, {key}: {fit_error(exc)}") from exc
    return out


def apply_answers(
    session: InceptionSession, answers: dict[str, PlannedAnswer], by: str
) -> SessionView:
    """Apply every entry in file order; an id the session does not have is refused."""
    view = session.view()
    for question_id in answers:
        view.question(question_id)  # refuse an unknown id before changing anything
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
