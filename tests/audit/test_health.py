"""`audit health`: the last event, the lag behind the work log, drops, and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.audit.health import health
from agent_harness.audit.ingest import ingest_work_store
from agent_harness.audit.observe import observe
from agent_harness.store.database import Store
from agent_harness.testing.clock import FakeClock
from tests.audit.conftest import HOUR, work_an_item

pytestmark = pytest.mark.integration


def test_the_lag_is_counted_in_events_and_in_the_events_own_time(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock
) -> None:
    assert health(sqlite_audit, sqlite_work).problems == ["nothing has ever been ingested"]
    work_an_item(sqlite_work, clock, "T1")
    ingest_work_store(sqlite_work, sqlite_audit)
    caught_up = health(sqlite_audit, sqlite_work)
    assert (caught_up.ok, caught_up.work_events_waiting, caught_up.lag_s) == (True, 0, 0.0)
    assert caught_up.last_event_kind == "outcome"
    work_an_item(sqlite_work, clock, "T2")  # three hours of work not yet recorded
    clock.advance(2 * HOUR)  # nobody has ingested since T1 ended, five hours ago
    behind = health(sqlite_audit, sqlite_work, stale_after_s=HOUR)
    assert (behind.work_events_waiting, behind.lag_s) == (7, 3 * HOUR)
    assert behind.problems == ["7 work events wait and the last ingest was 300 minutes ago"]


def test_a_run_that_cannot_reach_the_audit_goes_on_and_the_drop_is_counted(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock, db_dir: Path
) -> None:
    work_an_item(sqlite_work, clock, "T1")
    blocked = db_dir / "a-file"
    blocked.write_text("")
    reason = observe(sqlite_work, str(blocked / "audit.sqlite"))
    assert isinstance(reason, str) and "cannot" in reason
    found = health(sqlite_audit, sqlite_work)
    assert found.drops.count == 1 and found.drops.last_reason == reason
    assert not found.ok
