"""Plans whose tasks are numbered rather than named, as Kiro writes its tasks.md:

    - [ ] 1. Set up the project structure
    - [ ] 2. Implement the data models
    - [ ] 2.1 Write the model interfaces
      - _Requirements: 1.2_
    - [ ]* 2.2 Write unit tests for the models

A file with no item of the usual forms, but checkboxes that start with such a number (`1.`,
`2.1`), is read again with the numbers as ids. A task that has sub-tasks (`2` above, whether
the sub-tasks follow it or are nested in it) is the section they belong to, not an item of its
own (`fold_groups`, also used for Taskmaster's sub-tasks): each sub-task is an item, and takes
from its task what the task said: its text (quoted at the top of the body, under the task's
number and title, so the agent knows the larger goal), labels, milestone, dependencies and
done mark. Depending on a task with sub-tasks means depending on all of them. A task marked
optional (`- [ ]*`) is labelled so. A file that mixes named ids with numbered checkboxes keeps
reading the numbered ones as checkboxes with no id, and says so line by line.
"""

from __future__ import annotations

import re

from agent_harness.errors import PlanRefused
from agent_harness.plan.model import Notice, Plan, WorkItem

# `1.`, `2.1`, `2.1.` and `3.2.1`, then the title. A bare number (`- [ ] 3 eggs`) is no task.
# Kiro marks a task it thinks optional (often unit tests) with `*` after the box: `- [ ]* 2.3`.
NUMBERED_TASK = re.compile(
    r"^(\*\s*)?(\d{1,6}(?:\.\d{1,6}){1,3}|\d{1,6}(?=\.))\.?\s+(\S.*)$", re.DOTALL
)
OPTIONAL = "optional"  # the label of a task marked optional
NAMED_MAX = 10  # groups named in the note, at most
EDGES_MAX = 1_000_000  # dependencies in all, once groups are expanded


def numbered_task(text: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(id, title, labels) of a checkbox's first line that starts with a task number."""
    match = NUMBERED_TASK.match(text.strip())
    if match is None:
        return None
    return match.group(2), match.group(3), (OPTIONAL,) if match.group(1) else ()


READ_NOTE = (
    "numbered tasks (as Kiro's tasks.md writes them) are read as items, their numbers as their ids"
)


def fold_groups(plan: Plan) -> Plan:
    """Make each task with sub-tasks the section of its sub-tasks (see the module's
    docstring), and say which tasks were folded so."""
    by_id = {item.id: item for item in plan.items}
    groups = {parent for i in by_id for parent in ancestors(i)} & by_id.keys()
    if not groups:
        return plan
    leaves: dict[str, list[str]] = {}
    for item_id in by_id:
        if item_id not in groups:
            for parent in ancestors(item_id):
                if parent in groups:
                    leaves.setdefault(parent, []).append(item_id)
    unread = list(plan.unread)
    items = []
    edges = 0
    for item in plan.items:
        if item.id not in groups:
            items.append(_with_its_groups(item, by_id, groups, leaves, unread))
            edges += len(items[-1].depends_on)
            if edges > EDGES_MAX:  # a file of a few hundred kB can ask for billions
                raise PlanRefused(
                    f"{plan.source}: more than {EDGES_MAX:,} dependencies once each task with "
                    "sub-tasks stands for all of them"
                )
    named = sorted(groups, key=_number_key)
    shown = ", ".join(named[:NAMED_MAX])
    if len(named) > NAMED_MAX:
        shown += f" and {len(named) - NAMED_MAX} more"
    note = (
        f"tasks with sub-tasks ({shown}) are the sections of their sub-tasks, not items: each "
        "sub-task is worked on its own"
    )
    unread.sort(key=lambda notice: notice.line)
    return plan.model_copy(
        update={"items": tuple(items), "unread": tuple(unread), "notes": (*plan.notes, note)}
    )


def _with_its_groups(
    item: WorkItem,
    by_id: dict[str, WorkItem],
    groups: set[str],
    leaves: dict[str, list[str]],
    unread: list[Notice],
) -> WorkItem:
    parents = [by_id[g] for g in ancestors(item.id) if g in groups]  # outermost first
    said = [_quoted(parent) for parent in parents]
    labels = list(dict.fromkeys(label for p in (*parents, item) for label in p.labels))
    milestone = item.milestone or next(
        (p.milestone for p in reversed(parents) if p.milestone), None
    )
    own = {p.id for p in parents}
    deps: list[str] = []
    for dep in item.depends_on:
        if dep in own:
            unread.append(
                Notice(
                    line=item.line,
                    reason=f"{item.id} depends on task {dep}, which it is part of; "
                    "dependency ignored",
                )
            )
        else:
            deps.append(dep)
    for parent in parents:  # what the task waits for, unless it is the task's own sub-task
        deps += [d for d in parent.depends_on if not d.startswith(parent.id + ".")]
    expanded: dict[str, None] = {}  # an ordered set
    for dep in deps:
        for one in leaves.get(dep, [dep]) if dep in groups else [dep]:
            if one != item.id:
                expanded[one] = None
    return item.model_copy(
        update={
            "body": "\n\n".join([*said, item.body] if item.body else said),
            "labels": tuple(labels),
            "milestone": milestone,
            "depends_on": tuple(expanded),
            "done": item.done or any(p.done for p in parents),
        }
    )


def _quoted(group: WorkItem) -> str:
    """What a task with sub-tasks said, as its sub-tasks' bodies start with it."""
    lines = [f"Part of task {group.id}: {group.title}"]
    text = group.body
    if group.success_check:
        text = f"{text}\n\nThe task as a whole is checked by: {group.success_check}".strip()
    if text:
        lines.append("")
        lines += [f"> {line}".rstrip() for line in text.split("\n")]
    return "\n".join(lines)


def ancestors(task: str) -> list[str]:
    """`2.1.3` -> [`2`, `2.1`]: the tasks it is numbered under, outermost first."""
    parts = task.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def _number_key(task: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in task.split("."))
