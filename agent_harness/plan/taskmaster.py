"""Taskmaster's tasks.json (`.taskmaster/tasks/tasks.json`), read as a plan.

Taskmaster keeps a project's tasks as JSON: `{"tasks": [...]}`, or since it has tags, one entry
per tag (`{"master": {"tasks": [...], "metadata": {...}}}`). A task has a numeric `id`, a
`title`, a `description`, `details`, a `testStrategy`, a `priority`, `dependencies` (ids), a
`status` and `subtasks`, whose ids count from 1 within their task. Read here as:

- each task is an item with its own number as id; its body is the description, then the
  details; its success check is the test strategy; its priority a label (`priority:high`);
- a task with sub-tasks is their section, as in a file of numbered tasks (`numbered`): each
  sub-task is an item `<task>.<sub-task>` that takes the task's text, labels and dependencies;
  depending on such a task means depending on every one of its sub-tasks;
- a sub-task's dependency is a sibling's number, or a full id (`"3.1"`, or a task's number
  when no sibling has it); one on the task it is part of says nothing, and is reported;
- `done` and `cancelled` tasks are done: never worked, no issue made for them; `review`,
  `deferred` and `blocked` ones are open, and each is reported;
- of several tags, `master` is read, and the others are named in a note; a file whose one tag
  is not `master` is read, and the note names the tag.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_harness.errors import InputError
from agent_harness.plan.dependencies import brief, lines_by_id, refuse_cycles, unknown_deps
from agent_harness.plan.model import Notice, Plan, WorkItem
from agent_harness.plan.numbered import fold_groups

DONE = frozenset({"done", "completed", "cancelled"})
# Taskmaster's statuses that are neither to do nor done: read as open, each said, since the
# harness would work the task as if it were new.
ASKED_OF_A_PERSON = {
    "review": "task {} is 'review' in Taskmaster (done, awaiting review): read as open, so it "
    "would be worked again; set it done there if its work is finished",
    "deferred": "task {} is 'deferred' in Taskmaster: read as open, so it would be worked now; "
    "set it cancelled there, or leave it out with --only",
    "blocked": "task {} is 'blocked' in Taskmaster: read as open; name what it waits for in "
    "its dependencies, or leave it out with --only",
}
DEFAULT_TAG = "master"
NUMBER = re.compile(r"[0-9]{1,6}")  # ASCII: int() would read other scripts' digits too
DEP = re.compile(r"[0-9]{1,6}(?:\.[0-9]{1,6})?")
PRIORITY = re.compile(r"[A-Za-z0-9_ -]{1,40}")
NAMED_MAX = 10  # tags named in a note or an error, at most


def is_taskmaster(raw: Any) -> bool:
    """Whether a JSON document is shaped like Taskmaster's tasks.json (tagged or not)."""
    if not isinstance(raw, dict) or not raw:
        return False
    if isinstance(raw.get("tasks"), list):
        return True
    return all(isinstance(tag, dict) and isinstance(tag.get("tasks"), list) for tag in raw.values())


def from_taskmaster(raw: dict[str, Any], text: str, source: str) -> Plan:
    """The plan a tasks.json holds (`text` is the file, for the line each task starts on)."""
    tag, tasks, notes = _tasks_of(raw, source)
    lines = _Lines(text, tag)
    unread: list[Notice] = []
    drafts: list[tuple[WorkItem, list[Any]]] = []
    for task in tasks:
        number = _number(task, source, "a task")
        parent = _item(task, number, lines, unread, source)
        drafts.append((parent, _deps(task, source, number)))
        subtasks = task.get("subtasks") or []
        if not isinstance(subtasks, list):
            raise InputError(f"{source}: task {number}: subtasks is not a list")
        for sub in subtasks:
            sub_id = f"{number}.{_number(sub, source, f'a sub-task of task {number}')}"
            sub_item = _item(sub, sub_id, lines, unread, source)
            drafts.append((sub_item, _deps(sub, source, sub_id)))
    plan = fold_groups(_resolved(drafts, source, unread))
    refuse_cycles(list(plan.items), source)  # once a task with sub-tasks stands for them all
    return plan.model_copy(update={"notes": (*notes, *plan.notes)})


def _tasks_of(raw: dict[str, Any], source: str) -> tuple[str | None, list[Any], list[str]]:
    """(the tag read, its tasks, notes on the tags left unread)."""
    tags = sorted(
        name for name, value in raw.items() if isinstance(value, dict) and "tasks" in value
    )
    if isinstance(raw.get("tasks"), list):
        tag, tasks = None, raw["tasks"]
    elif DEFAULT_TAG in raw or len(raw) == 1:
        tag = DEFAULT_TAG if DEFAULT_TAG in raw else next(iter(raw))
        tasks = raw[tag]["tasks"]
    else:
        raise InputError(
            f"{source}: Taskmaster tags {_names(tags)} and no {DEFAULT_TAG}: copy the tag to "
            "work on into a file of its own"
        )
    others = [name for name in tags if name != tag]
    if not others and tag not in (None, DEFAULT_TAG):
        return tag, tasks, [f"Taskmaster tag {_names([tag])} read (the file's only tag)"]
    if not others:
        return tag, tasks, []
    if tag is None:
        return (
            tag,
            tasks,
            [f"the file's own tasks list read; Taskmaster tags not read: {_names(others)}"],
        )
    return tag, tasks, [f"Taskmaster tag {_names([tag])} read; not read: {_names(others)}"]


