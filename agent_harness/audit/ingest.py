"""Ingest, the only writer of the audit database.

Rows are keyed by where they came from (`source_id`), so ingesting anything twice adds nothing
twice: two ingests at once, one on a timer, one after a crash all end with each row once. The
work log is read from a high-water mark (the last work event id a committed ingest run saw),
and each batch is written with its run record in one transaction, so a crash loses at most the
batch in flight, which the next run reads again.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_harness.audit.coverage import AUDIT_LOCK_KEY, coverage
from agent_harness.audit.records import INSERT_ROW, AuditRow, day_of, row_of_stored
from agent_harness.store.database import Store, Tx

OUTCOMES = ("merged", "closed", "reverted")

# A batch of the work log after the high-water mark (rows as the driver gives them: tuples),
# settled events only, in the log's order (see store.dialects), so none is passed over.
_READ_EVENTS = "SELECT id, ts, project, item, kind, payload, external_id FROM events WHERE "

_TS = operator.attrgetter("ts")

# An idle watch writes a run record at most this often, so "last ingest" stays fresh without
# a row every few seconds.
QUIET_RECORD_S = 600.0


@dataclass(frozen=True)
class Skipped:
    """A line or record that could not be read: where, and why."""

    where: str
    reason: str


@dataclass
class IngestReport:
    """What one ingest did."""

    source: str
    added: int = 0
    duplicates: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    high_water: int = 0
    deliveries: int = 0
    held: int = 0  # records held back for the next ingest (an agent's message still written)

    def absorb(self, other: IngestReport) -> None:
        self.added += other.added
        self.duplicates += other.duplicates
        self.held += other.held
        self.skipped.extend(other.skipped)
        self.high_water = max(self.high_water, other.high_water)
        self.deliveries += other.deliveries

    def as_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "added": self.added,
            "duplicates": self.duplicates,
            "deliveries": self.deliveries,
            "held": self.held,
            "skipped": [{"where": s.where, "reason": s.reason} for s in self.skipped],
        }


def log_id(work: Store) -> str | None:
    """A name for this work log that survives a restart and differs when the database is made
    anew (its ids start again at 1): a hash of its first event. None while it has none."""
    with work.transaction(write=False) as tx:
        # The first settled event in the log's order: no event can later come before it.
        row = tx.one(
            f"SELECT id, ts, project, kind, payload FROM events WHERE {tx.dialect.settled()} "
            f"ORDER BY {tx.dialect.log_order()} LIMIT 1"
        )
    if row is None:
        return None
    text = json.dumps([row[0], repr(float(row[1])), row[2], row[3], row[4]])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def high_water(audit: Store, source: str) -> int:
    """The last work event the latest ingest of `source` read. The latest, not the largest:
    on PostgreSQL the log's order is not id order (see store.dialects)."""
    with audit.transaction(write=False) as tx:
        row = tx.one(
            "SELECT high_water FROM ingest_runs WHERE source = ? ORDER BY id DESC LIMIT 1",
            (source,),
        )
    return int(row[0]) if row and row[0] is not None else 0


def ingest_work_store(
    work: Store,
    audit: Store,
    *,
    batch: int = 2000,
    skipped: Sequence[Skipped] = (),
) -> IngestReport:
    """Bring the audit database up to date with the work log. `skipped` are lines an earlier
    step could not read (a JSONL file's), recorded with this run so `audit health` counts them."""
    ident = log_id(work)
    source = f"work:{ident}"
    report = IngestReport(source=source, skipped=list(skipped))
    if ident is None:
        if skipped:
            write_rows(audit, source, [], 0, skipped)
        return report
    after = high_water(audit, source)
    report.high_water = after
    first = True
    while True:
        with work.transaction(write=False) as tx:
            where, params = tx.dialect.after_cursor(after)
            sql = f"{_READ_EVENTS}{where} ORDER BY {tx.dialect.log_order()} LIMIT ?"
            events = tx.conn.execute(tx.dialect.sql(sql), (*params, batch)).fetchall()
        if not events and not first:
            return report
        rows = [row_of_stored(event, ident) for event in events]
        last = int(events[-1][0]) if events else after
        done = write_rows(audit, source, rows, last, skipped if first else ())
        report.absorb(done)
        first = False
        if len(events) < batch:
            return report
        after = last


