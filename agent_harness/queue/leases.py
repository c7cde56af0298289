"""Claims as leases: handing out a ready item, heartbeats, and ending a lease one way or another.

A claim is a lease with a fencing token (a counter bumped on every claim): every later call
names the token, so a worker whose lease lapsed or was taken over gets `LeaseLost` and can
never overwrite the new holder.
"""

from __future__ import annotations

import functools
import json
import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from agent_harness.errors import HarnessError
from agent_harness.queue.items import (
    DEFAULT_READY_WHEN,
    KEPT_BY_STOP,
    LEASED_STATES,
    STAGES,
    WORKER_OUTCOMES,
    IllegalTransition,
    ItemState,
    S,
    _check,
    _finish_failed,
)
from agent_harness.store.database import Store, Tx
from agent_harness.store.events import (
    Advanced,
    AttemptFailed,
    Completed,
    Deferred,
    LeaseExpired,
    LeaseMove,
    LeaseReclaimed,
    Released,
    Requeued,
)
from agent_harness.store.migrations import NEXT_EVENT_ID


class LeaseLost(HarnessError):
    """The lease is no longer held."""

    def __init__(self, lease: Lease, why: str) -> None:
        self.lease = lease
        self.why = why
        super().__init__(
            f"lease on {lease.item_id} (token {lease.token}, worker {lease.worker}) lost: {why}"
        )


class Lease(NamedTuple):
    """A time-limited right to work one item. `token` fences out every earlier holder.

    A named tuple rather than a frozen dataclass: a claim makes one every time, and this is
    made several times faster."""

    project: str
    item_id: str
    worker: str
    token: int
    attempt: int
    expires_at: float
    lease_s: float


# Leases an item may lose to dead workers before it fails: generous, as dying is not the
# item's fault, but finite, so a worker that dies on one item every time (a crash loop) ends.
MAX_RECLAIMS = 5


# How long a process may go without looking for lapsed leases while it claims: a lease that
# lapses is taken back at most this late (later than its own expiry only when another process
# took it, for a shorter time, after this one last looked).
LAPSE_CHECK_S = 1.0

# Per store and project, the store-clock time of the next look for lapsed leases: the soonest
# expiry of the leases seen at the last look or taken by this store since, or LAPSE_CHECK_S
# after the last look, whichever is first.
_next_lapse_check: weakref.WeakKeyDictionary[Store, dict[str, float]] = weakref.WeakKeyDictionary()

# Per store, the projects whose last look found nothing to claim. Their next claim reads before
# it writes, so workers polling an idle queue never take the write lock (on SQLite, a lock that
# every other writer of the file waits for).
_found_idle: weakref.WeakKeyDictionary[Store, set[str]] = weakref.WeakKeyDictionary()

_Kept = TypeVar("_Kept", dict[str, float], set[str])


_DEFAULT_READY = tuple(sorted(DEFAULT_READY_WHEN))


@dataclass(frozen=True)
class _ClaimSql:
    recover: str  # a lapsed lease or a parked item that is due, with the columns to judge it
    soonest_expiry: str  # when the first live lease of a project lapses
    take: str  # claim the first ready pending item: one UPDATE .. RETURNING
    take_unless_due: str  # the same, doing nothing when a parked item is due first
    pg_fast: str  # PostgreSQL: take_unless_due plus its event, as one statement
    any_work: str  # is there anything to claim (recovery work or a ready pending item)? No locks


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
        "i.lease_expires, i.reason, i.reclaims FROM items i WHERE i.project = ? "
    )
    # Separate index-backed searches, not one OR, so each reads only rows it may hand out.
    recover = (
        f"SELECT * FROM ({columns}AND i.state IN ({LEASED_STATES}) AND i.lease_expires < ? "
        f"ORDER BY i.lease_expires LIMIT 1{lock}) lapsed UNION ALL "
        f"SELECT * FROM ({columns}AND i.state = 'waiting' AND i.not_before <= ? "
        f"{deps_ready}ORDER BY i.not_before LIMIT 1{lock}) due LIMIT 1"
    )
    soonest_expiry = (
        f"SELECT MIN(lease_expires) FROM items WHERE project = ? AND state IN ({LEASED_STATES})"
    )
    # Cheap and deliberately loose (ignores dependencies): a hit only sends the claim down the
    # slower path that judges recovery work properly.
    due = (
        "EXISTS (SELECT 1 FROM items r WHERE r.project = ? "
        "AND r.state = 'waiting' AND r.not_before <= ?)"
    )
    # Pending items always have attempts left: every path back to pending checks the budget.
    # SQLite finds the row by the rowid its state index holds, not by a second index.
    key = "rowid" if dialect == "sqlite" else "id"
    pick = (
        f"SELECT i.{key} FROM items i WHERE i.project = ? AND i.state = 'pending' "
        "AND (i.not_before IS NULL OR i.not_before <= ?) AND i.attempts < i.max_attempts "
        f"{deps_ready}ORDER BY i.seq, i.id LIMIT 1{lock}"
    )
    # SQLite's trigger logs the claim under the id named here (see SQLITE_CLAIM_LOG).
    chain = f", last_claim = {NEXT_EVENT_ID}" if dialect == "sqlite" else ""
    update = (
        "UPDATE items SET state = 'claimed', attempts = attempts + 1, fence = fence + 1, "
        f"lease_worker = ?, lease_expires = ?, not_before = NULL, updated_at = ?{chain} "
        "WHERE project = ? "
    )
    returning = "RETURNING id, attempts, fence"
    take = f"{update}AND {key} = ({pick}) {returning}"
    take_unless_due = f"{update}AND NOT {due} AND {key} = ({pick}) {returning}"
    # The same searches as `recover` and `take`, read without a lock: when they find nothing
    # (an idle worker's poll, a fleet's last claim) nobody waits for the write lock.
    unlocked = f"SELECT 1 FROM ({recover}) w UNION ALL SELECT 1 FROM ({pick}) p LIMIT 1"
    any_work = unlocked.replace(lock, "") if lock else unlocked
    pg_fast = _logged_in_one_statement(take_unless_due)
    return _ClaimSql(recover, soonest_expiry, take, take_unless_due, pg_fast, any_work)


