"""A hash chain over the event log, so an edited or deleted event is found, not believed.

The database refuses UPDATE and DELETE on events by trigger, but whoever can drop a trigger can
rewrite history. So every event is also *sealed*: a row in `event_chain` holds the hash of the
event's content and of the seal before it. Sealing runs inside a writing transaction, over the
settled events not yet sealed, in the log's order (see `store.dialects`), by one writer at a
time: SQLite has only one; on PostgreSQL a writer that finds another sealing leaves the work to
a later write instead of waiting. So the chain has no fork, and no event can later appear in
the part already sealed. Changing an event breaks its own hash; deleting one breaks the link
after it.
(Rewriting every later seal as well is only caught against a copy of the head kept elsewhere,
which is what the audit ingest keeps.)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_harness.store import reading

if TYPE_CHECKING:
    from agent_harness.store.database import Store, Tx

GENESIS = "0" * 64
# Any constant works; it only has to be the same in every process that seals events.
SEAL_LOCK_KEY = 0x6A68_6576
# Sealing a database written before the chain existed happens a batch per write, so no single
# transaction grows with the size of the history.
SEAL_BATCH = 5000
_EVENT_COLUMNS = "id, ts, project, item, kind, payload, external_id"


def event_hash(previous: str, row: tuple[Any, ...]) -> str:
    """The seal of one event row (id, ts, project, item, kind, payload text, external id)."""
    _id, ts, project, item, kind, payload, external_id = row
    body = json.dumps(
        [previous, float(ts), project, item, kind, payload, external_id],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def seal_pending(tx: Tx, limit: int = SEAL_BATCH) -> int:
    """Seal the settled events written since the last seal, in the log's order; returns how
    many (0 on PostgreSQL while another writer is sealing: a later write seals these)."""
    pg = tx.dialect.name == "postgresql"
    if pg:
        held = tx.one(
            "SELECT pg_try_advisory_xact_lock(?, hashtext(current_schema()))", (SEAL_LOCK_KEY,)
        )
        if not held or not held[0]:
            return 0
    at, previous = _head(tx, pg)
    after, params = _cmp(pg, "e", ">", at)
    after += f" AND {tx.dialect.settled('e')}"  # none can commit before these later
    extra = ", tx" if pg else ""
    rows = tx.all(
        f"SELECT {_EVENT_COLUMNS}{extra} FROM events e WHERE {after} "
        f"ORDER BY {tx.dialect.log_order('e')} LIMIT ?",
        (*params, limit),
    )
    marks = ", ?" if pg else ""
    insert = f"INSERT INTO event_chain (event_id, prev_hash, hash{extra}) VALUES (?, ?, ?{marks})"
    for row in rows:
        digest = event_hash(previous, row[:7])
        tx.execute(insert, (row[0], previous, digest, *row[7:]))
        previous = digest
    return len(rows)


def _head(tx: Tx, pg: bool) -> tuple[Pos, str]:
    """The last seal's place and hash (the start of the log and GENESIS before any). Its place
    is the seal's own, not looked up through its event, which may be gone (deleted by hand)."""
    tx_col = "c.tx::text" if pg else "0"
    row = tx.one(
        f"SELECT {tx_col}, c.event_id, c.hash FROM event_chain c "
        f"ORDER BY {_chain_order(pg, True)} LIMIT 1"
    )
    return ((int(row[0]), int(row[1])), str(row[2])) if row else ((0, 0), GENESIS)


def _unsealed(tx: Tx, pg: bool, head: Pos) -> int:
    """How many events come after the last seal, settled or not."""
    where, params = _cmp(pg, "e", ">", head)
    row = tx.one(f"SELECT COUNT(*) FROM events e WHERE {where}", params)
    return int(row[0]) if row else 0


def _chain_order(pg: bool, desc: bool = False) -> str:
    """ORDER BY for seals in chain order: the log's order of their events."""
    d = " DESC" if desc else ""
    return f"c.tx{d}, c.event_id{d}" if pg else f"c.event_id{d}"


# A place in the log's order: (transaction, event id); the transaction is 0 on SQLite.
Pos = tuple[int, int]


def _cmp(pg: bool, alias: str, op: str, pos: Pos) -> tuple[str, tuple[Any, ...]]:
    """A condition comparing the rows of `alias` (events `e` or seals `c`) with `pos`."""
    column = "event_id" if alias == "c" else "id"
    if pg:
        return f"({alias}.tx, {alias}.{column}) {op} (?::xid8, ?)", (str(pos[0]), pos[1])
    return f"{alias}.{column} {op} ?", (pos[1],)


def _pos_of(tx: Tx, pg: bool, event_id: int) -> Pos:
    """The place of event `event_id` (or of the last event before it, for an id of none)."""
    if not pg:
        return (0, event_id)
    row = tx.one("SELECT tx::text FROM events WHERE id <= ? ORDER BY id DESC LIMIT 1", (event_id,))
    return (int(row[0]) if row else 0, event_id)


@dataclass(frozen=True)
class ChainBreak:
    """Where the chain stops holding, and how."""

    event_id: int
    problem: str

    def describe(self) -> str:
        return f"event {self.event_id}: {self.problem}"