def write_rows(
    audit: Store,
    source: str,
    rows: Sequence[AuditRow],
    mark: int,
    skipped: Sequence[Skipped] = (),
    *,
    record: bool = False,
) -> IngestReport:
    """Insert `rows` (each at most once), the deliveries they complete, and the run record, in
    one transaction. The run record is left out of a quiet run (nothing added or skipped, one
    recorded lately) unless `record` asks for it."""
    report = IngestReport(source=source, high_water=mark)
    skipped = list(skipped)
    with audit.transaction() as tx:
        if tx.dialect.name == "postgresql":
            tx.one("SELECT pg_advisory_xact_lock(?)", (AUDIT_LOCK_KEY,))
        now = audit.clock()
        rows, refused = _outside_thinned_days(tx, rows)
        skipped.extend(refused)
        report.skipped = list(skipped)
        newest = max(rows, key=_TS) if rows else None
        if rows:
            cursor = tx.conn.cursor()
            # Each row's `values(now)`, spelled out: it is per row, and the call showed.
            cursor.executemany(tx.dialect.sql(INSERT_ROW), [(*row, now) for row in rows])
            report.added = max(0, int(cursor.rowcount))
            report.duplicates = len(rows) - report.added
            report.deliveries = _record_deliveries(tx, rows)
        if record or report.added or skipped or _quiet_for_long(tx, source, now):
            tx.execute(
                "INSERT INTO ingest_runs (source, started, finished, high_water, added, "
                "duplicates, skipped, problems, last_ts, last_kind) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    source,
                    now,
                    audit.clock(),
                    mark,
                    report.added,
                    report.duplicates,
                    len(skipped),
                    json.dumps([[s.where, s.reason] for s in skipped[:50]]),
                    newest.ts if newest and report.added else None,
                    newest.kind if newest and report.added else None,
                ),
            )
    return report


def _outside_thinned_days(tx: Tx, rows: Sequence[AuditRow]) -> tuple[list[AuditRow], list[Skipped]]:
    """Rows of a day whose raw rows were thinned are refused: with the raw rows gone, a repeat
    could not be told from a new event, and adding it would count it twice."""
    covered = coverage(tx)
    limit = covered.thinned_before
    if not covered.through_id:
        return list(rows), []
    kept = [row for row in rows if row.day >= limit]
    refused = [
        Skipped(row.source_id, f"its day {row.day} was rolled up and thinned; not added again")
        for row in rows
        if row.day < limit
    ]
    return kept, refused


def _quiet_for_long(tx: Tx, source: str, now: float) -> bool:
    row = tx.one("SELECT MAX(finished) FROM ingest_runs WHERE source = ?", (source,))
    return row is None or row[0] is None or now - float(row[0]) >= QUIET_RECORD_S


def _reapplied(payload: str) -> bool:
    """Whether an outcome is a merge standing again after its revert was itself reverted: the
    same pull request's merge, delivered once already, not another one."""
    if "reapplied_after" not in payload:
        return False
    evidence = json.loads(payload).get("evidence")
    return isinstance(evidence, dict) and "reapplied_after" in evidence


def _record_deliveries(tx: Tx, rows: Sequence[AuditRow]) -> int:
    """One delivery per outcome (merged, closed, reverted), with the item's first claim, first
    pull request and number of claims as the audit knows them when the outcome arrives."""
    added = 0
    for row in rows:
        if row.kind != "outcome" or row.item is None:
            continue
        outcome = row.outcome
        if outcome not in OUTCOMES or _reapplied(row.payload):
            continue
        facts = tx.one(
            "SELECT MIN(CASE WHEN kind = 'claimed' THEN ts END), "
            "MIN(CASE WHEN kind = 'pr_opened' THEN ts END), "
            "SUM(CASE WHEN kind = 'claimed' THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN kind = 'attempt_failed' THEN 1 ELSE 0 END) "
            "FROM audit_events WHERE project = ? AND item = ? AND ts <= ?",
            (row.project, row.item, row.ts),
        )
        claimed, pr, claims, failed = facts if facts else (None, None, 0, 0)
        # The attempt delivered and those that failed before it: a claim taken back after a
        # kill, or after a wait for a limit, spent no attempt (as the queue counts them).
        attempts = 1 + int(failed or 0) if claims else 0
        added += tx.execute(
            "INSERT INTO deliveries (source_id, project, item, outcome, ts, day, claimed_ts, "
            "pr_ts, attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                row.source_id,
                row.project,
                row.item,
                outcome,
                row.ts,
                day_of(row.ts),
                claimed,
                pr,
                int(attempts or 0),
            ),
        )
    return added
