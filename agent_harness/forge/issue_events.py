"""What happens to an issue or pull request besides what people write on it, kept as GitHub's
issue events: labeled, unlabeled, milestoned, demilestoned, renamed, locked, unlocked, closed,
reopened and merged.

The handlers that change an issue record its events here, in their own transaction; the
events routes and the timeline (forge/timeline.py) read them back. Each event keeps the
fields its kind carries by value, as GitHub does: a label renamed or deleted later is still
named as it was in the events it was in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from agent_harness.forge.db import ForgeDB
from agent_harness.forge.routes import Call
from agent_harness.forge.shapes import Renderer, node_id

# GitHub's GraphQL type of each event kind, of which its node ids are made.
_TYPES = {
    "labeled": "LabeledEvent",
    "unlabeled": "UnlabeledEvent",
    "milestoned": "MilestonedEvent",
    "demilestoned": "DemilestonedEvent",
    "renamed": "RenamedTitleEvent",
    "locked": "LockedEvent",
    "unlocked": "UnlockedEvent",
    "closed": "ClosedEvent",
    "reopened": "ReopenedEvent",
    "merged": "MergedEvent",
}
_DETAIL = (
    "label_name",
    "label_color",
    "rename_from",
    "rename_to",
    "milestone_title",
    "lock_reason",
    "state_reason",
)


def record(
    call: Call, issue_id: int, event: str, commit_id: str | None = None, **detail: Any
) -> None:
    """One event on issue `issue_id`, by the caller, now. `detail` names the columns of its
    kind: `label_name`/`label_color`, `rename_from`/`rename_to`, `milestone_title`,
    `lock_reason`, `state_reason`."""
    assert event in _TYPES and set(detail) <= set(_DETAIL), (event, detail)
    columns = ["issue_id", "actor_id", "event", "commit_id", "created_at", *detail]
    values = [issue_id, call.user["id"], event, commit_id, call.forge.now(), *detail.values()]
    call.forge.db.run(
        f"INSERT INTO issue_events ({', '.join(columns)})"
        f" VALUES ({', '.join('?' for _ in columns)})",
        *values,
    )


def labels_changed(call: Call, issue_id: int, before: Iterable[int], after: Iterable[int]) -> None:
    """`labeled` for each label id in `after` only, `unlabeled` for each in `before` only."""
    old, new = list(dict.fromkeys(before)), list(dict.fromkeys(after))
    moves = [("unlabeled", i) for i in old if i not in new] + [
        ("labeled", i) for i in new if i not in old
    ]
    for event, label_id in moves:
        label = call.forge.db.one("SELECT name, color FROM labels WHERE id = ?", label_id)
        if label is not None:
            record(call, issue_id, event, label_name=label["name"], label_color=label["color"])


def milestone_changed(call: Call, issue_id: int, before: int | None, after: int | None) -> None:
    """`demilestoned` from the milestone the issue leaves, `milestoned` to the one it joins."""
    if before == after:
        return
    for event, milestone_id in (("demilestoned", before), ("milestoned", after)):
        row = call.forge.db.one("SELECT title FROM milestones WHERE id = ?", milestone_id)
        if row is not None:
            record(call, issue_id, event, milestone_title=row["title"])


def of_issue(db: ForgeDB, issue_id: int) -> list[sqlite3.Row]:
    return db.all("SELECT * FROM issue_events WHERE issue_id = ? ORDER BY id", issue_id)


def render(render: Renderer, row: sqlite3.Row, repo_url: str) -> dict[str, Any]:
    """An event as GitHub's issue events list it: the common fields, then its kind's own."""
    commit = row["commit_id"]
    out: dict[str, Any] = {
        "id": row["id"],
        "node_id": node_id(_TYPES.get(row["event"], "IssueEvent"), row["id"]),
        "url": f"{repo_url}/issues/events/{row['id']}",
        "actor": render.user_by_id(row["actor_id"]),
        "event": row["event"],
        "commit_id": commit,
        "commit_url": f"{repo_url}/commits/{commit}" if commit else None,
        "created_at": row["created_at"],
        "performed_via_github_app": None,
    }
    kind = row["event"]
    if kind in ("labeled", "unlabeled"):
        out["label"] = {"name": row["label_name"], "color": row["label_color"]}
    elif kind in ("milestoned", "demilestoned"):
        out["milestone"] = {"title": row["milestone_title"]}
    elif kind == "renamed":
        out["rename"] = {"from": row["rename_from"], "to": row["rename_to"]}
    elif kind == "locked":
        out["lock_reason"] = row["lock_reason"]
    elif kind in ("closed", "reopened"):
        out["state_reason"] = row["state_reason"]
    return out
