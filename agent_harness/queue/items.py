"""The items of the work queue: their states, what a person or the tracker does to them, reading.

Every state change is checked against `TRANSITIONS` and appends its event in the same
transaction, so the queue and its history never disagree. Claims and leases are `leases`'.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent_harness.errors import HarnessError, UsageError
from agent_harness.plan.model import Plan, WorkItem
from agent_harness.store.database import Store, Tx
from agent_harness.store.events import (
    Enqueued,
    Event,
    Failed,
    Flagged,
    Outcome,
    Skipped,
    Unblocked,
    Updated,
    Woken,
)
from agent_harness.store.migrations import UNCHAINED


class ItemState(StrEnum):
    PENDING = "pending"
    WAITING = "waiting"  # parked until `not_before`; the claim that parked it is not counted
    CLAIMED = "claimed"
    CHECKS = "checks"
    REVIEW = "review"
    PR_OPEN = "pr_open"
    MERGED = "merged"
    CLOSED = "closed"
    REVERTED = "reverted"
    FAILED = "failed"
    SKIPPED = "skipped"
    DONE = "done"  # checked off in the plan: never run


S = ItemState


_WORKING = {S.CLAIMED, S.CHECKS, S.REVIEW, S.PR_OPEN}
# The same, as an SQL list: live leases are held only in these states (items_by_state finds them).
LEASED_STATES = ", ".join(f"'{state.value}'" for state in sorted(_WORKING))


_GIVE_BACK = {S.PENDING, S.WAITING, S.FAILED}


TRANSITIONS: dict[ItemState, frozenset[ItemState]] = {
    S.PENDING: frozenset({S.CLAIMED, S.SKIPPED, S.DONE, S.MERGED, S.CLOSED}),
    S.WAITING: frozenset({S.CLAIMED, S.SKIPPED, S.DONE, S.MERGED, S.CLOSED}),
    S.CLAIMED: frozenset({S.CHECKS, S.REVIEW, S.PR_OPEN, S.MERGED, S.CLOSED} | _GIVE_BACK),
    S.CHECKS: frozenset({S.REVIEW, S.PR_OPEN, S.MERGED, S.CLOSED} | _GIVE_BACK),
    S.REVIEW: frozenset({S.CHECKS, S.PR_OPEN, S.MERGED, S.CLOSED} | _GIVE_BACK),
    S.PR_OPEN: frozenset({S.CHECKS, S.REVIEW, S.MERGED, S.CLOSED} | _GIVE_BACK),
    S.MERGED: frozenset({S.REVERTED}),
    S.CLOSED: frozenset({S.PENDING}),  # retried by a person
    # Retried by a person or the reconciler; a revert of the revert brings it back to merged.
    S.REVERTED: frozenset({S.PENDING, S.MERGED}),
    # The tracker has the last word: a PR merged or closed while its item was failed (its
    # last attempt died after opening the PR) or given back still ends the item that way.
    S.FAILED: frozenset({S.PENDING, S.DONE, S.MERGED, S.CLOSED}),
    S.SKIPPED: frozenset({S.PENDING, S.DONE, S.MERGED, S.CLOSED}),
    S.DONE: frozenset(),
}


# A lapsed lease may be claimed again from any working stage.
for _stage in _WORKING:
    TRANSITIONS[_stage] = TRANSITIONS[_stage] | {S.CLAIMED}


STAGES = frozenset({S.CHECKS, S.REVIEW, S.PR_OPEN})


WORKER_OUTCOMES = frozenset({S.PR_OPEN, S.MERGED, S.CLOSED})


TRACKER_OUTCOMES = frozenset({S.MERGED, S.CLOSED, S.REVERTED})


# What a dependency must reach before its dependents may run. The run pipeline may add pr_open.
DEFAULT_READY_WHEN = frozenset({"merged", "done"})


class IllegalTransition(HarnessError):
    """That state change is not allowed."""

    def __init__(self, item_id: str, current: str, wanted: str) -> None:
        self.item_id = item_id
        self.current = current
        self.wanted = wanted
        super().__init__(f"{item_id} cannot go from {current} to {wanted}")


class UnknownItem(HarnessError):
    """No such item in the queue."""

    exit_code = 2

    def __init__(self, project: str, item_id: str) -> None:
        self.project = project
        self.item_id = item_id
        # Quoted when it has spaces or other marks around it (`" T2"`), which a bare name hides.
        shown = item_id if item_id.strip() == item_id and item_id.isprintable() else repr(item_id)
        super().__init__(f"no item {shown} in project {project}")


class ItemBusy(HarnessError):
    """The item is held by a live lease."""

    exit_code = 2  # as every other refusal of `work retry`

    def __init__(self, item_id: str, worker: str, expires_at: float) -> None:
        self.item_id = item_id
        self.worker = worker
        self.expires_at = expires_at
        until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires_at))
        super().__init__(
            f"{item_id} is held by {worker} (its lease lives until {until}); retry it once "
            "that worker is done with it, or its lease has lapsed"
        )


class NoProjectYet(UsageError):
    """The database holds no project yet (nothing to read or act on: the API's 404)."""


class NoSuchProject(NoProjectYet):
    """A project named that this database does not hold (the API's 404)."""

    def __init__(self, project: str, known: Sequence[str]) -> None:
        self.project = project
        shown = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if known[5:] else "")
        super().__init__(f"no project {project} in this database (it holds {shown or 'none'})")


