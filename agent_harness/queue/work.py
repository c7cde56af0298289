"""The work queue: plan items per project, handed out to workers under leases.

A claim is a lease with a fencing token (a counter bumped on every claim): every later call
names the token, so a worker whose lease expired or was taken over gets `LeaseLost` and can
never overwrite the new holder. Each state change is checked against `TRANSITIONS` and appends
an event in the same transaction.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent_harness.errors import HarnessError, UsageError
from agent_harness.plan.model import Plan, WorkItem
from agent_harness.store.database import EVENT_LOCK_KEY as _EVENT_LOCK_KEY
from agent_harness.store.database import Store, Tx
from agent_harness.store.events import Event


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


class LeaseLost(HarnessError):
    """The lease is no longer held."""

    def __init__(self, lease: Lease, why: str) -> None:
        self.lease = lease
        self.why = why
        super().__init__(
            f"lease on {lease.item_id} (token {lease.token}, worker {lease.worker}) lost: {why}"
        )


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
        super().__init__(f"no item {item_id} in project {project}")


class ItemBusy(HarnessError):
    """The item is held by a live lease."""

    def __init__(self, item_id: str, worker: str, expires_at: float) -> None:
        self.item_id = item_id
        self.worker = worker
        self.expires_at = expires_at
        super().__init__(f"{item_id} is held by {worker} (lease live until {expires_at:.0f})")


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
class Lease:
    """A time-limited right to work one item. `token` fences out every earlier holder."""

    project: str
    item_id: str
    worker: str
    token: int
    attempt: int
    expires_at: float
    lease_s: float


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


@dataclass(frozen=True)
class QueueStatus:
    project: str
    counts: dict[str, int]
    live: tuple[Claim, ...]
    stale: tuple[Claim, ...]  # lease expired, not yet claimed again


_ITEM_COLUMNS = (
    "project, id, title, state, attempts, max_attempts, lease_worker, lease_expires, "
    "not_before, reason, blocked_by, flagged_json, fence"
)


def _record(row: Sequence[Any], deps: tuple[str, ...] = ()) -> ItemRecord:
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


def _check(item_id: str, current: ItemState, wanted: ItemState) -> None:
    if wanted not in TRANSITIONS[current]:
        raise IllegalTransition(item_id, current.value, wanted.value)


# --- enqueue ---------------------------------------------------------------------------------


def enqueue(
    store: Store,
    project: str,
    items: Plan | Iterable[WorkItem],
    *,
    max_attempts: int = 3,
) -> EnqueueResult:
    """Put plan items in the queue; re-enqueueing an unchanged plan changes nothing."""
    work_items = list(items.items if isinstance(items, Plan) else items)
    added: list[str] = []
    updated: list[str] = []
    unchanged: list[str] = []
    flagged: list[str] = []
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
        for seq, item in enumerate(work_items):
            raw = item.model_dump_json()
            digest = item.content_hash
            old = existing.get(item.id)
            if old is None:
                state = S.DONE if item.done else S.PENDING
                tx.execute(
                    "INSERT INTO items (project, id, seq, title, content_hash, item_json, state, "
                    "max_attempts, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (project, item.id, seq, item.title, digest, raw, state, max_attempts, now),
                )
                _set_deps(tx, project, item)
                tx.append_event(project, item.id, "enqueued", {"to": state, "hash": digest})
                added.append(item.id)
                continue
            old_hash, old_state, lease_expires, flagged_json = old
            current = ItemState(old_state)
            wants_done = item.done and current in {S.PENDING, S.WAITING, S.FAILED, S.SKIPPED}
            if old_hash == digest and not wants_done:
                unchanged.append(item.id)
                continue
            if lease_expires is not None:
                if flagged_json != raw:
                    tx.execute(
                        "UPDATE items SET flagged_json = ? WHERE project = ? AND id = ?",
                        (raw, project, item.id),
                    )
                    tx.append_event(project, item.id, "flagged", {"hash": digest, "was": old_hash})
                flagged.append(item.id)
                continue
            new_state = S.DONE if wants_done else current
            tx.execute(
                "UPDATE items SET seq = ?, title = ?, content_hash = ?, item_json = ?, state = ?, "
                "flagged_json = NULL, updated_at = ? WHERE project = ? AND id = ?",
                (seq, item.title, digest, raw, new_state, now, project, item.id),
            )
            _set_deps(tx, project, item)
            tx.append_event(
                project,
                item.id,
                "updated",
                {"from": current, "to": new_state, "hash": digest, "was": old_hash},
            )
            updated.append(item.id)
    return EnqueueResult(tuple(added), tuple(updated), tuple(unchanged), tuple(flagged))


def _set_deps(tx: Tx, project: str, item: WorkItem) -> None:
    tx.execute("DELETE FROM deps WHERE project = ? AND item = ?", (project, item.id))
    for dep in sorted(set(item.depends_on)):
        tx.execute(
            "INSERT INTO deps (project, item, dep) VALUES (?, ?, ?)", (project, item.id, dep)
        )


# --- claiming --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ClaimSql:
    recover: str  # a lapsed lease or a parked item that is due, with the columns to judge it
    take: str  # claim the first ready pending item: one UPDATE .. RETURNING
    take_unless_recovery: str  # the same, doing nothing when recovery work exists
    pg_fast: str  # PostgreSQL: take_unless_recovery plus its event, as one statement


@functools.cache
def _claim_sql(dialect: str, n_ready: int) -> _ClaimSql:
    marks = ", ".join("?" for _ in range(n_ready))
    deps_ready = (
        "AND NOT EXISTS (SELECT 1 FROM deps d LEFT JOIN items x "
        "ON x.project = d.project AND x.id = d.dep WHERE d.project = i.project AND d.item = i.id "
        f"AND (x.state IS NULL OR x.state NOT IN ({marks}))) "
    )
    lock = " FOR UPDATE SKIP LOCKED" if dialect == "postgresql" else ""
    columns = (
        "SELECT i.id, i.state, i.attempts, i.max_attempts, i.fence, i.lease_worker, "
        "i.lease_expires, i.reason FROM items i WHERE i.project = ? "
    )
    # Separate index-backed searches, not one OR, so each reads only rows it may hand out.
    recover = (
        f"SELECT * FROM ({columns}AND i.lease_expires IS NOT NULL AND i.lease_expires < ? "
        f"ORDER BY i.lease_expires LIMIT 1{lock}) lapsed UNION ALL "
        f"SELECT * FROM ({columns}AND i.state = 'waiting' AND i.not_before <= ? "
        f"{deps_ready}ORDER BY i.not_before LIMIT 1{lock}) due LIMIT 1"
    )
    # Cheap and deliberately loose (ignores dependencies): a hit only sends the claim down the
    # slower path that judges recovery work properly.
    probe = (
        "(EXISTS (SELECT 1 FROM items r WHERE r.project = ? AND r.lease_expires IS NOT NULL "
        "AND r.lease_expires < ?) OR EXISTS (SELECT 1 FROM items r WHERE r.project = ? "
        "AND r.state = 'waiting' AND r.not_before <= ?))"
    )
    # Pending items always have attempts left: every path back to pending checks the budget.
    pick = (
        "SELECT i.id FROM items i WHERE i.project = ? AND i.state = 'pending' "
        "AND (i.not_before IS NULL OR i.not_before <= ?) AND i.attempts < i.max_attempts "
        f"{deps_ready}ORDER BY i.seq, i.id LIMIT 1{lock}"
    )
    update = (
        "UPDATE items SET state = 'claimed', attempts = attempts + 1, fence = fence + 1, "
        "lease_worker = ?, lease_expires = ?, not_before = NULL, updated_at = ? "
        "WHERE project = ? "
    )
    returning = "RETURNING id, attempts, fence"
    take = f"{update}AND id = ({pick}) {returning}"
    take_unless_recovery = f"{update}AND NOT {probe} AND id = ({pick}) {returning}"
    # One round trip for the common claim. The event row is fed by the row that took the
    # advisory lock, so its id is drawn under the lock, as Tx.flush_events does it.
    pg_fast = (
        f"WITH taken AS ({take_unless_recovery}), "
        "locked AS (SELECT t.id, t.attempts, t.fence, pg_advisory_xact_lock(?) FROM taken t), "
        "logged AS (INSERT INTO events (ts, project, item, kind, payload) "
        "SELECT ?, ?, l.id, 'claimed', json_build_object('attempt', l.attempts, "
        "'expires_at', ?::float8, 'from', 'pending', 'to', 'claimed', 'token', l.fence, "
        "'worker', ?::text)::text FROM locked l RETURNING item) "
        f"SELECT g.item, t.attempts, t.fence, {probe} FROM (SELECT 1) one "
        "LEFT JOIN taken t ON true LEFT JOIN logged g ON g.item = t.id"
    )
    return _ClaimSql(recover, take, take_unless_recovery, pg_fast)


def claim_next(
    store: Store,
    project: str,
    worker: str,
    lease_s: float,
    *,
    ready_when: Iterable[str] = DEFAULT_READY_WHEN,
) -> Lease | None:
    """Hand out one ready item under a new lease, or None when nothing is ready.

    Ready means: pending (or waiting past its time, or held by an expired lease) and every
    dependency in a state named by `ready_when`. Each claim counts as an attempt. Recovery
    work (lapsed leases, parked items now due) goes first, so a backlog never starves it.
    """
    ready = tuple(sorted(set(ready_when)))
    sql = _claim_sql(store.dialect.name, len(ready))
    if store.dialect.name == "postgresql":
        now = store.clock()
        expires = now + lease_s
        probe = (project, now, project, now)
        take_params = (worker, expires, now, project, *probe, project, now, *ready)
        event_params = (_EVENT_LOCK_KEY, now, project, expires, worker)
        row = store.statement(sql.pg_fast, (*take_params, *event_params, *probe))
        assert row is not None
        if row[0] is not None:
            return Lease(project, row[0], worker, int(row[2]), int(row[1]), expires, lease_s)
        if not row[3]:
            return None
    while True:
        with store.transaction() as tx:
            tx.seal = False  # the hot path: the next write of any kind seals this claim
            now = store.clock()
            expires = now + lease_s
            taken = tx.one(
                sql.take_unless_recovery,
                (worker, expires, now, project, project, now, project, now, project, now, *ready),
            )
            if taken is None:
                row = tx.one(sql.recover, (project, now, project, now, *ready))
                if row is None:
                    taken = tx.one(sql.take, (worker, expires, now, project, project, now, *ready))
                    if taken is None:
                        return None
            if taken is not None:
                item_id, attempt, token = taken[0], int(taken[1]), int(taken[2])
                _claimed_event(
                    tx, project, item_id, S.PENDING, worker, attempt, token, expires, now
                )
                return Lease(project, item_id, worker, token, attempt, expires, lease_s)
            assert row is not None
            item_id, state, attempts, max_attempts, fence, old_worker, old_expiry, reason = row
            current = ItemState(state)
            if old_expiry is not None:
                reason = f"lease of {old_worker} expired (attempt {attempts})"
                tx.append_event(
                    project,
                    item_id,
                    "lease_expired",
                    {"worker": old_worker, "attempt": attempts, "expired_at": old_expiry},
                )
            if attempts >= max_attempts:
                _finish_failed(tx, project, item_id, current, attempts, reason or "out of attempts")
                continue  # the transaction commits the failure; look for another item
            _check(item_id, current, S.CLAIMED)
            token = int(fence) + 1
            tx.execute(
                "UPDATE items SET state = 'claimed', attempts = attempts + 1, fence = ?, "
                "lease_worker = ?, lease_expires = ?, not_before = NULL, updated_at = ? "
                "WHERE project = ? AND id = ?",
                (token, worker, expires, now, project, item_id),
            )
            _claimed_event(tx, project, item_id, current, worker, attempts + 1, token, expires, now)
            return Lease(project, item_id, worker, token, attempts + 1, expires, lease_s)


def _claimed_event(
    tx: Tx,
    project: str,
    item_id: str,
    was: ItemState,
    worker: str,
    attempt: int,
    token: int,
    expires: float,
    now: float,
) -> None:
    tx.append_event_json(
        project, item_id, "claimed", _claimed_json(was, worker, attempt, token, expires), ts=now
    )


_json_str = json.encoder.encode_basestring_ascii  # what json.dumps uses for strings


def _claimed_json(was: str, worker: str, attempt: int, token: int, expires: float) -> str:
    """The claimed event's payload, exactly as `json.dumps(..., sort_keys=True)` writes it.

    Written by hand because json.dumps costs a claim more than its own SQL statement does;
    anything but plain ints, finite floats and strings goes through json.dumps after all.
    """
    if (
        type(attempt) is int
        and type(token) is int
        and isinstance(was, str)
        and isinstance(worker, str)
        and (type(expires) is int or (type(expires) is float and math.isfinite(expires)))
    ):
        return (
            f'{{"attempt": {attempt}, "expires_at": {expires!r}, "from": {_json_str(was)}, '
            f'"to": "claimed", "token": {token}, "worker": {_json_str(worker)}}}'
        )
    payload = {
        "from": was,
        "to": S.CLAIMED,
        "worker": worker,
        "attempt": attempt,
        "token": token,
        "expires_at": expires,
    }
    return json.dumps(payload, sort_keys=True, default=str)


def _held(tx: Tx, store: Store, lease: Lease) -> ItemState:
    """The item's state if `lease` still holds it; otherwise LeaseLost."""
    row = tx.one(
        "SELECT state, fence, lease_worker, lease_expires FROM items "
        f"WHERE project = ? AND id = ?{store.dialect.lock_rows}",
        (lease.project, lease.item_id),
    )
    if row is None:
        raise LeaseLost(lease, "the item is no longer in the queue")
    state, fence, worker, expires = row
    if int(fence) != lease.token:
        raise LeaseLost(lease, f"taken over by {worker or 'another claim'} (token {fence})")
    if expires is None:
        raise LeaseLost(lease, f"the lease already ended (item is {state})")
    if expires < store.clock():
        raise LeaseLost(lease, "the lease expired")
    return ItemState(state)