def _logged_in_one_statement(take_unless_due: str) -> str:
    """PostgreSQL: one round trip for the common claim, its event written by the same
    statement. No lock: readers follow the log by transaction (see store.dialects), so ids need
    not commit in order. (SQLite has no INSERT inside WITH; a trigger logs its claims.)"""
    return (
        f"WITH taken AS ({take_unless_due}), "
        "logged AS (INSERT INTO events (ts, project, item, kind, payload) "
        "SELECT ?, ?, t.id, 'claimed', json_build_object('attempt', t.attempts, "
        "'expires_at', ?::float8, 'from', 'pending', 'to', 'claimed', 'token', t.fence, "
        "'worker', ?::text)::text FROM taken t RETURNING item) "
        "SELECT g.item, t.attempts, t.fence FROM taken t JOIN logged g ON g.item = t.id"
    )


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
    work (lapsed leases, parked items now due) goes first, so a backlog never starves it:
    parked items are looked at on every claim, lapsed leases whenever one may have lapsed
    (see LAPSE_CHECK_S), and both whenever no pending item is ready.
    """
    if not math.isfinite(lease_s):  # SQLite's claim trigger would log it as no JSON (`Inf`)
        raise ValueError(f"a lease must be finite, not {lease_s}")
    ready = _DEFAULT_READY if ready_when is DEFAULT_READY_WHEN else tuple(sorted(set(ready_when)))
    sql = _claim_sql(store.dialect.name, len(ready))
    checks = _kept_for(store, _next_lapse_check, dict)
    next_check = checks.get(project, -math.inf)
    now = store.clock()
    idle = _kept_for(store, _found_idle, set)
    # Read before writing unless the last look found work that the one-statement claim has
    # not just missed: a look due only because a lease may have lapsed usually finds work.
    look_first = project in idle or next_check == -math.inf
    # Not before the last look either: a clock set back would otherwise put the look off.
    if next_check - LAPSE_CHECK_S <= now < next_check and not look_first:
        lease = _claim_in_one_statement(store, sql, project, worker, now, lease_s, ready)
        if lease is not None:
            if lease.expires_at < next_check:  # its own lease lapses first: look then
                checks[project] = lease.expires_at
            return lease
        look_first = True
    return _claim_with_recovery(store, sql, project, worker, lease_s, ready, checks, look_first)


def _kept_for(
    store: Store, kept: weakref.WeakKeyDictionary[Store, _Kept], empty: Callable[[], _Kept]
) -> _Kept:
    """What `kept` holds for this store, made empty on first use (looked up before it is
    made, as a claim does this every time)."""
    found = kept.get(store)
    return kept.setdefault(store, empty()) if found is None else found


def _note_next_check(
    checks: dict[str, float], project: str, now: float, soonest: Sequence[Any] | None
) -> float:
    """When this store looks for lapsed leases next: at the soonest expiry it saw, and at most
    LAPSE_CHECK_S from now."""
    next_check = now + LAPSE_CHECK_S
    if soonest is not None and soonest[0] is not None:
        next_check = min(next_check, float(soonest[0]))
    checks[project] = next_check
    return next_check


def _claim_in_one_statement(
    store: Store,
    sql: _ClaimSql,
    project: str,
    worker: str,
    now: float,
    lease_s: float,
    ready: tuple[str, ...],
) -> Lease | None:
    """The common claim in one round trip, its event logged by the same statement; None when no
    pending item is ready or a parked one is due first."""
    expires = now + lease_s
    take_params = (worker, expires, now, project, project, now, project, now, *ready)
    if store.dialect.logs_claims:
        row = store.statement(sql.take_unless_due, take_params)
    else:
        row = store.statement(sql.pg_fast, (*take_params, now, project, expires, worker))
    if row is None:
        return None
    return Lease(project, row[0], worker, int(row[2]), int(row[1]), expires, lease_s)


def _claim_with_recovery(
    store: Store,
    sql: _ClaimSql,
    project: str,
    worker: str,
    lease_s: float,
    ready: tuple[str, ...],
    checks: dict[str, float],
    look_first: bool,
) -> Lease | None:
    """A claim that first looks for recovery work (a lapsed lease, a parked item now due), and
    notes when the next lease may lapse. With `look_first` (the last look found nothing, or the
    one-statement claim just did), nothing to claim is found out by reading alone, so idle
    polls never hold up a writer."""
    idle = _kept_for(store, _found_idle, set)
    while True:
        if look_first and not _work_in_sight(store, sql, project, ready, checks):
            idle.add(project)
            return None
        look_first = False
        idle.discard(project)
        with store.transaction() as tx:
            tx.seal = False  # the hot path: the next write of any kind seals this claim
            now = store.clock()
            expires = now + lease_s
            row = tx.one(sql.recover, (project, now, project, now, *ready))
            if row is not None:
                recovered = _recover(tx, row, project, worker, now, lease_s)
                if recovered is None:
                    continue  # the transaction commits a failure; look for another item
                return recovered
            soonest = tx.one(sql.soonest_expiry, (project,))
            next_check = _note_next_check(checks, project, now, soonest)
            taken = tx.one(sql.take, (worker, expires, now, project, project, now, *ready))
            if taken is not None:
                checks[project] = min(next_check, expires)
            if taken is None:
                idle.add(project)
                return None
            item_id, attempt, token = taken[0], int(taken[1]), int(taken[2])
            if not store.dialect.logs_claims:
                _claimed_event(
                    tx, project, item_id, S.PENDING, worker, attempt, token, expires, now
                )
            return Lease(project, item_id, worker, token, attempt, expires, lease_s)


def _work_in_sight(
    store: Store, sql: _ClaimSql, project: str, ready: tuple[str, ...], checks: dict[str, float]
) -> bool:
    """Whether a claim may find anything: a lapsed lease, a parked item now due or a ready
    pending item, read without taking the write lock. When there is none, notes when the next
    lease may lapse, as the claim would."""
    with store.transaction(write=False) as tx:
        now = store.clock()
        if tx.one(sql.any_work, (project, now, project, now, *ready, project, now, *ready)):
            return True
        soonest = tx.one(sql.soonest_expiry, (project,))
    _note_next_check(checks, project, now, soonest)
    return False


def _recover(
    tx: Tx, row: Sequence[Any], project: str, worker: str, now: float, lease_s: float
) -> Lease | None:
    """Claim a lapsed lease's item or a parked item now due; None when it may not run again
    (it is failed instead, and its dependents skipped).

    A lease lapses when its worker died (killed, suspended, the machine restarted), which is no
    failure of the item's work: that attempt is given back and the claim reruns it. Reclaims
    are counted apart, with a bound of their own, so a worker that dies on every try (a crash
    loop) still ends."""
    item_id, state, attempts, max_attempts, fence, old_worker, old_expiry, reason, reclaims = row
    current = ItemState(state)
    attempt = int(attempts) + 1
    if old_expiry is not None:
        # A lease its run kept when a person stopped it (Ctrl-C, SIGTERM) lapsed by no death.
        reclaims = int(reclaims) + (reason != KEPT_BY_STOP)
        expired = LeaseExpired(
            worker=old_worker, attempt=attempts, expired_at=old_expiry, attempt_refunded=True
        )
        tx.append_event(project, item_id, expired)
        if reclaims > MAX_RECLAIMS:
            why = f"its worker died {reclaims} times on it (lease of {old_worker} expired)"
            _finish_failed(tx, project, item_id, current, attempts, why)
            return None
        attempt = max(int(attempts), 1)  # the lapsed attempt is run again, not counted twice
    elif attempts >= max_attempts:
        _finish_failed(tx, project, item_id, current, attempts, reason or "out of attempts")
        return None
    _check(item_id, current, S.CLAIMED)
    token = int(fence) + 1
    expires = now + lease_s
    tx.execute(
        "UPDATE items SET state = 'claimed', attempts = ?, reclaims = ?, fence = ?, "
        "lease_worker = ?, lease_expires = ?, not_before = NULL, updated_at = ?, "
        "reason = CASE WHEN reason = ? THEN NULL ELSE reason END WHERE project = ? AND id = ?",
        (attempt, reclaims, token, worker, expires, now, KEPT_BY_STOP, project, item_id),
    )
    _claimed_event(tx, project, item_id, current, worker, attempt, token, expires, now)
    return Lease(project, item_id, worker, token, attempt, expires, lease_s)


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


def ended(store: Store, lease: Lease) -> bool:
    """Whether `lease` no longer holds its item (its holder ended it, or it was taken over or
    lapsed), read without taking the write lock."""
    with store.transaction(write=False) as tx:
        row = tx.one(
            "SELECT fence, lease_expires FROM items WHERE project = ? AND id = ?",
            (lease.project, lease.item_id),
        )
    return row is None or int(row[0]) != lease.token or row[1] is None


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
        _move(tx, store, lease, current, wanted, Advanced, keep_lease=True)


def complete(store: Store, lease: Lease, state: ItemState | str = S.PR_OPEN) -> None:
    """End the lease with the work delivered: pr_open (usual), merged or closed."""
    wanted = ItemState(state)
    if wanted not in WORKER_OUTCOMES:
        raise IllegalTransition(lease.item_id, "a lease", wanted.value)
    with store.transaction() as tx:
        current = _held(tx, store, lease)
        _check(lease.item_id, current, wanted)
        _move(tx, store, lease, current, wanted, Completed)


def fail(
    store: Store,
    lease: Lease,
    reason: str,
    *,
    permanent: bool = False,
    retry_after_s: float = 0.0,
    failure: str | None = None,
) -> ItemState:
    """End the lease with a failure (of class `failure`, recorded with it); returns the item's
    new state.

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
            AttemptFailed(
                worker=lease.worker,
                attempt=lease.attempt,
                reason=reason,
                permanent=permanent,
                final=final,
                failure=failure,
            ),
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
            Requeued,
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
        _move(tx, store, lease, current, S.PENDING, Released, reason=reason)


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
            Deferred,
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
    kind: type[LeaseMove],
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
    tx.append_event(
        lease.project,
        lease.item_id,
        kind(
            from_=current,
            to=wanted,
            worker=lease.worker,
            attempt=lease.attempt,
            reason=reason,
            until=not_before,
        ),
    )