def _names(names: list[str] | list[str | None]) -> str:
    shown = [repr(str(name))[1:-1][:40] for name in names[:NAMED_MAX]]  # one line, bounded
    more = len(names) - NAMED_MAX
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


class _Lines:
    """The line each task starts on: the `"id"` keys of the file, found in one pass, matched to
    the tasks in order (JSON keeps no line numbers)."""

    LOOKAHEAD = 64  # ids passed over to find a task's, at most: a miss costs no rescan

    def __init__(self, text: str, tag: str | None) -> None:
        start = 0
        if tag is not None:
            found = re.search(rf'(?<!\\)"{re.escape(tag)}"\s*:\s*\{{', text)
            start = found.end() if found else 0
        self.ids: list[tuple[str, int]] = []
        self.next = 0
        self.line = line = 1 + text.count("\n", 0, start)
        at = start
        for match in re.finditer(r'"id"\s*:\s*"?\s*([^",}\s]*)', text[start:]):
            line += text.count("\n", at, start + match.start())
            at = start + match.start()
            written = match.group(1)  # "07" is task 7, as `_number` reads it
            self.ids.append((_canonical(written) if NUMBER.fullmatch(written) else written, line))

    def of(self, number: str) -> int:
        for index in range(self.next, min(self.next + self.LOOKAHEAD, len(self.ids))):
            if self.ids[index][0] == number:
                self.next = index + 1
                self.line = self.ids[index][1]
                break
        return self.line


def _number(task: Any, source: str, what: str) -> str:
    if not isinstance(task, dict):
        raise InputError(f"{source}: {what} is not an object")
    number = task.get("id")
    if number is None or "id" not in task:
        raise InputError(f"{source}: {what} has no id")
    if isinstance(number, bool) or not isinstance(number, int | str):
        shown = json.dumps(number)[:40]
        raise InputError(f"{source}: {what} has id {shown}, not a whole number")
    if not NUMBER.fullmatch(str(number).strip()):
        raise InputError(f"{source}: {what} has id {str(number)[:40]!r}, not a whole number")
    return _canonical(str(number).strip())


def _canonical(written: str) -> str:
    """The id a number written as NUMBER or DEP stands for: "07" is task 7, "09.01" is 9.1."""
    return ".".join(str(int(part)) for part in written.split("."))


def _item(
    task: dict[str, Any], item_id: str, lines: _Lines, unread: list[Notice], source: str
) -> WorkItem:
    line = lines.of(item_id.rsplit(".", 1)[-1])
    title = task.get("title")
    if not isinstance(title, str) or not title.strip():
        raise InputError(f"{source}: task {item_id} (line {line}) has no title")
    body = "\n\n".join(
        text.strip()
        for text in (task.get("description"), task.get("details"))
        if isinstance(text, str) and text.strip()
    )
    check, priority, status = task.get("testStrategy"), task.get("priority"), task.get("status")
    labels: tuple[str, ...] = ()
    if isinstance(priority, str) and PRIORITY.fullmatch(priority.strip()):
        labels = (f"priority:{priority.strip()}",)
    elif priority not in (None, ""):
        shown = repr(priority)[:40]
        unread.append(
            Notice(line=line, reason=f"{item_id}: priority {shown} is no label; left out")
        )
    said = status.strip().lower() if isinstance(status, str) else ""
    if said in ASKED_OF_A_PERSON:
        unread.append(Notice(line=line, reason=ASKED_OF_A_PERSON[said].format(item_id)))
    return WorkItem(
        id=item_id,
        title=" ".join(title.split()),
        body=body,
        labels=labels,
        success_check=check.strip() if isinstance(check, str) and check.strip() else None,
        done=isinstance(status, str) and status.lower() in DONE,
        line=line,
        form="table",
    )


def _deps(task: dict[str, Any], source: str, item_id: str) -> list[Any]:
    deps = task.get("dependencies") or []
    if not isinstance(deps, list):
        raise InputError(f"{source}: task {item_id}: dependencies is not a list")
    return deps


def _resolved(drafts: list[tuple[WorkItem, list[Any]]], source: str, unread: list[Notice]) -> Plan:
    """Items with their dependencies named by full id: a sub-task's bare number is a sibling's
    when one has it, else a task's. Unknown or malformed ones are dropped and reported."""
    ids = lines_by_id((item for item, _ in drafts), source, "task")
    items: list[WorkItem] = []
    for item, wanted in drafts:
        parent = item.id.rsplit(".", 1)[0] if "." in item.id else None
        found: dict[str, None] = {}  # an ordered set
        unknown: list[str] = []
        for dep in wanted:
            text = (
                str(dep).strip() if isinstance(dep, int | str) and not isinstance(dep, bool) else ""
            )
            if not DEP.fullmatch(text):
                unknown.append(brief(dep))
                continue
            name = _canonical(text)
            if parent is not None and "." not in name and f"{parent}.{name}" in ids:
                name = f"{parent}.{name}"
            if name == item.id:  # a sub-task's own number, read as a sibling's
                said = f"{item.id} depends on itself ({text}); dependency ignored"
                unread.append(Notice(line=item.line, reason=said))
            elif name in ids:
                found[name] = None
            else:
                unknown.append(text)
        if unknown:
            unread.append(Notice(line=item.line, reason=unknown_deps(item.id, unknown)))
        items.append(item.model_copy(update={"depends_on": tuple(found)}))
    unread.sort(key=lambda notice: notice.line)
    return Plan(source=source, items=tuple(items), unread=tuple(unread))
