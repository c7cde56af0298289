"""A PostgreSQL event log copied from another server, made to follow this one's transactions.

Each event names the transaction that wrote it (`tx`, see `dialects`), and readers that follow
the log stop at the oldest transaction still in flight. A log copied with `pg_dump` into another
server keeps the first server's transaction ids, which may lie ahead of every id the new server
will hand out: followers would then see no new event, ever, and new events would sort before
the old ones. So a store that finds its log ahead refuses to open (`LogAhead`), and the repair
(`agent-harness work verify --restore`) moves the copied ids below this server's, keeping the
log's order: runs of transactions whose events are already in id order share one new id (the
order within a run is then the id order, as before), each later run the next id. The events'
hashes do not cover `tx`, so the chain still holds, in the same order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_harness.store.errors import StoreError

if TYPE_CHECKING:
    from agent_harness.store.database import Tx

# The lowest transaction id a PostgreSQL server hands out (0 to 2 are reserved).
_FIRST_NORMAL_XID = 3


class LogAhead(StoreError):
    """The event log names transactions ahead of this server's own."""

    exit_code = 2

    def __init__(self, where: str, repair: str) -> None:
        super().__init__(
            where,
            "its event log names transactions ahead of this server's (was it copied from "
            "another server with pg_dump?); readers that follow the log would see no new event. "
            f"Re-base it with: {repair}",
        )


def log_ahead(tx: Tx) -> bool:
    """Whether some event names a transaction this server has not reached yet."""
    if tx.dialect.name != "postgresql":
        return False
    row = tx.one(
        "SELECT (SELECT MAX(tx) FROM events) >= pg_snapshot_xmax(pg_current_snapshot()) "
        "OR (SELECT MAX(tx) FROM event_chain) >= pg_snapshot_xmax(pg_current_snapshot())"
    )
    return bool(row and row[0])


def rebase_log(tx: Tx) -> int:
    """Move every event's transaction id (and its seal's) below this server's oldest one in
    flight, keeping the log's order; returns how many new ids were used. The append-only
    guards must be off for the block (the caller re-creates them)."""
    # In the log's order, a new run starts at a transaction whose first event has a lower id
    # than the event before it; every transaction falls in one run.
    tx.execute(
        "CREATE TEMP TABLE rebase_runs ON COMMIT DROP AS "
        "WITH ordered AS (SELECT tx, id, lag(tx) OVER w AS prev_tx, lag(id) OVER w AS prev_id "
        "FROM events WINDOW w AS (ORDER BY tx, id)), "
        "runs AS (SELECT tx, SUM(CASE WHEN prev_tx IS NOT NULL AND tx <> prev_tx "
        "AND id < prev_id THEN 1 ELSE 0 END) OVER (ORDER BY tx, id) AS run FROM ordered) "
        f"SELECT DISTINCT tx AS old, ({_FIRST_NORMAL_XID} + run)::text::xid8 AS new FROM runs"
    )
    row = tx.one(
        "SELECT COUNT(DISTINCT new), MAX(new) < pg_snapshot_xmin(pg_current_snapshot()) "
        "FROM rebase_runs"
    )
    used = int(row[0]) if row else 0
    if used and not (row and row[1]):
        raise StoreError("event log", f"{used} runs of transactions do not fit below this server's")
    tx.execute("UPDATE events e SET tx = r.new FROM rebase_runs r WHERE e.tx = r.old")
    tx.execute(
        "UPDATE event_chain c SET tx = e.tx FROM events e WHERE e.id = c.event_id AND c.tx <> e.tx"
    )
    return used