class AmbiguousProject(UsageError):
    """Several projects share this database; name one."""

    def __init__(self, projects: Sequence[str]) -> None:
        self.projects = tuple(projects)
        if projects:
            listed = ", ".join(projects)
            message = f"several projects in this database, pick one with --project: {listed}"
        else:
            message = "no projects in this database yet"
        super().__init__(message)


@dataclass(frozen=True)
class EnqueueResult:
    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    flagged: tuple[str, ...] = ()  # edited while in flight: the edit is recorded, not applied


@dataclass(frozen=True)
class ItemRecord:
    project: str
    id: str
    title: str
    state: ItemState
    attempts: int
    max_attempts: int
    worker: str | None
    lease_expires: float | None
    not_before: float | None
    reason: str | None
    blocked_by: str | None
    flagged: bool
    depends_on: tuple[str, ...]


@dataclass(frozen=True)
class Claim:
    item_id: str
    state: ItemState
    worker: str
    attempt: int
    expires_at: float
    reason: str | None = None  # KEPT_BY_STOP when its stopped run kept it; else None


@dataclass(frozen=True)
class QueueStatus:
    project: str
    counts: dict[str, int]
    live: tuple[Claim, ...]
    stale: tuple[Claim, ...]  # lease expired, not yet claimed again


ITEM_COLUMNS = (
    "project, id, title, state, attempts, max_attempts, lease_worker, lease_expires, "
    "not_before, reason, blocked_by, flagged_json, fence"
)


def item_record(row: Sequence[Any], deps: tuple[str, ...] = ()) -> ItemRecord:
    """An `ItemRecord` from a row selected as `ITEM_COLUMNS`."""
    return ItemRecord(
        project=row[0],
        id=row[1],
        title=row[2],
        state=ItemState(row[3]),
        attempts=int(row[4]),
        max_attempts=int(row[5]),
        worker=row[6],
        lease_expires=row[7],
        not_before=row[8],
        reason=row[9],
        blocked_by=row[10],
        flagged=row[11] is not None,
        depends_on=deps,
    )


def _locked_state(tx: Tx, store: Store, project: str, item_id: str) -> ItemState:
    """The item's state, its row locked for the rest of the transaction (on PostgreSQL)."""
    row = tx.one(
        f"SELECT state FROM items WHERE project = ? AND id = ?{store.dialect.lock_rows}",
        (project, item_id),
    )
    if row is None:
        raise UnknownItem(project, item_id)
    return ItemState(row[0])


def _check(item_id: str, current: ItemState, wanted: ItemState) -> None:
    if wanted not in TRANSITIONS[current]:
        raise IllegalTransition(item_id, current.value, wanted.value)


def enqueue(
    store: Store,
    project: str,
    items: Plan | Iterable[WorkItem],
    *,
    max_attempts: int = 3,
) -> EnqueueResult:
    """Put plan items in the queue; re-enqueueing an unchanged plan changes nothing."""
    work_items = list(items.items if isinstance(items, Plan) else items)
    sorted_into: dict[str, list[str]] = {"added": [], "updated": [], "unchanged": [], "flagged": []}
    with store.transaction() as tx:
        now = store.clock()
        existing = {
            r[0]: r[1:]
            for r in tx.all(
                "SELECT id, content_hash, state, lease_expires, flagged_json FROM items "
                f"WHERE project = ?{store.dialect.lock_rows}",
                (project,),
            )
        }
        if not existing:
            _refuse_a_twin(tx, project)
        for seq, item in enumerate(work_items):
            old = existing.get(item.id)
            if old is None:
                added = _add(tx, project, seq, item, max_attempts, now)
                outcome = "added" if added else "unchanged"
            else:
                outcome = _refresh(tx, project, seq, item, old, now)
            sorted_into[outcome].append(item.id)
    return EnqueueResult(**{name: tuple(ids) for name, ids in sorted_into.items()})