def heartbeat(store: Store, lease: Lease, lease_s: float | None = None) -> Lease:
    """Extend the lease from now; returns the lease with its new expiry."""
    span = lease.lease_s if lease_s is None else lease_s
    with store.transaction() as tx:
        _held(tx, store, lease)
        expires = store.clock() + span
        tx.execute(
            "UPDATE items SET lease_expires = ? WHERE project = ? AND id = ?",
            (expires, lease.project, lease.item_id),
        )
    return Lease(
        lease.project, lease.item_id, lease.worker, lease.token, lease.attempt, expires, span
    )


def advance(store: Store, lease: Lease, stage: ItemState | str) -> None:
    """Report progress to an intermediate stage (checks, review, pr_open); the lease stays."""
    wanted = ItemState(stage)
    if wanted not in STAGES:
        raise IllegalTransition(lease.item_id, "a lease", wanted.value)
    with store.transaction() as tx:
        current = _held(tx, store, lease)
        _check(lease.item_id, current, wanted)
        _move(tx, store, lease, current, wanted, "advanced", keep_lease=True)


def complete(store: Store, lease: Lease, state: ItemState | str = S.PR_OPEN) -> None:
    """End the lease with the work delivered: pr_open (usual), merged or closed."""
    wanted = ItemState(state)
    if wanted not in WORKER_OUTCOMES:
        raise IllegalTransition(lease.item_id, "a lease", wanted.value)
    with store.transaction() as tx:
        current = _held(tx, store, lease)
        _check(lease.item_id, current, wanted)
        _move(tx, store, lease, current, wanted, "completed")


