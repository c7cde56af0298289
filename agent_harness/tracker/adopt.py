"""Repairing an item that ended up with more than one issue: keep the oldest, label the rest.

Twins can only come from a history the harness no longer makes (a marker planted in an item's
text, a create resent too soon), but an item stuck with two marked issues is stuck for good:
the sync writes neither, since either could be the wrong one. Adoption keeps the oldest issue,
and turns each younger one into a plain duplicate: its marker is defused (it no longer claims
the item), it says which issue it duplicates, and it gets the `duplicate` label. Like the sync,
it never closes an issue; a person may.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_harness.tracker.markers import DamagedMarker, defuse_markers, read_marker
from agent_harness.tracker.protocol import IssueDraft, IssueRecord, Tracker

DUPLICATE_LABEL = "duplicate"


@dataclass(frozen=True)
class Adoption:
    """One item's issues after the repair."""

    item_id: str
    kept: int
    labelled: tuple[int, ...]


def marked_issues(tracker: Tracker, plan_key: str) -> dict[str, list[IssueRecord]]:
    """Every issue whose marker claims an item of this plan, by item id, oldest first."""
    found: dict[str, list[IssueRecord]] = {}
    for issue in tracker.list_issues():
        try:
            marker = read_marker(issue.body)
        except DamagedMarker:
            continue
        if marker is not None and marker.plan_key == plan_key:
            found.setdefault(marker.item_id, []).append(issue)
    return {item: sorted(issues, key=lambda i: i.number) for item, issues in found.items()}


def adopt_duplicates(tracker: Tracker, plan_key: str, *, dry_run: bool = False) -> list[Adoption]:
    """Keep the oldest issue of every item claimed more than once; label the younger ones."""
    adoptions: list[Adoption] = []
    for item_id, issues in sorted(marked_issues(tracker, plan_key).items()):
        if len(issues) < 2:
            continue
        kept, younger = issues[0], issues[1:]
        if not dry_run:
            _ensure_label(tracker)
            for issue in younger:
                tracker.update_issue(issue.number, _as_duplicate(issue, kept.number))
        adoptions.append(Adoption(item_id, kept.number, tuple(i.number for i in younger)))
    return adoptions


def _as_duplicate(issue: IssueRecord, kept: int) -> IssueDraft:
    note = (
        f"**Duplicate of #{kept}.** agent-harness keeps #{kept} for this item; this issue no "
        "longer belongs to the plan (`agent-harness plan --adopt-duplicate`)."
    )
    body = f"{note}\n\n{defuse_markers(issue.body)}"
    labels = tuple(dict.fromkeys((*issue.labels, DUPLICATE_LABEL)))
    return IssueDraft(issue.title, body, labels, issue.milestone)


def _ensure_label(tracker: Tracker) -> None:
    if DUPLICATE_LABEL.lower() not in {label.lower() for label in tracker.list_labels()}:
        tracker.create_label(DUPLICATE_LABEL, "cfd3d7")