def _refuse_a_twin(tx: Tx, project: str) -> None:
    """Refuse a new project that names the same repository and plan as one already queued,
    spelt in another case: GitHub's owner and repository names ignore case, so both queues
    would hand out the same issues, and two workers would make a pull request each."""
    repo, _, key = project.rpartition(":")
    for (other,) in tx.all(
        "SELECT DISTINCT project FROM items WHERE lower(project) = lower(?) AND project <> ?",
        (project, project),
    ):
        other_repo, _, other_key = str(other).rpartition(":")
        if other_key == key and other_repo.lower() == repo.lower():
            raise UsageError(
                f"project {project!r} is {other!r} spelt in another case (repository names "
                f"ignore case); use {other!r}"
            )


def _add(tx: Tx, project: str, seq: int, item: WorkItem, max_attempts: int, now: float) -> bool:
    """Insert a new item; False when another host inserted it first (hosts starting together
    on a new project both see an empty queue: the loser's insert does nothing, no error)."""
    state = S.DONE if item.done else S.PENDING
    inserted = tx.execute(
        "INSERT INTO items (project, id, seq, title, content_hash, item_json, state, "
        "max_attempts, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (project, id) DO NOTHING",
        (project, item.id, seq, item.title, item.content_hash, item.model_dump_json(), state,
         max_attempts, now),
    )  # fmt: skip
    if inserted == 0:
        return False
    _set_deps(tx, project, item)
    tx.append_event(project, item.id, Enqueued(to=state, hash=item.content_hash))
    return True


def _refresh(tx: Tx, project: str, seq: int, item: WorkItem, old: Sequence[Any], now: float) -> str:
    """Apply an edit to a queued item: "updated", "unchanged", or "flagged" when a worker holds
    it (the edit is recorded, and waits)."""
    raw, digest = item.model_dump_json(), item.content_hash
    old_hash, old_state, lease_expires, flagged_json = old
    current = ItemState(old_state)
    wants_done = item.done and current in {S.PENDING, S.WAITING, S.FAILED, S.SKIPPED}
    if old_hash == digest and not wants_done:
        return "unchanged"
    if lease_expires is not None:
        if flagged_json != raw:
            tx.execute(
                "UPDATE items SET flagged_json = ? WHERE project = ? AND id = ?",
                (raw, project, item.id),
            )
            tx.append_event(project, item.id, Flagged(hash=digest, was=old_hash))
        return "flagged"
    new_state = S.DONE if wants_done else current
    tx.execute(
        "UPDATE items SET seq = ?, title = ?, content_hash = ?, item_json = ?, state = ?, "
        "flagged_json = NULL, updated_at = ? WHERE project = ? AND id = ?",
        (seq, item.title, digest, raw, new_state, now, project, item.id),
    )
    _set_deps(tx, project, item)
    updated = Updated(from_=current, to=new_state, hash=digest, was=old_hash)
    tx.append_event(project, item.id, updated)
    return "updated"


def set_budget(store: Store, project: str, max_attempts: int) -> int:
    """Give every item still to be worked (or being worked) this attempt budget, so a budget
    given on a later run applies to items an earlier run queued; returns how many changed."""
    with store.transaction() as tx:
        return tx.execute(
            "UPDATE items SET max_attempts = ? WHERE project = ? AND max_attempts <> ? "
            "AND state IN ('pending', 'waiting', 'claimed', 'checks', 'review')",
            (max_attempts, project, max_attempts),
        )


def _set_deps(tx: Tx, project: str, item: WorkItem) -> None:
    tx.execute("DELETE FROM deps WHERE project = ? AND item = ?", (project, item.id))
    for dep in sorted(set(item.depends_on)):
        tx.execute(
            "INSERT INTO deps (project, item, dep) VALUES (?, ?, ?)", (project, item.id, dep)
        )


def _finish_failed(
    tx: Tx, project: str, item_id: str, current: ItemState, attempts: int, reason: str
) -> None:
    _check(item_id, current, S.FAILED)
    now = tx.clock()
    tx.execute(
        "UPDATE items SET state = 'failed', reason = ?, lease_worker = NULL, "
        "lease_expires = NULL, updated_at = ? WHERE project = ? AND id = ?",
        (reason, now, project, item_id),
    )
    tx.append_event(
        project, item_id, Failed(from_=current, to=S.FAILED, reason=reason, attempt=attempts)
    )
    _skip_dependents(tx, project, item_id)