def fail(
    store: Store,
    lease: Lease,
    reason: str,
    *,
    permanent: bool = False,
    retry_after_s: float = 0.0,
) -> ItemState:
    """End the lease with a failure; returns the item's new state.

    A transient failure puts the item back (after `retry_after_s`) until its attempt budget is
    spent; then, or when `permanent`, it is failed and everything depending on it is skipped.
    """
    with store.transaction() as tx:
        current = _held(tx, store, lease)
        row = tx.one(
            "SELECT attempts, max_attempts FROM items WHERE project = ? AND id = ?",
            (lease.project, lease.item_id),
        )
        assert row is not None
        attempts, max_attempts = int(row[0]), int(row[1])
        final = permanent or attempts >= max_attempts
        tx.append_event(
            lease.project,
            lease.item_id,
            "attempt_failed",
            {
                "worker": lease.worker,
                "attempt": lease.attempt,
                "reason": reason,
                "permanent": permanent,
                "final": final,
            },
        )
        if final:
            why = reason if permanent else f"{reason} (attempt budget {max_attempts} spent)"
            _finish_failed(tx, lease.project, lease.item_id, current, attempts, why)
            return S.FAILED
        _check(lease.item_id, current, S.PENDING)
        _move(
            tx,
            store,
            lease,
            current,
            S.PENDING,
            "requeued",
            reason=reason,
            not_before=store.clock() + retry_after_s if retry_after_s > 0 else None,
        )
        return S.PENDING


