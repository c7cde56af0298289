"""The approved scope and the planner's tasks as PLAN.md, read back by the project's own parser.

The plan follows the anatomy of a plan you can execute and audit: objective; scope and a file
manifest with protected files; ordered tasks under a milestone heading, each with its files,
labels, dependencies and an observable check; verification; rollback and abort criteria; and
the decisions the inception took. Planner text is written so markdown cannot misread it (a
leading `#`, `[` or `check:` is escaped), and the result must parse with no unread line into
exactly the items the planner gave, or nothing is returned at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_harness.errors import HarnessError
from agent_harness.inception.model import (
    InceptionError,
    Question,
    Scope,
    TaskAnswer,
    TasksAnswer,
)
from agent_harness.plan.grammar import KEYS, META, norm_key
from agent_harness.plan.markdown import parse_plan
from agent_harness.plan.model import WorkItem, check_command


class PlanNotReadable(InceptionError):
    """The rendered plan would not read back as the planner's items; nothing was written."""


@dataclass(frozen=True)
class RenderedPlan:
    """PLAN.md text, its item ids in order, and the items whose check cannot be observed."""

    markdown: str
    items: tuple[str, ...]
    flagged: tuple[str, ...]


_BLOCK_START = re.compile(r"^(#|>|[-+*=_|<\[]|```|~~~|\d+[.)])")
UNOBSERVABLE = "no command observes this check, so only the reviewer's opinion would decide it"


def prose(text: str) -> str:
    """One line of planner text, safe to place where markdown or the plan parser reads lines."""
    # `<` escaped anywhere: an HTML comment or tag would hide the rest from a reader on GitHub.
    line = " ".join(str(text).split()).replace("<", "\\<")
    if _BLOCK_START.match(line):
        line = "\\" + line
    match = META.match(line.replace("*", "").replace("_", "").replace("`", ""))
    if match and KEYS.get(norm_key(match.group(1))):
        line = "· " + line  # a known `key:` at the start of prose would be read as a field
    return line


# Characters that markdown would read as markup in a heading's title (`Vec<u8>` as HTML,
# `[docs](x)` as a link, `&amp;` as an entity): written escaped, so the title reads as given.
_TITLE_MARKUP = re.compile(r"([\\<>\[\]&~!|])")


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def title_text(title: str) -> str:
    """An item title as markdown that reads back as exactly these words (a `code span` is
    left as it is: inside one, a backslash is a backslash)."""
    parts, last = [], 0
    for span in _CODE_SPAN.finditer(title):
        parts += [_TITLE_MARKUP.sub(r"\\\1", title[last : span.start()]), span.group(0)]
        last = span.end()
    return "".join([*parts, _TITLE_MARKUP.sub(r"\\\1", title[last:])])


def ordered(tasks: TasksAnswer) -> list[str]:
    """Item ids with every dependency before its dependant, otherwise in the planner's order."""
    placed: list[str] = []
    pending = [item.id for item in tasks.items]
    deps = {item.id: set(item.depends_on) for item in tasks.items}
    while pending:
        ready = next((i for i in pending if deps[i] <= set(placed)), pending[0])
        placed.append(ready)
        pending.remove(ready)
    return placed