def _skip_dependents(tx: Tx, project: str, root: str) -> None:
    """Mark everything that (transitively) waits on `root` skipped, so none of it ever runs."""
    frontier = [root]
    seen = {root}
    now = tx.clock()
    while frontier:
        current = frontier.pop()
        rows = tx.all(
            "SELECT i.id, i.state FROM deps d JOIN items i ON i.project = d.project "
            "AND i.id = d.item WHERE d.project = ? AND d.dep = ?",
            (project, current),
        )
        for dependent, state in rows:
            if dependent in seen:
                continue
            seen.add(dependent)
            if state not in (S.PENDING, S.WAITING):
                continue
            reason = f"blocked by {root}"
            tx.execute(
                "UPDATE items SET state = 'skipped', reason = ?, blocked_by = ?, "
                "not_before = NULL, updated_at = ? WHERE project = ? AND id = ?",
                (reason, root, now, project, dependent),
            )
            tx.append_event(
                project,
                dependent,
                Skipped(from_=state, to=S.SKIPPED, reason=reason, blocked_by=root),
            )
            frontier.append(dependent)


def wake(store: Store, named: Iterable[str], why: str) -> list[tuple[str, str]]:
    """Let every waiting item whose reason names one of `named` (a parked endpoint, its key)
    be claimed now, in any project, with its attempts as they were. (project, id) of each."""
    woken: list[tuple[str, str]] = []
    with store.transaction() as tx:
        for needle in dict.fromkeys(n for n in named if n):
            rows = tx.all(
                "SELECT project, id FROM items WHERE state = 'waiting' AND reason LIKE ?",
                (f"%{needle}%",),
            )
            for project, item_id in rows:
                if (project, item_id) in woken:
                    continue
                tx.execute(
                    "UPDATE items SET not_before = ?, updated_at = ? WHERE project = ? AND id = ?",
                    (store.clock(), store.clock(), project, item_id),
                )
                tx.append_event(project, item_id, Woken(reason=why))
                woken.append((str(project), str(item_id)))
    return woken


WITHDRAWN = "no longer in the plan"  # the reason of an item `withdraw`n as gone from its plan
# The reason of an item skipped because a person closed its issue (`holds.skip_closed`), and
# how SQL finds it.
ISSUE_CLOSED = "its issue #{number} is closed; reopen it to run this item"
ISSUE_CLOSED_LIKE = ISSUE_CLOSED.replace("{number}", "%")
# The reason an item in flight holds while its run is stopped (`leases.keep_for_restart`).
KEPT_BY_STOP = "its run was stopped; the next run takes it back"


def stop_note(reason: str | None) -> str | None:
    """What a claim says of itself: KEPT_BY_STOP when its stopped run kept it; None for any
    other reason, which is an earlier attempt's, not its own."""
    return reason if reason == KEPT_BY_STOP else None


# The reason a pull request's item holds once its rounds stopped (a person's brake or commit),
# until a round, a merge or a close says otherwise.
ROUNDS_STOPPED = "its pull request's rounds stopped: {why}"
ROUNDS_STOPPED_LIKE = ROUNDS_STOPPED.replace("{why}", "%")


def note_rounds_stopped(store: Store, project: str, item_id: str, why: str) -> None:
    """Say on a pr_open item why no round will follow, where `work` and the API show it."""
    with store.transaction() as tx:
        tx.execute(
            "UPDATE items SET reason = ? WHERE project = ? AND id = ? AND state = ?",
            (ROUNDS_STOPPED.format(why=why), project, item_id, S.PR_OPEN),
        )


def closed_issue_number(reason: str | None) -> str | None:
    """The issue number an ISSUE_CLOSED reason names; None for any other reason."""
    head, _, tail = ISSUE_CLOSED.partition("{number}")
    if reason is None or not (reason.startswith(head) and reason.endswith(tail)):
        return None
    return reason[len(head) : len(reason) - len(tail)]