def release(store: Store, lease: Lease, reason: str = "released") -> None:
    """Give the item back untouched; the claim still counts, so the last one fails it."""
    with store.transaction() as tx:
        current = _held(tx, store, lease)
        budget = tx.one(
            "SELECT attempts, max_attempts FROM items WHERE project = ? AND id = ?",
            (lease.project, lease.item_id),
        )
        assert budget is not None
        if int(budget[0]) >= int(budget[1]):
            why = f"{reason} (attempt budget {budget[1]} spent)"
            _finish_failed(tx, lease.project, lease.item_id, current, int(budget[0]), why)
            return
        _check(lease.item_id, current, S.PENDING)
        _move(tx, store, lease, current, S.PENDING, "released", reason=reason)


def defer(store: Store, lease: Lease, until_epoch: float, reason: str) -> None:
    """Park the item until `until_epoch` (input needed, rate limit); the attempt is refunded."""
    with store.transaction() as tx:
        current = _held(tx, store, lease)
        _check(lease.item_id, current, S.WAITING)
        _move(
            tx,
            store,
            lease,
            current,
            S.WAITING,
            "deferred",
            reason=reason,
            not_before=until_epoch,
            refund=True,
        )


def _move(
    tx: Tx,
    store: Store,
    lease: Lease,
    current: ItemState,
    wanted: ItemState,
    kind: str,
    *,
    keep_lease: bool = False,
    reason: str | None = None,
    not_before: float | None = None,
    refund: bool = False,
) -> None:
    now = store.clock()
    lease_sql = "" if keep_lease else ", lease_worker = NULL, lease_expires = NULL"
    refund_sql = ", attempts = attempts - 1" if refund else ""
    tx.execute(
        f"UPDATE items SET state = ?, reason = ?, not_before = ?, updated_at = ?{lease_sql}"
        f"{refund_sql} WHERE project = ? AND id = ?",
        (wanted, reason, not_before, now, lease.project, lease.item_id),
    )
    payload: dict[str, Any] = {
        "from": current,
        "to": wanted,
        "worker": lease.worker,
        "attempt": lease.attempt,
    }
    if reason is not None:
        payload["reason"] = reason
    if not_before is not None:
        payload["until"] = not_before
    tx.append_event(lease.project, lease.item_id, kind, payload)


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
        project,
        item_id,
        "failed",
        {"from": current, "to": S.FAILED, "reason": reason, "attempt": attempts},
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
                "skipped",
                {"from": state, "to": S.SKIPPED, "reason": reason, "blocked_by": root},
            )
            frontier.append(dependent)


