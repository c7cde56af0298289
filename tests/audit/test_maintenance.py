"""Maintenance rolls complete days up and thins old raw rows, and no audited answer changes."""

from __future__ import annotations

from typing import Any

import pytest

from agent_harness.audit.baselines import baselines, record_baseline
from agent_harness.audit.cost import cost
from agent_harness.audit.delivery import delivery
from agent_harness.audit.health import health
from agent_harness.audit.history import events
from agent_harness.audit.ingest import ingest_work_store, write_rows
from agent_harness.audit.maintenance import maintain, rollups
from agent_harness.audit.records import row_of_event
from agent_harness.store.database import Store
from agent_harness.testing.clock import FakeClock
from tests.audit.conftest import DAY, HOUR, PROJECT, work_an_item

pytestmark = pytest.mark.integration


def answers(audit: Store, work: Store) -> dict[str, Any]:
    """Every audited answer, whole, plus the same for one project and one stretch of days."""
    found = health(audit, work)
    return {
        "cost": cost(audit),
        "cost of days": cost(audit, project=PROJECT, since="2026-05-29", until="2026-06-02"),
        "delivery": delivery(audit),
        "delivery of days": delivery(audit, since="2026-05-30"),
        "baselines": baselines(audit),
        "health": found.model_copy(update={"last_event_id": 0, "last_maintenance_at": 0}),
    }


def test_every_answer_is_the_same_before_and_after_each_maintenance_run(
    sqlite_work: Store, audit: Store, clock: FakeClock
) -> None:
    record_baseline(audit, "20:10:before-harness")
    for number in range(6):
        work_an_item(sqlite_work, clock, f"T{number}", approved=number % 3 != 0)
        clock.advance(DAY - 3 * HOUR)
        ingest_work_store(sqlite_work, audit)
    before = answers(audit, sqlite_work)
    assert before["cost"].unknown_calls == 12 and before["delivery"].merged == 6

    first = maintain(audit, now=clock(), retention_days=90)  # rolls up, thins nothing yet
    assert first.rolled > 0 and first.thinned == 0
    assert answers(audit, sqlite_work) == before

    # A late event of an old day arrives after its day was rolled up: the next run adds it.
    clock.advance(2 * DAY)
    work_an_item(sqlite_work, clock, "T-late")
    ingest_work_store(sqlite_work, audit)
    before = answers(audit, sqlite_work)
    maintain(audit, now=clock(), retention_days=90)
    assert answers(audit, sqlite_work) == before

    clock.advance(120 * DAY)
    thinning = maintain(audit, now=clock(), retention_days=90)
    assert thinning.thinned == 49  # every raw row: all rolled up, all past retention
    assert events(audit).events == []
    assert answers(audit, sqlite_work) == before
    assert sum(day.events for day in rollups(audit)) == 49


def test_a_repeat_of_a_thinned_day_is_refused_not_counted_twice(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock
) -> None:
    audit = sqlite_audit
    work_an_item(sqlite_work, clock, "T1")
    ingest_work_store(sqlite_work, audit)
    clock.advance(200 * DAY)
    maintain(audit, now=clock(), retention_days=90)
    spent = cost(audit)
    # The same events again under another log name, as if the work database were recreated
    # and fed the same history: with their raw rows gone, repeats cannot be told apart.
    again = [row_of_event(event, "another-log") for event in sqlite_work.all_events()]
    report = write_rows(audit, "work:another-log", again, 7)
    assert report.added == 0
    assert len(report.skipped) == 7
    assert "rolled up and thinned" in report.skipped[0].reason
    assert cost(audit) == spent