def record_outcome(
    store: Store, project: str, item_id: str, state: ItemState | str, evidence: dict[str, Any]
) -> bool:
    """Record what the tracker says became of the work; False when it was already recorded."""
    wanted = ItemState(state)
    if wanted not in TRACKER_OUTCOMES:
        raise IllegalTransition(item_id, "the tracker", wanted.value)
    with store.transaction() as tx:
        current = _locked_state(tx, store, project, item_id)
        if current == wanted:
            return False
        _check(item_id, current, wanted)
        # Ending the lease here makes a still-running worker's next call fail with LeaseLost.
        # A note of a state it has left (kept by a stop, skipped for a closed issue) goes.
        tx.execute(
            "UPDATE items SET state = ?, lease_worker = NULL, lease_expires = NULL, "
            "reason = CASE WHEN reason = ? OR reason LIKE ? OR reason LIKE ? THEN NULL "
            "ELSE reason END, updated_at = ? WHERE project = ? AND id = ?",
            (
                wanted,
                KEPT_BY_STOP,
                ISSUE_CLOSED_LIKE,
                ROUNDS_STOPPED_LIKE,
                store.clock(),
                project,
                item_id,
            ),
        )
        tx.append_event(project, item_id, Outcome(from_=current, to=wanted, evidence=evidence))
        if wanted == S.REVERTED:
            _skip_dependents(tx, project, item_id)
        elif wanted == S.MERGED and current in (S.FAILED, S.SKIPPED):
            _unskip_dependents(tx, project, item_id)
    return True


def _unskip_dependents(tx: Tx, project: str, root: str) -> None:
    """Items skipped because `root` failed can run after all: its work was merged."""
    rows = tx.all(
        "SELECT id FROM items WHERE project = ? AND state = 'skipped' AND blocked_by = ?",
        (project, root),
    )
    for (dependent,) in rows:
        tx.execute(
            "UPDATE items SET state = 'pending', reason = NULL, blocked_by = NULL, "
            "updated_at = ? WHERE project = ? AND id = ?",
            (tx.clock(), project, dependent),
        )
        tx.append_event(project, dependent, Unblocked(from_=S.SKIPPED, to=S.PENDING, by=root))


def projects(store: Store) -> list[str]:
    with store.transaction(write=False) as tx:
        return [r[0] for r in tx.all("SELECT DISTINCT project FROM items ORDER BY project")]


def repo_case_folded(project: str) -> str:
    """A project id with its repository in lower case (`ME/App:PLAN` is `me/app:PLAN`): GitHub
    takes owner and repository names in any case, while plan keys are compared as written."""
    repo, colon, key = project.rpartition(":")
    return f"{repo.lower()}{colon}{key}"


def spelled_otherwise(store: Store, project: str) -> str | None:
    """The project of this database that is `project` with its repository in other letters
    (`OCTO/App:PLAN` for `octo/app:PLAN`: one repository to GitHub); None when there is none."""
    same = repo_case_folded(project)
    others = (known for known in projects(store) if known != project)
    return next((known for known in others if repo_case_folded(known) == same), None)


def known_projects(store: Store) -> list[str]:
    """Every project this database knows: with items queued, or registered with the API."""
    with store.transaction(write=False) as tx:
        return [
            r[0]
            for r in tx.all("SELECT project FROM items UNION SELECT id FROM projects ORDER BY 1")
        ]


def resolve_project(store: Store, project: str | None) -> str:
    """The project to act on: the one given (which must be one this database knows: items
    queued, or registered with the API), or the only one with items queued (the only one
    registered, when none has any)."""
    if project is not None:
        return require_project(store, project)
    known = projects(store) or known_projects(store)
    if len(known) == 1:
        return known[0]
    if not known:
        raise NoProjectYet("no projects in this database yet")
    raise AmbiguousProject(known)


def resolve_item_project(store: Store, project: str | None, item_ids: Sequence[str]) -> str:
    """`resolve_project`, but with several projects and none given, the one project that holds
    every item named (`work show B1` where only plan B has a B1)."""
    if project is not None:
        return require_project(store, project)
    known = projects(store)  # those with items: one registered with none holds no item
    if len(known) == 1 and item_ids:
        return known[0]
    if len(known) <= 1 or not item_ids:
        return resolve_project(store, None)
    wanted = sorted(set(item_ids))
    marks = ", ".join("?" for _ in wanted)
    with store.transaction(write=False) as tx:
        rows = tx.all(
            f"SELECT project FROM items WHERE id IN ({marks}) GROUP BY project "
            "HAVING COUNT(DISTINCT id) = ?",
            (*wanted, len(wanted)),
        )
    holding = sorted(str(row[0]) for row in rows)
    if len(holding) == 1:
        return holding[0]
    raise AmbiguousProject(holding or known)


