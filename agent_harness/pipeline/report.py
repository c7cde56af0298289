"""What a run tells at its end: each item's state, attempts, pull request and, for an item that
did not run, why (it waits for a dependency, a window, a person)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_harness.pipeline.history import ItemHistory
from agent_harness.plan.model import Plan
from agent_harness.queue import items
from agent_harness.queue.items import ItemRecord, ItemState
from agent_harness.store.database import Store
from agent_harness.tracker.sync import SyncReport


@dataclass
class ItemOutcome:
    id: str
    title: str
    state: str
    attempts: int
    reason: str | None = None
    pr_number: int | None = None
    pr_url: str | None = None
    not_before: float | None = None


@dataclass
class RunReport:
    project: str
    sync: SyncReport | None
    items: list[ItemOutcome] = field(default_factory=list)
    events: int = 0
    cost_usd: float | None = None
    unpriced: int = 0  # this run's agent runs and reviews whose cost is not known
    stopped_by_budget: bool = False
    drained: bool = False  # `agent-harness control drain` ended it: unstarted items wait
    stopped_because: str | None = None  # why the run stopped claiming, when it did
    run_id: str | None = None
    reconciled: list[dict[str, Any]] = field(default_factory=list)
    # What changed where no agent should have written (the plan, the clone's default checkout)
    warnings: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "items": [vars(item) for item in self.items],
            "events": self.events,
            "cost_usd": self.cost_usd,
            "unpriced": self.unpriced,
            "stopped_by_budget": self.stopped_by_budget,
            "drained": self.drained,
            "stopped_because": self.stopped_because,
            "run_id": self.run_id,
            "reconciled": self.reconciled,
            "warnings": self.warnings,
            "sync": self.sync.as_json() if self.sync else None,
        }


def unfinished_deps(deps: Sequence[str], records: Mapping[str, ItemRecord]) -> list[str]:
    """Dependencies not yet in a state the queue counts as ready (merged, done)."""
    return [
        dep
        for dep in deps
        if dep not in records or records[dep].state not in items.DEFAULT_READY_WHEN
    ]


def dependency_wait(deps: Sequence[str], records: Mapping[str, ItemRecord]) -> str | None:
    """What an item that is not started waits for: `waits for T1 (pr_open) to be merged`;
    None when no dependency of the queue holds it back."""
    waiting_on = [
        f"{dep} ({records[dep].state})" for dep in unfinished_deps(deps, records) if dep in records
    ]
    return "waits for " + ", ".join(waiting_on) + " to be merged" if waiting_on else None


_STILL_OPEN = frozenset({ItemState.CLAIMED, ItemState.CHECKS, ItemState.REVIEW, ItemState.PR_OPEN})


def _outcome(store: Store, record: ItemRecord, title: str, reason: str | None) -> ItemOutcome:
    """An item as the report shows it, with its pull request, if it opened one."""
    opened = ItemHistory.read(store, record.project, record.id).pull()
    return ItemOutcome(
        id=record.id,
        title=title,
        state=str(record.state),
        attempts=record.attempts,
        reason=reason,
        pr_number=opened.number if opened else None,
        pr_url=opened.url if opened else None,
        not_before=record.not_before,
    )


def build_report(
    store: Store,
    project: str,
    plan: Plan,
    sync: SyncReport | None,
    since_id: int = 0,
    **totals: Any,
) -> RunReport:
    """The report of `plan`'s items as the queue holds them now; its events are those of the
    project's log after event `since_id` (the run's own, and any another host wrote meanwhile)."""
    out = RunReport(project=project, sync=sync, **totals)
    records = {record.id: record for record in items.list_items(store, project)}
    for item in plan.items:
        record = records.get(item.id)
        if record is None:
            continue
        reason = record.reason
        if record.state in (ItemState.PENDING, ItemState.WAITING) and not reason:
            reason = dependency_wait(item.depends_on, records)
        out.items.append(_outcome(store, record, item.title, reason))
    # An item taken out of the plan while it was being worked, or with its pull request open,
    # is still open work: it is reported, not left for `work` alone to show.
    in_plan = {item.id for item in plan.items}
    for record in records.values():
        if record.id not in in_plan and record.state in _STILL_OPEN:
            gone = f"no longer in the plan; still {record.state}"
            out.items.append(_outcome(store, record, record.title, gone))
    with store.transaction(write=False) as tx:  # counted, not read and parsed one by one
        counted = tx.one(
            "SELECT COUNT(*) FROM events WHERE project = ? AND id > ?", (project, since_id)
        )
    out.events = int(counted[0]) if counted else 0
    return out