# --- people and the reconciler ---------------------------------------------------------------


HOLD_REASON = "held: not selected for this run (--only)"
_FAR = 4102444800.0  # 2100-01-01: never due by itself; `unhold` is what frees a held item


def hold(store: Store, project: str, item_ids: Iterable[str]) -> tuple[str, ...]:
    """Keep these items from being claimed by this run (pending or due ones only)."""
    held: list[str] = []
    with store.transaction() as tx:
        for item_id in item_ids:
            row = tx.one("SELECT state FROM items WHERE project = ? AND id = ?", (project, item_id))
            if row is None or row[0] not in (S.PENDING, S.WAITING):
                continue
            tx.execute(
                "UPDATE items SET state = 'waiting', not_before = ?, reason = ?, updated_at = ? "
                "WHERE project = ? AND id = ?",
                (_FAR, HOLD_REASON, store.clock(), project, item_id),
            )
            tx.append_event(project, item_id, "held", {"from": row[0], "reason": HOLD_REASON})
            held.append(item_id)
    return tuple(held)


def unhold(store: Store, project: str) -> tuple[str, ...]:
    """Free every item a run held back (also after that run was killed)."""
    with store.transaction() as tx:
        rows = tx.all(
            "SELECT id FROM items WHERE project = ? AND state = 'waiting' AND reason = ?",
            (project, HOLD_REASON),
        )
        for (item_id,) in rows:
            tx.execute(
                "UPDATE items SET state = 'pending', not_before = NULL, reason = NULL, "
                "updated_at = ? WHERE project = ? AND id = ?",
                (store.clock(), project, item_id),
            )
            tx.append_event(project, item_id, "unheld", {"to": S.PENDING})
    return tuple(str(row[0]) for row in rows)