def require_project(store: Store, project: str) -> str:
    """`project`, when this database knows it (items queued, registered with the API, or events
    recorded, as an inception session's are); NoSuchProject, naming those it holds, if not."""
    with store.transaction(write=False) as tx:
        found = tx.one(
            "SELECT 1 FROM items WHERE project = ? UNION ALL SELECT 1 FROM projects WHERE id = ? "
            f"UNION ALL SELECT 1 FROM events WHERE project = ? AND {UNCHAINED} LIMIT 1",
            (project, project, project),
        )
    if found is None:
        raise NoSuchProject(project, known_projects(store))
    return project


def get_item(store: Store, project: str, item_id: str) -> ItemRecord:
    with store.transaction(write=False) as tx:
        row = tx.one(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE project = ? AND id = ?", (project, item_id)
        )
        if row is None:
            raise UnknownItem(project, item_id)
        deps = tuple(
            r[0]
            for r in tx.all(
                "SELECT dep FROM deps WHERE project = ? AND item = ? ORDER BY dep",
                (project, item_id),
            )
        )
    return item_record(row, deps)


def list_items(store: Store, project: str, *, with_deps: bool = False) -> list[ItemRecord]:
    """The project's items in plan order; with `with_deps`, each with what it depends on (one
    query more, which the run's polls do without)."""
    with store.transaction(write=False) as tx:
        rows = tx.all(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE project = ? ORDER BY seq, id", (project,)
        )
        deps: dict[str, list[str]] = {}
        if with_deps:
            for item_id, dep in tx.all(
                "SELECT item, dep FROM deps WHERE project = ? ORDER BY item, dep", (project,)
            ):
                deps.setdefault(str(item_id), []).append(str(dep))
    return [item_record(r, tuple(deps.get(str(r[1]), ()))) for r in rows]


def item_ids(store: Store, project: str) -> list[str]:
    """The ids of the project's items."""
    with store.transaction(write=False) as tx:
        return [str(row[0]) for row in tx.all("SELECT id FROM items WHERE project = ?", (project,))]


def history(store: Store, project: str, item_id: str) -> tuple[ItemRecord, list[Event]]:
    """The item as it stands and every event about it, oldest first."""
    record = get_item(store, project, item_id)
    return record, store.all_events(project=project, item=item_id)


def status(store: Store, project: str) -> QueueStatus:
    """Counts by state, live claims, and stale claims (expired, not yet taken again)."""
    now = store.clock()
    counts: dict[str, int] = {}
    live: list[Claim] = []
    stale: list[Claim] = []
    for record in list_items(store, project):
        counts[record.state.value] = counts.get(record.state.value, 0) + 1
        if record.lease_expires is not None:
            claim = Claim(
                record.id,
                record.state,
                record.worker or "?",
                record.attempts,
                record.lease_expires,
                stop_note(record.reason),
            )
            (live if record.lease_expires >= now else stale).append(claim)
    return QueueStatus(project, counts, tuple(live), tuple(stale))


def flagged_item(store: Store, project: str, item_id: str) -> WorkItem | None:
    """The edit that arrived while the item was in flight, if any."""
    with store.transaction(write=False) as tx:
        row = tx.one(
            "SELECT flagged_json FROM items WHERE project = ? AND id = ?", (project, item_id)
        )
    if row is None or row[0] is None:
        return None
    return WorkItem.model_validate(json.loads(row[0]))


def reopen_for_round(
    store: Store, project: str, item_id: str, payload: Any, *, fail: str | None = None
) -> bool:
    """An item whose pull request asked for more work goes back to the queue (pending, its
    attempts counted afresh: a round is a new attempt on the same branch), or with `fail`
    ends failed for that reason. `payload` (the round's event) is recorded in the same
    transaction. False when the item is no longer pr_open (the round was already taken)."""
    with store.transaction() as tx:
        if _locked_state(tx, store, project, item_id) != S.PR_OPEN:
            return False
        wanted = S.FAILED if fail else S.PENDING
        tx.execute(
            "UPDATE items SET state = ?, attempts = 0, reason = ?, not_before = NULL, "
            "lease_worker = NULL, lease_expires = NULL, updated_at = ? "
            "WHERE project = ? AND id = ?",
            (wanted, fail, store.clock(), project, item_id),
        )
        tx.append_event(project, item_id, payload)
        if fail:
            tx.append_event(project, item_id, Failed(from_=S.PR_OPEN, to=S.FAILED, reason=fail))
    return True
