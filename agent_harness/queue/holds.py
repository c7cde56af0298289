"""Items kept from being claimed, for a run or for good, and let go again: held back by a run
(`--only`, or until their issue can be made), withdrawn as gone from the plan, and restored
when the plan names them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from agent_harness.queue.items import ISSUE_CLOSED, ISSUE_CLOSED_LIKE, WITHDRAWN, ItemState
from agent_harness.store.database import Store
from agent_harness.store.events import Held, Skipped, Unheld
from agent_harness.store.payload import Payload

S = ItemState

HOLD_REASON = "held: not selected for this run (--only)"
NO_ISSUE_REASON = "held: its issue could not be made (see the sync's problems); fix the plan item"


_FAR = 4102444800.0  # 2100-01-01: never due by itself; `unhold` is what frees a held item


def hold(
    store: Store, project: str, item_ids: Iterable[str], reason: str = HOLD_REASON
) -> tuple[str, ...]:
    """Keep these items from being claimed (pending or due ones only) until `unhold` frees
    them: HOLD_REASON for this run only, NO_ISSUE_REASON until a sync makes their issues."""
    return _move_unstarted(
        store, project, item_ids, S.WAITING, _FAR, reason,
        lambda was: Held(from_=was, reason=reason),
    )  # fmt: skip


def unhold(store: Store, project: str, reasons: Sequence[str] = (HOLD_REASON,)) -> tuple[str, ...]:
    """Free every item held back for one of `reasons` (also after a killed run held them)."""
    marks = ", ".join("?" * len(reasons))
    with store.transaction() as tx:
        rows = tx.all(
            f"SELECT id FROM items WHERE project = ? AND state = 'waiting' AND reason IN ({marks})",
            (project, *reasons),
        )
        for (item_id,) in rows:
            tx.execute(
                "UPDATE items SET state = 'pending', not_before = NULL, reason = NULL, "
                "updated_at = ? WHERE project = ? AND id = ?",
                (store.clock(), project, item_id),
            )
            tx.append_event(project, item_id, Unheld(to=S.PENDING))
    return tuple(str(row[0]) for row in rows)


def withdraw(store: Store, project: str, item_ids: Iterable[str], reason: str) -> tuple[str, ...]:
    """Items gone from the plan: skipped (never run), with the reason, if not yet started."""
    return _move_unstarted(
        store, project, item_ids, S.SKIPPED, None, reason,
        lambda was: Skipped(from_=was, to=S.SKIPPED, reason=reason),
    )  # fmt: skip


def _move_unstarted(
    store: Store,
    project: str,
    item_ids: Iterable[str],
    to: ItemState,
    not_before: float | None,
    reason: str,
    event: Callable[[str], Payload],
) -> tuple[str, ...]:
    """Move each of these items that has not started (pending, or waiting) to `to`, with
    `reason`, recording `event(the state it was in)`; the ids moved."""
    moved: list[str] = []
    with store.transaction() as tx:
        for item_id in item_ids:
            row = tx.one("SELECT state FROM items WHERE project = ? AND id = ?", (project, item_id))
            if row is None or row[0] not in (S.PENDING, S.WAITING):
                continue
            tx.execute(
                "UPDATE items SET state = ?, not_before = ?, reason = ?, updated_at = ? "
                "WHERE project = ? AND id = ?",
                (to, not_before, reason, store.clock(), project, item_id),
            )
            tx.append_event(project, item_id, event(row[0]))
            moved.append(item_id)
    return tuple(moved)


def skip_closed(
    store: Store,
    project: str,
    closed: dict[str, int],
    open_again: Iterable[str],
    delivered: Callable[[str], bool],
) -> tuple[str, ...]:
    """Items whose issue a person closed (`closed`, by the issue's number): skipped, if not yet
    started and not `delivered` (a pull request of ours, which reconcile follows), saying which
    issue to reopen. Of those skipped so before, the ones named in `open_again` (in the plan,
    their issue listed and open) go back to pending; an item whose issue went unread, or that
    left the plan, stays as it is."""
    _unskip(store, project, open_again, "LIKE", ISSUE_CLOSED_LIKE)
    moved: list[str] = []
    for item_id, number in sorted(closed.items()):
        if not delivered(item_id):
            moved += withdraw(store, project, [item_id], ISSUE_CLOSED.format(number=number))
    return tuple(moved)


def restore(store: Store, project: str, item_ids: Iterable[str]) -> tuple[str, ...]:
    """Items withdrawn as gone from the plan that the plan names again: pending once more, as
    if they had never left (a person told to "put it back, then run" did just that)."""
    return _unskip(store, project, item_ids, "=", WITHDRAWN)


def _unskip(
    store: Store, project: str, item_ids: Iterable[str], compare: str, reason: str
) -> tuple[str, ...]:
    """Of these items, those skipped for `reason` (`compare` is `=`, or `LIKE` for a pattern):
    pending once more. Read first, so a plan of any length costs one read when none is."""
    named = set(item_ids)
    with store.transaction(write=False) as tx:
        skipped = tx.all(
            f"SELECT id FROM items WHERE project = ? AND state = 'skipped' AND reason {compare} ? "
            "ORDER BY id",
            (project, reason),
        )
    back = [str(row[0]) for row in skipped if row[0] in named]
    if not back:
        return ()
    restored: list[str] = []
    with store.transaction() as tx:
        for item_id in back:
            if tx.execute(  # still skipped so: another host's run may have brought it back
                "UPDATE items SET state = 'pending', reason = NULL, updated_at = ? "
                f"WHERE project = ? AND id = ? AND state = 'skipped' AND reason {compare} ?",
                (store.clock(), project, item_id, reason),
            ):
                tx.append_event(project, item_id, Unheld(from_=S.SKIPPED, to=S.PENDING))
                restored.append(item_id)
    return tuple(restored)
