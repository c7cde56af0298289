"""Items tried again: a failed, skipped, closed or reverted item, and the items it held back,
re-queued from the current default branch (`agent-harness work retry`, `POST .../retry`)."""

from __future__ import annotations

from collections.abc import Sequence

from agent_harness.errors import UsageError
from agent_harness.queue.items import (
    WITHDRAWN,
    IllegalTransition,
    ItemBusy,
    ItemState,
    S,
    UnknownItem,
    _check,
    closed_issue_number,
)
from agent_harness.store.database import Store, Tx
from agent_harness.store.events import Retried

RETRYABLE = (S.FAILED, S.SKIPPED, S.CLOSED, S.REVERTED)


class NotRetryable(IllegalTransition, UsageError):
    """Only an item that ended without its work landing can be retried (a usage error: the
    person asked for something the item's state does not allow)."""

    def __init__(self, item_id: str, state: ItemState) -> None:
        names = ", ".join(s.value for s in RETRYABLE[:-1]) + f" or {RETRYABLE[-1].value}"
        self.item_id, self.current, self.wanted = item_id, state.value, S.PENDING.value
        UsageError.__init__(self, f"{item_id} is {state.value}; only {names} items can be retried")


def retry(store: Store, project: str, item_id: str, *, fresh: bool = False) -> tuple[str, ...]:
    """Re-queue a failed, skipped, closed or reverted item and the items it skipped.

    The retried item starts over from the current default branch, on a branch of its own: its
    old branch is kept as it was (nothing is lost), or with `fresh` discarded. Returns the
    re-queued ids. Refused while a live lease holds the item, and for any other state.
    """
    return retry_all(store, project, [item_id], fresh=fresh)


def retry_all(
    store: Store, project: str, item_ids: Sequence[str], *, fresh: bool = False
) -> tuple[str, ...]:
    """`retry` of each of `item_ids`, all or none: one that is refused leaves every other as
    it was. One that an earlier of them brought back (an item it had blocked) is not retried
    twice."""
    requeued: list[str] = []
    with store.transaction() as tx:
        for item_id in item_ids:
            if item_id not in requeued:
                requeued += _retry_in(tx, store, project, item_id, fresh)
    return tuple(requeued)


def _retry_in(tx: Tx, store: Store, project: str, item_id: str, fresh: bool) -> list[str]:
    """`retry` of one item inside the caller's transaction; the ids re-queued."""
    row = tx.one(
        f"SELECT state, lease_worker, lease_expires, reason FROM items "
        f"WHERE project = ? AND id = ?{store.dialect.lock_rows}",
        (project, item_id),
    )
    if row is None:
        raise UnknownItem(project, item_id)
    state, worker, expires = ItemState(row[0]), row[1], row[2]
    if state is S.SKIPPED and row[3] == WITHDRAWN:  # the next run would skip it again
        raise UsageError(f"{item_id} is no longer in the plan; put it back, then run")
    number = closed_issue_number(row[3]) if state is S.SKIPPED else None
    if number is not None:  # so would it while the issue is closed
        raise UsageError(
            f"{item_id}'s issue #{number} is closed; reopen it, and the next run works the item"
        )
    if expires is not None and expires >= store.clock():
        raise ItemBusy(item_id, worker or "?", expires)
    if state not in RETRYABLE:
        raise NotRetryable(item_id, state)
    _check(item_id, state, S.PENDING)
    now = store.clock()
    requeued = [item_id]
    tx.execute(
        "UPDATE items SET state = 'pending', attempts = 0, reclaims = 0, reason = NULL, "
        "blocked_by = NULL, not_before = NULL, updated_at = ? WHERE project = ? AND id = ?",
        (now, project, item_id),
    )
    tx.append_event(project, item_id, Retried(from_=state, to=S.PENDING, fresh=fresh))
    for (dependent,) in tx.all(
        "SELECT id FROM items WHERE project = ? AND blocked_by = ? AND state = 'skipped'",
        (project, item_id),
    ):
        tx.execute(
            "UPDATE items SET state = 'pending', reason = NULL, blocked_by = NULL, "
            "updated_at = ? WHERE project = ? AND id = ?",
            (now, project, dependent),
        )
        tx.append_event(project, dependent, Retried(from_=S.SKIPPED, to=S.PENDING, via=item_id))
        requeued.append(dependent)
    return requeued