def withdraw(store: Store, project: str, item_ids: Iterable[str], reason: str) -> tuple[str, ...]:
    """Items gone from the plan: skipped (never run), with the reason, if not yet started."""
    gone: list[str] = []
    with store.transaction() as tx:
        for item_id in item_ids:
            row = tx.one("SELECT state FROM items WHERE project = ? AND id = ?", (project, item_id))
            if row is None or row[0] not in (S.PENDING, S.WAITING):
                continue
            tx.execute(
                "UPDATE items SET state = 'skipped', reason = ?, not_before = NULL, "
                "updated_at = ? WHERE project = ? AND id = ?",
                (reason, store.clock(), project, item_id),
            )
            tx.append_event(
                project, item_id, "skipped", {"from": row[0], "to": S.SKIPPED, "reason": reason}
            )
            gone.append(item_id)
    return tuple(gone)


def reclaim_own(
    store: Store, project: str, worker: str, *, prefix: bool = False
) -> tuple[str, ...]:
    """End, at once, the leases a worker of this name still holds from a previous life.

    A worker id is stable across restarts of the same host, so a restarted worker can take
    its interrupted item back now instead of waiting for the lease to lapse. With `prefix`,
    every worker whose name starts with `worker` is meant (a whole restarted pool). Its old process
    is gone; if it is not (two live processes sharing worker names), the old one hears
    `LeaseLost` on its next call and stops, which is the fencing the token exists for.
    """
    now = store.clock()
    match = "lease_worker LIKE ?" if prefix else "lease_worker = ?"
    name = worker + "%" if prefix else worker
    with store.transaction() as tx:
        rows = tx.all(
            f"SELECT id, lease_worker FROM items WHERE project = ? AND {match} "
            "AND lease_expires IS NOT NULL AND lease_expires >= ?",
            (project, name, now),
        )
        if prefix:  # LIKE is only a coarse filter: keep exact prefix matches
            rows = [row for row in rows if str(row[1]).startswith(worker)]
        ids = tuple(str(row[0]) for row in rows)
        holders = {str(row[0]): str(row[1]) for row in rows}
        for item_id in ids:
            tx.execute(
                "UPDATE items SET lease_expires = ? WHERE project = ? AND id = ?",
                (now - 0.001, project, item_id),
            )
            tx.append_event(
                project, item_id, "lease_reclaimed", {"worker": holders[item_id], "by": worker}
            )
    return ids