def _live_leases(
    tx: Tx, project: str, worker: str, now: float, *, prefix: bool, leased: bool = False
) -> dict[str, str]:
    """The items whose live lease a worker named `worker` holds (with `prefix`, any worker
    whose name starts so), each with its holder; with `leased`, in a leased state only."""
    match = "lease_worker LIKE ?" if prefix else "lease_worker = ?"
    states = f" AND state IN ({LEASED_STATES})" if leased else ""
    rows = tx.all(
        f"SELECT id, lease_worker FROM items WHERE project = ? AND {match} "
        f"AND lease_expires IS NOT NULL AND lease_expires >= ?{states}",
        (project, worker + "%" if prefix else worker, now),
    )
    # LIKE is only a coarse filter (`_` and `%` match anything): keep exact prefix matches.
    return {str(r[0]): str(r[1]) for r in rows if not prefix or str(r[1]).startswith(worker)}


def keep_for_restart(store: Store, project: str, worker_prefix: str) -> tuple[str, ...]:
    """Note, on the items whose live leases workers named `worker_prefix…` hold, that their run
    was stopped by a person (Ctrl-C, SIGTERM): when the next run takes them back, that is not
    counted as a worker dying (MAX_RECLAIMS bounds deaths, and a person may stop a run any
    number of times). A run killed outright (SIGKILL, a crash) notes nothing, and counts."""
    with store.transaction() as tx:
        ids = tuple(
            _live_leases(tx, project, worker_prefix, store.clock(), prefix=True, leased=True)
        )
        for item_id in ids:
            tx.execute(
                "UPDATE items SET reason = ? WHERE project = ? AND id = ?",
                (KEPT_BY_STOP, project, item_id),
            )
    return ids


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
    with store.transaction() as tx:
        holders = _live_leases(tx, project, worker, now, prefix=prefix)
        ids = tuple(holders)
        for item_id in ids:
            tx.execute(
                "UPDATE items SET lease_expires = ? WHERE project = ? AND id = ?",
                (now - 0.001, project, item_id),
            )
            tx.append_event(project, item_id, LeaseReclaimed(worker=holders[item_id], by=worker))
    return ids
