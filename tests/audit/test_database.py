"""The audit database: its own migrations, and rows the database itself refuses to change."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agent_harness.audit.baselines import record_baseline
from agent_harness.audit.database import AuditUnprotected, audit_url, migrate, open_audit
from agent_harness.audit.ingest import ingest_work_store
from agent_harness.audit.maintenance import maintain
from agent_harness.store.database import Store
from agent_harness.store.errors import StoreError
from agent_harness.testing.clock import FakeClock
from tests.audit.conftest import DAY, AuditEngine, work_an_item

pytestmark = pytest.mark.integration


def test_it_lives_beside_the_work_database_unless_told_otherwise() -> None:
    assert audit_url(None, "/srv/x/harness.sqlite") == "/srv/x/audit.sqlite"
    assert audit_url(None, "sqlite:////srv/x/harness.sqlite") == "/srv/x/audit.sqlite"
    assert audit_url("postgresql://h/db", "/srv/x/harness.sqlite") == "postgresql://h/db"


def test_migrations_run_once(audit_engine: AuditEngine, clock: FakeClock) -> None:
    first = audit_engine.open(clock)
    try:
        assert migrate(first) == 0
    finally:
        first.close()


def _filled(sqlite_work: Store, audit: Store, clock: FakeClock) -> None:
    work_an_item(sqlite_work, clock, "T1")
    ingest_work_store(sqlite_work, audit)


REFUSED = (
    "UPDATE audit_events SET cost_usd = 0",
    "DELETE FROM audit_events",
    "UPDATE deliveries SET outcome = 'closed'",
    "DELETE FROM deliveries",
    "DELETE FROM ingest_runs",
    "UPDATE ingest_runs SET high_water = 0",
    "UPDATE baselines SET delivered = 0",
)


def test_the_database_refuses_to_change_or_remove_audited_rows(
    sqlite_work: Store, audit: Store, clock: FakeClock
) -> None:
    _filled(sqlite_work, audit, clock)
    record_baseline(audit, "10:10:before")
    for statement in REFUSED:
        with pytest.raises(StoreError, match=r"append-only|refused"), audit.transaction() as tx:
            tx.execute(statement)
    with audit.transaction(write=False) as tx:
        assert tx.one("SELECT COUNT(*) FROM audit_events") == (7,)


def test_raw_rows_go_only_once_rolled_up_and_past_retention(
    sqlite_work: Store, audit: Store, clock: FakeClock
) -> None:
    _filled(sqlite_work, audit, clock)
    clock.advance(2 * DAY)
    maintain(audit, now=clock(), retention_days=90)  # rolled up, but not yet old enough
    refused = pytest.raises(StoreError, match="rolled up and past retention")
    with refused, audit.transaction() as tx:
        tx.execute("DELETE FROM audit_events")
    clock.advance(100 * DAY)
    assert maintain(audit, now=clock(), retention_days=90).thinned == 7
    with pytest.raises(StoreError, match="append-only"), audit.transaction() as tx:
        tx.execute("DELETE FROM rollup_cost")


def test_a_dropped_guard_is_refused_on_open(db_dir: Path, clock: FakeClock) -> None:
    path = db_dir / "audit.sqlite"
    open_audit(str(path), clock=clock).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER audit_events_no_update")
    with pytest.raises(AuditUnprotected, match="audit_events_no_update is missing") as refused:
        open_audit(str(path), clock=clock)
    assert refused.value.exit_code == 2  # a script tells a tampered record from a failure
