"""Reading the event log a page at a time: in id order for a history, or in the log's order,
settled events only, for a reader that follows the log with a cursor (see `store.dialects`).

A follower that finds events committed after its cursor but not yet settled (an older
transaction is still in flight) waits for that transaction, briefly, rather than answer without
them: so a process reads back what it has just written, as it would expect to.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from agent_harness.store.events import Event, read_payload
from agent_harness.store.migrations import UNCHAINED

if TYPE_CHECKING:
    from agent_harness.store.database import Store, Tx

# How long a follower waits for transactions in flight before the events after them: ours take
# milliseconds; one held open by hand elsewhere on the server is not waited for beyond this.
SETTLE_WAIT_S = 2.0


def page(
    store: Store,
    where: str,
    params: tuple[Any, ...],
    limit: int,
    project: str | None,
    item: str | None,
    order: str,
) -> list[Event]:
    """Up to `limit` events matching `where` and the filters, in `order`."""
    with store.transaction(write=False) as tx:
        filters, values = _filters(tx, project, item)
        sql = (
            "SELECT id, ts, project, item, kind, payload, external_id FROM events "
            f"WHERE {where}{filters} ORDER BY {order} LIMIT ?"
        )
        rows = tx.all(sql, (*params, *values, limit))
    return [
        Event(
            id=r[0],
            ts=r[1],
            project=r[2],
            item=r[3],
            kind=r[4],
            payload=read_payload(r[4], json.loads(r[5])),
            external_id=r[6],
        )
        for r in rows
    ]


def _filters(tx: Tx, project: str | None, item: str | None) -> tuple[str, tuple[str, ...]]:
    """The conditions for an optional project and item, and their parameters."""
    if item is not None:
        where, params = of_item(project, item)
        return f" AND {where}", params
    if project is None:
        return "", ()
    chained = tx.one("SELECT 1 FROM items WHERE project = ? AND last_claim > 0 LIMIT 1", (project,))
    if chained is None:
        # None of its claims is chained (an inception session, PostgreSQL, a log from before
        # migration 9): the history index holds every event of the project, so say so to use it.
        return f" AND project = ? AND {UNCHAINED}", (project,)
    return " AND project = ?", (project,)


def of_item(project: str | None, item: str) -> tuple[str, tuple[str, ...]]:
    """A condition (and its parameters) for the events of one item, of one project or of any.

    Its claims that SQLite's claim trigger wrote are chained from the item's row instead of
    indexed (migration 9); the rest are found by the index `events_item_history`. Rows in
    neither (on PostgreSQL, the chain is always empty) are not lost: both sides are read.
    """
    scope = "" if project is None else "project = ? AND "
    keys: tuple[str, ...] = (item,) if project is None else (project, item)
    where = (
        f"{scope}item = ? AND id IN (WITH RECURSIVE claims(id) AS ("
        f"SELECT last_claim FROM items WHERE {scope}id = ? AND last_claim > 0 UNION ALL "
        "SELECT e.prev FROM events e JOIN claims c ON e.id = c.id WHERE e.prev > 0) "
        f"SELECT id FROM claims UNION ALL SELECT id FROM events WHERE {scope}item = ? "
        f"AND {UNCHAINED})"
    )
    return where, keys * 3


def latest_id(tx: Tx, project: str) -> int:
    """The id of the newest event of `project` (0 for none), found by index and chain."""
    row = tx.one(
        "SELECT MAX(m) FROM (SELECT MAX(id) AS m FROM events WHERE project = ? "
        f"AND {UNCHAINED} UNION ALL SELECT MAX(last_claim) FROM items WHERE project = ?) newest",
        (project, project),
    )
    return int(row[0] or 0) if row else 0


def follow(
    store: Store, after_id: int, limit: int, project: str | None, item: str | None
) -> list[Event]:
    """Settled events after the event `after_id`, in the log's order."""
    dialect = store.dialect
    found = page(store, *dialect.after_cursor(after_id), limit, project, item, dialect.log_order())
    if dialect.name != "postgresql" or len(found) == limit:
        return found
    cursor = found[-1].id if found else after_id
    if not _wait_settled(store, cursor, project, item):
        return found
    more = page(
        store, *dialect.after_cursor(cursor), limit - len(found), project, item, dialect.log_order()
    )
    return found + more


def _wait_settled(store: Store, cursor: int, project: str | None, item: str | None) -> bool:
    """Wait until the events committed after `cursor` but not settled yet have settled; False
    when there were none."""
    where, params = store.dialect.after_cursor(cursor, settled=False)
    with store.transaction(write=False) as tx:
        filters, values = _filters(tx, project, item)
        row = tx.one(
            f"SELECT MAX(tx)::text FROM events WHERE {where}{filters} "
            "AND tx > pg_snapshot_xmin(pg_current_snapshot())",
            (*params, *values),
        )
    if row is None or row[0] is None:
        return False
    deadline = time.monotonic() + SETTLE_WAIT_S
    while not _settled(store, str(row[0])) and time.monotonic() < deadline:
        time.sleep(0.002)
    return True


def _settled(store: Store, tx_id: str) -> bool:
    with store.transaction(write=False) as tx:
        row = tx.one("SELECT pg_snapshot_xmin(pg_current_snapshot()) > ?::xid8", (tx_id,))
    return bool(row and row[0])