def retry(store: Store, project: str, item_id: str) -> tuple[str, ...]:
    """Re-queue a failed, skipped, closed or reverted item and the items it skipped.

    Returns the re-queued ids. Refused while a live lease holds the item.
    """
    with store.transaction() as tx:
        row = tx.one(
            f"SELECT state, lease_worker, lease_expires FROM items "
            f"WHERE project = ? AND id = ?{store.dialect.lock_rows}",
            (project, item_id),
        )
        if row is None:
            raise UnknownItem(project, item_id)
        state, worker, expires = ItemState(row[0]), row[1], row[2]
        if expires is not None and expires >= store.clock():
            raise ItemBusy(item_id, worker or "?", expires)
        _check(item_id, state, S.PENDING)
        now = store.clock()
        requeued = [item_id]
        tx.execute(
            "UPDATE items SET state = 'pending', attempts = 0, reason = NULL, blocked_by = NULL, "
            "not_before = NULL, updated_at = ? WHERE project = ? AND id = ?",
            (now, project, item_id),
        )
        tx.append_event(project, item_id, "retried", {"from": state, "to": S.PENDING})
        for (dependent,) in tx.all(
            "SELECT id FROM items WHERE project = ? AND blocked_by = ? AND state = 'skipped'",
            (project, item_id),
        ):
            tx.execute(
                "UPDATE items SET state = 'pending', reason = NULL, blocked_by = NULL, "
                "updated_at = ? WHERE project = ? AND id = ?",
                (now, project, dependent),
            )
            tx.append_event(
                project, dependent, "retried", {"from": S.SKIPPED, "to": S.PENDING, "via": item_id}
            )
            requeued.append(dependent)
    return tuple(requeued)


def record_outcome(
    store: Store, project: str, item_id: str, state: ItemState | str, evidence: dict[str, Any]
) -> bool:
    """Record what the tracker says became of the work; False when it was already recorded."""
    wanted = ItemState(state)
    if wanted not in TRACKER_OUTCOMES:
        raise IllegalTransition(item_id, "the tracker", wanted.value)
    with store.transaction() as tx:
        row = tx.one(
            f"SELECT state FROM items WHERE project = ? AND id = ?{store.dialect.lock_rows}",
            (project, item_id),
        )
        if row is None:
            raise UnknownItem(project, item_id)
        current = ItemState(row[0])
        if current == wanted:
            return False
        _check(item_id, current, wanted)
        # Ending the lease here makes a still-running worker's next call fail with LeaseLost.
        tx.execute(
            "UPDATE items SET state = ?, lease_worker = NULL, lease_expires = NULL, "
            "updated_at = ? WHERE project = ? AND id = ?",
            (wanted, store.clock(), project, item_id),
        )
        tx.append_event(
            project, item_id, "outcome", {"from": current, "to": wanted, "evidence": evidence}
        )
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
        tx.append_event(
            project, dependent, "unblocked", {"from": S.SKIPPED, "to": S.PENDING, "by": root}
        )


# --- reading ---------------------------------------------------------------------------------


def projects(store: Store) -> list[str]:
    with store.transaction(write=False) as tx:
        return [r[0] for r in tx.all("SELECT DISTINCT project FROM items ORDER BY project")]


def resolve_project(store: Store, project: str | None) -> str:
    """The project to act on: the one given, or the only one in the database."""
    if project is not None:
        return project
    known = projects(store)
    if len(known) == 1:
        return known[0]
    raise AmbiguousProject(known)


def get_item(store: Store, project: str, item_id: str) -> ItemRecord:
    with store.transaction(write=False) as tx:
        row = tx.one(
            f"SELECT {_ITEM_COLUMNS} FROM items WHERE project = ? AND id = ?", (project, item_id)
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
    return _record(row, deps)


def list_items(store: Store, project: str) -> list[ItemRecord]:
    with store.transaction(write=False) as tx:
        rows = tx.all(
            f"SELECT {_ITEM_COLUMNS} FROM items WHERE project = ? ORDER BY seq, id", (project,)
        )
    return [_record(r) for r in rows]


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
                record.id, record.state, record.worker or "?", record.attempts, record.lease_expires
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
