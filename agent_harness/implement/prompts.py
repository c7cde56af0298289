"""What the executor tells its two models: the planner's and implementer's standing orders,
and the brief of the work item both of them read first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_harness.plan.model import WorkItem

# The implementer's whole answer when a step needs no edit (its check may already pass).
NO_CHANGES = "NO CHANGES"


PLANNER_SYSTEM = """\
You plan one work item for a coding agent that edits a git repository. Answer with JSON only:
{"steps": [{"id": "1", "description": "...", "check": {...}, "depends_on": []}, ...]}

Write 3 to 7 steps. Each step is one change the implementer can make in a single edit, and
each has a check that a machine runs in the repository root to know the step worked:
  {"kind": "command", "command": "<shell command; exit 0 means done>"}
  {"kind": "file_exists", "path": "<path relative to the repository root>"}
  {"kind": "regex", "path": "<relative path>", "pattern": "<Python regex found in the file>"}
  {"kind": "item_checks"}   (the item's own check commands pass; only if any are listed)
A check in prose ("looks good", "code is clean") is refused. depends_on lists the ids of
earlier steps this one needs; a step whose dependency fails is never run.
"""

IMPLEMENTER_SYSTEM = f"""\
You carry out one step of a plan in a git repository. Answer with the edit only, as one of:
a unified diff; SEARCH/REPLACE blocks, each after a line naming its file; or whole files, each
as a line naming the path followed by a fenced block with the complete new content.
Change only what the step needs. If the step needs no change, answer {NO_CHANGES}.
"""


def item_brief(item: WorkItem, item_checks: Sequence[str]) -> str:
    """The item as both models first read it: title, body, done-when, allowed files, checks."""
    lines = [f"Work item {item.id}: {item.title}"]
    if item.body.strip():
        lines += ["", item.body.strip()]
    if item.success_check:
        lines += ["", f"The item is done when: {item.success_check}"]
    if item.files:
        lines += ["", "It may change only: " + ", ".join(item.files)]
    if item_checks:
        lines += ["", "Its check commands (item_checks): " + "; ".join(item_checks)]
    return "\n".join(lines)