@dataclass(frozen=True)
class ChainReport:
    """The result of checking the chain over a range of event ids."""

    checked: int = 0
    unsealed: int = 0  # events after the last seal (written since the last sealing write)
    breaks: tuple[ChainBreak, ...] = field(default=())
    head: str = GENESIS  # the hash of the last sealed event checked

    @property
    def intact(self) -> bool:
        return not self.breaks


def verify_chain(
    store: Store, *, first_id: int = 1, last_id: int | None = None, max_breaks: int = 20
) -> ChainReport:
    """Check every seal and every event from event `first_id` to event `last_id` (inclusive),
    in the log's order.

    Reads in pages, so a long history costs memory for one page only.
    """
    pg = store.dialect.name == "postgresql"
    with store.transaction(write=False) as tx:
        lo = (0, 0) if first_id <= 1 else (_pos_of(tx, pg, first_id)[0], first_id - 1)
        where, params = _cmp(pg, "c", "<=", lo)
        before = tx.one(
            f"SELECT hash FROM event_chain c WHERE {where} "
            f"ORDER BY {_chain_order(pg, True)} LIMIT 1",
            params,
        )
        head, _ = _head(tx, pg)
        end = head if last_id is None else min(head, _pos_of(tx, pg, last_id))
    previous = str(before[0]) if before else GENESIS
    if before is None and first_id > 1:
        previous = ""  # no seal before the range: the first link cannot be checked
    breaks: list[ChainBreak] = []
    checked = 0
    cursor = lo
    while cursor < end and len(breaks) < max_breaks:
        rows, stray = _chain_page(store, pg, cursor, end, max_breaks)
        breaks += [ChainBreak(int(r[0]), "has no seal: added or re-added by hand") for r in stray]
        if not rows:
            break
        for row in rows:
            event_id, prev_hash, digest = int(row[0]), str(row[1]), str(row[2])
            if previous and prev_hash != previous:
                breaks.append(ChainBreak(event_id, "its seal does not follow the one before it"))
            if row[3] is None:
                breaks.append(ChainBreak(event_id, "was deleted"))
            elif event_hash(prev_hash, row[3:10]) != digest:
                breaks.append(ChainBreak(event_id, "was changed after it was written"))
            previous = digest
            checked += 1
        cursor = (int(rows[-1][10]), int(rows[-1][0]))
    unsealed = 0
    if last_id is None:
        with store.transaction(write=False) as tx:
            unsealed = _unsealed(tx, pg, head)
    breaks.sort(key=lambda b: b.event_id)
    return ChainReport(checked, unsealed, tuple(breaks[:max_breaks]), previous or GENESIS)


def _chain_page(
    store: Store, pg: bool, cursor: Pos, end: Pos, max_breaks: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The next seals after `cursor` (up to `end`) with their events, and the events in the
    same stretch that have no seal."""
    after, after_params = _cmp(pg, "c", ">", cursor)
    upto, upto_params = _cmp(pg, "c", "<=", end)
    tx_col = "c.tx::text" if pg else "0"
    with store.transaction(write=False) as tx:
        rows = tx.all(
            "SELECT c.event_id, c.prev_hash, c.hash, e.id, e.ts, e.project, e.item, e.kind, "
            f"e.payload, e.external_id, {tx_col} FROM event_chain c LEFT JOIN events e "
            f"ON e.id = c.event_id WHERE {after} AND {upto} "
            f"ORDER BY {_chain_order(pg)} LIMIT 1000",
            (*after_params, *upto_params),
        )
        # An event with no seal inside the sealed stretch was slipped in (or its seal removed).
        last = (int(rows[-1][10]), int(rows[-1][0])) if rows else end
        e_after, e_after_params = _cmp(pg, "e", ">", cursor)
        e_upto, e_upto_params = _cmp(pg, "e", "<=", last)
        stray = tx.all(
            "SELECT e.id FROM events e LEFT JOIN event_chain c ON c.event_id = e.id "
            f"WHERE {e_after} AND {e_upto} AND c.event_id IS NULL "
            f"ORDER BY {store.dialect.log_order('e')} LIMIT ?",
            (*e_after_params, *e_upto_params, max_breaks),
        )
    return rows, stray


def seal_settled(
    store: Store,
    *,
    timeout_s: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Seal every event committed so far, waiting (up to `timeout_s`) for the transactions in
    flight before them to end, as until then they are not settled; returns how many it sealed.
    On SQLite one pass seals them all."""
    pg = store.dialect.name == "postgresql"
    sealed = 0
    deadline = clock() + timeout_s
    while True:
        with store.transaction() as tx:
            sealed += seal_pending(tx)
            left = _unsealed(tx, pg, _head(tx, pg)[0])
        if not left or clock() >= deadline:
            return sealed
        sleep(0.01)


def verify_item(store: Store, project: str, item: str) -> ChainReport | None:
    """Check the stretch of the chain that holds every event of one item (from its first to
    its last in the log's order); None when the item has none."""
    order = store.dialect.log_order()
    where, params = reading.of_item(project, item)
    ends = []
    with store.transaction(write=False) as tx:
        for way in (order, store.dialect.log_order(desc=True)):
            row = tx.one(f"SELECT id FROM events WHERE {where} ORDER BY {way} LIMIT 1", params)
            ends.append(int(row[0]) if row else None)
    first, last = ends
    if first is None or last is None:
        return None
    return verify_chain(store, first_id=first, last_id=last)
