"""Refusing a plan whose tasks moved to other ids since its issues were made.

Issues follow item ids (the hidden marker names the id), never titles. A plan renumbered by
hand, or a task inserted Kiro's way (`2.2` new, the old `2.2` now `2.3`), would have every
shifted issue retitled to the task now under its id: a closed issue would carry a task never
done (it is not worked while its issue is closed), and an open pull request would close the
wrong issue. A sync sees it coming: an item's new title is the one another item's issue was
made with, that other item, still in the plan, no longer has it, and the item has an issue
of its own (which would be retitled).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent_harness.errors import HarnessError
from agent_harness.plan.model import Plan
from agent_harness.tracker.protocol import IssueRecord

MOVES_SHOWN = 3


class PlanRenumbered(HarnessError):
    """The plan's tasks moved to other ids since their issues were made; nothing was written."""

    exit_code = 3


@dataclass(frozen=True)
class Move:
    """Task `title`, whose issue `issue` was made under `was`, is now under `now`."""

    now: str
    was: str
    issue: int
    title: str


def moves(plan: Plan, issues: Mapping[str, Sequence[IssueRecord]]) -> list[Move]:
    """The tasks that moved to another id, by the titles the items' issues were made with
    (`issues`: each item id's marked issues; items with twins are left out)."""
    made_with: dict[str, tuple[str, int]] = {}  # item id -> its issue's title, its number
    for item_id, found in issues.items():
        if len(found) == 1:
            made_with[item_id] = (found[0].title.removeprefix(f"{item_id}: "), found[0].number)
    by_title: dict[str, list[str]] = {}
    for item_id, (title, _number) in made_with.items():
        by_title.setdefault(title, []).append(item_id)
    now = {item.id: item.title for item in plan.items}
    found_moves = []
    for item in plan.items:
        own = made_with.get(item.id)
        if own is None or own[0] == item.title:
            # Its own title as its issue has it; or no issue yet: a new task under a new id,
            # even one titled as another's was (`T1 Tests` renamed, `T3 Tests` added).
            continue
        for was in by_title.get(item.title, ()):
            title, number = made_with[was]
            # That item, still in the plan (a task with a new id is no renumbering), has lost
            # the title it had.
            if was != item.id and was in now and now[was] != title:
                found_moves.append(Move(item.id, was, number, title))
    return found_moves


def refuse_renumbering(plan: Plan, issues: Mapping[str, Sequence[IssueRecord]], repo: str) -> None:
    """Raise PlanRenumbered when the plan's tasks moved to other ids (see `moves`)."""
    found = moves(plan, issues)
    if not found:
        return
    shown = "; ".join(
        f"{m.now} now has {m.title[:60]!r}, the task issue #{m.issue} was made for under {m.was}"
        for m in found[:MOVES_SHOWN]
    )
    more = f" (and {len(found) - MOVES_SHOWN} more)" if len(found) > MOVES_SHOWN else ""
    raise PlanRenumbered(
        f"{plan.source} looks renumbered against {repo}'s issues: {shown}{more}. Issues follow "
        "ids, and so does what the queue recorded of each (merged, failed, its pull request), "
        "so syncing would give those issues, and that record, to other tasks. Put each task "
        "back under the id it had: a new task takes a new id, and a task started over takes an "
        "id no issue has; nothing was written"
    )
