"""A hash chain over the event log, so an edited or deleted event is found, not believed.

The database refuses UPDATE and DELETE on events by trigger, but whoever can drop a trigger can
rewrite history. So every event is also *sealed*: a row in `event_chain` holds the hash of the
event's content and of the seal before it. Sealing runs inside the writing transaction, under
the same lock that orders event ids, over every event not yet sealed, so the chain follows the
ids with no fork. Changing an event breaks its own hash; deleting one breaks the link after it.
(Rewriting every later seal as well is only caught against a copy of the head kept elsewhere,
which is what the audit ingest keeps.)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_harness.store.database import Store, Tx

GENESIS = "0" * 64
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
    """Seal the events written since the last seal, oldest first; returns how many.

    The caller holds the event lock (PostgreSQL) or the write lock (SQLite), so no event older
    than the ones read here can still commit.
    """
    head = tx.one("SELECT event_id, hash FROM event_chain ORDER BY event_id DESC LIMIT 1")
    last_id, previous = (int(head[0]), str(head[1])) if head else (0, GENESIS)
    rows = tx.all(
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE id > ? ORDER BY id LIMIT ?", (last_id, limit)
    )
    for row in rows:
        digest = event_hash(previous, row)
        tx.execute(
            "INSERT INTO event_chain (event_id, prev_hash, hash) VALUES (?, ?, ?)",
            (row[0], previous, digest),
        )
        previous = digest
    return len(rows)


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
    """Check every seal and every event between `first_id` and `last_id` (inclusive).

    Reads in pages, so a long history costs memory for one page only.
    """
    breaks: list[ChainBreak] = []
    with store.transaction(write=False) as tx:
        before = tx.one(
            "SELECT hash FROM event_chain WHERE event_id < ? ORDER BY event_id DESC LIMIT 1",
            (first_id,),
        )
        sealed_to = tx.one("SELECT MAX(event_id) FROM event_chain")
    previous = str(before[0]) if before else GENESIS
    if before is None and first_id > 1:
        previous = ""  # no seal before the range: the first link cannot be checked
    last_sealed = int(sealed_to[0]) if sealed_to and sealed_to[0] is not None else 0
    end = last_sealed if last_id is None else min(last_id, last_sealed)
    checked = 0
    cursor = first_id - 1
    while cursor < end and len(breaks) < max_breaks:
        with store.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT c.event_id, c.prev_hash, c.hash, e.id, e.ts, e.project, e.item, e.kind, "
                "e.payload, e.external_id FROM event_chain c LEFT JOIN events e "
                "ON e.id = c.event_id WHERE c.event_id > ? AND c.event_id <= ? "
                "ORDER BY c.event_id LIMIT 1000",
                (cursor, end),
            )
            # An event with no seal inside the sealed range was slipped in (or its seal removed).
            stray = tx.all(
                "SELECT e.id FROM events e LEFT JOIN event_chain c ON c.event_id = e.id "
                "WHERE e.id > ? AND e.id <= ? AND c.event_id IS NULL ORDER BY e.id LIMIT ?",
                (cursor, rows[-1][0] if rows else end, max_breaks),
            )
        breaks += [ChainBreak(int(r[0]), "has no seal: added or re-added by hand") for r in stray]
        if not rows:
            break
        for row in rows:
            event_id, prev_hash, digest = int(row[0]), str(row[1]), str(row[2])
            if previous and prev_hash != previous:
                breaks.append(ChainBreak(event_id, "its seal does not follow the one before it"))
            if row[3] is None:
                breaks.append(ChainBreak(event_id, "was deleted"))
            elif event_hash(prev_hash, row[3:]) != digest:
                breaks.append(ChainBreak(event_id, "was changed after it was written"))
            previous = digest
            checked += 1
        cursor = int(rows[-1][0])
    with store.transaction(write=False) as tx:
        tail = tx.one("SELECT COUNT(*) FROM events WHERE id > ?", (last_sealed,))
    unsealed = int(tail[0]) if tail and last_id is None else 0
    breaks.sort(key=lambda b: b.event_id)
    return ChainReport(checked, unsealed, tuple(breaks[:max_breaks]), previous or GENESIS)