def render_plan(
    session_id: str, scope: Scope, questions: tuple[Question, ...], tasks: TasksAnswer
) -> RenderedPlan:
    """PLAN.md for an approved session, checked by the parser; `PlanNotReadable` otherwise."""
    by_id = {item.id: item for item in tasks.items}
    order = ordered(tasks)
    flagged = tuple(f"{i}: {UNOBSERVABLE}" for i in order if check_command(by_id[i].check) is None)
    lines = ["# Plan", ""]
    lines += [f"Written by `agent-harness inception` (session {session_id}) from an approved"]
    lines += ["scope. Edit it freely; `agent-harness plan` reads it.", ""]
    lines += ["## Objective", "", prose(scope.objective), ""]
    lines += ["## Scope", "", "Goals:", "", *_bullets(scope.goals)]
    lines += ["Not in scope:", "", *_bullets(scope.non_goals or ("nothing named",))]
    lines += ["Risks:", "", *_bullets(scope.risks or ("none named",))]
    lines += ["## Files", "", "Expected to change:", "", *_bullets(scope.change, code=True)]
    protected = scope.protect or ("none beyond the harness's own protected paths",)
    lines += ["Protected; no item may change them:", ""]
    lines += _bullets(protected, code=bool(scope.protect))
    lines += ["## Decisions", "", *_decisions(questions)]
    lines += [f"## Milestone: {_one(tasks.milestone).rstrip('#').strip()}", ""]
    for item_id in order:
        lines += _item(by_id[item_id], item_id in {f.split(":")[0] for f in flagged})
    lines += ["## Verification", "", *_bullets(tasks.verification)]
    lines += ["## Rollback and abort", "", *_bullets(tasks.rollback)]
    markdown = "\n".join(lines).rstrip("\n") + "\n"
    verify(markdown, tasks, order)
    return RenderedPlan(markdown, tuple(order), flagged)


def _bullets(texts: tuple[str, ...] | list[str], code: bool = False) -> list[str]:
    shown = [f"- `{t}`" if code else f"- {prose(t)}" for t in texts]
    return [*shown, ""]


def _decisions(questions: tuple[Question, ...]) -> list[str]:
    if not questions:
        return ["The planner asked nothing.", ""]
    lines = []
    for q in questions:
        if q.state == "answered":
            taken = f"answered: {q.answer}"
        else:
            taken = f"{'deferred' if q.state == 'deferred' else 'open'}; assumed: {q.default}"
        lines.append(f"- {q.id} ({q.grade}) {prose(q.text)} — {prose(taken)}")
    return [*lines, ""]


def _one(text: str) -> str:
    return " ".join(str(text).split())


def _plain(text: str) -> str:
    return _one(re.sub(r"[`*_]", "", text))


def _item(item: TaskAnswer, flag: bool) -> list[str]:
    lines = [f"### {item.id}: {title_text(item.title)}", ""]
    for paragraph in (item.description or item.title).split("\n\n"):
        if paragraph.strip():
            lines += [prose(paragraph), ""]
    if flag:
        lines += [f"Flagged: {UNOBSERVABLE}.", ""]
    if item.labels:
        lines.append(f"labels: {', '.join(item.labels)}")
    lines.append(f"depends on: {', '.join(item.depends_on) if item.depends_on else 'none'}")
    lines.append(f"files: {', '.join(item.files)}")
    lines += [f"check: {_one(item.check)}", ""]
    return lines


def verify(markdown: str, tasks: TasksAnswer, order: list[str]) -> None:
    """Parse the plan as `agent-harness plan` would; refuse it unless every line is read and
    the items are exactly the planner's."""
    try:
        plan = parse_plan(markdown, source="PLAN.md")
    except HarnessError as exc:
        raise PlanNotReadable(f"the generated plan is refused by the parser: {exc}") from exc
    if plan.unread:
        first = plan.unread[0]
        raise PlanNotReadable(
            f"the generated plan has {len(plan.unread)} unread line(s); line {first.line}: "
            f"{first.reason} ({first.text})"
        )
    read = {item.id: item for item in plan.items}
    if [item.id for item in plan.items] != order:
        raise PlanNotReadable(
            f"the generated plan reads as items {', '.join(read) or 'none'}, not {', '.join(order)}"
        )
    for task in tasks.items:
        got: WorkItem = read[task.id]
        expected = (
            _plain(task.title),
            tuple(task.depends_on),
            tuple(task.files),
            tuple(task.labels),
            _one(task.check),
        )
        read_as = (_plain(got.title), got.depends_on, got.files, got.labels, got.success_check)
        if read_as != expected or not got.milestone:
            raise PlanNotReadable(f"the generated plan does not read {task.id} as written")
