"""Ingest: each event once, from a high-water mark; safe twice at once and after a failure."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from agent_harness.audit.database import open_audit
from agent_harness.audit.history import events
from agent_harness.audit.ingest import high_water, ingest_work_store, log_id
from agent_harness.audit.observe import watch
from agent_harness.store.database import SqliteStore, Store, open_store
from agent_harness.store.errors import StoreError
from agent_harness.testing.clock import FakeClock
from tests.audit.conftest import PROJECT, AuditEngine, work_an_item

pytestmark = pytest.mark.integration


def _rows(audit: Store) -> list[str]:
    with audit.transaction(write=False) as tx:
        return [str(r[0]) for r in tx.all("SELECT source_id FROM audit_events ORDER BY id")]


def test_ingesting_again_adds_nothing_and_reads_on_from_the_mark(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock
) -> None:
    audit = sqlite_audit
    work_an_item(sqlite_work, clock, "T1")
    first = ingest_work_store(sqlite_work, audit)
    assert (first.added, first.deliveries) == (7, 1)
    assert ingest_work_store(sqlite_work, audit).added == 0
    work_an_item(sqlite_work, clock, "T2")
    later = ingest_work_store(sqlite_work, audit)
    # Only the new events were read: none came back as a duplicate.
    assert (later.added, later.duplicates) == (7, 0)
    assert high_water(audit, f"work:{log_id(sqlite_work)}") == 14
    assert len(set(_rows(audit))) == 14


def test_two_ingests_at_once_record_each_event_once(
    sqlite_work: Store, audit_engine: AuditEngine, clock: FakeClock
) -> None:
    for number in range(20):
        work_an_item(sqlite_work, clock, f"T{number}")
    results: list[int] = []
    failures: list[BaseException] = []

    def one() -> None:
        audit = audit_engine.open(clock)
        try:
            results.append(ingest_work_store(sqlite_work, audit, batch=7).added)
        except BaseException as exc:  # reported below, so a failed thread fails the test
            failures.append(exc)
        finally:
            audit.close()
            sqlite_work.forget_thread()

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert sum(results) == 140
    audit = audit_engine.open(clock)
    try:
        assert len(_rows(audit)) == 140
        with audit.transaction(write=False) as tx:
            assert tx.one("SELECT COUNT(*) FROM deliveries") == (20,)
    finally:
        audit.close()


def test_a_run_that_fails_leaves_nothing_and_the_next_catches_up(
    sqlite_work: Store, db_dir: Path, clock: FakeClock
) -> None:
    path = db_dir / "locked-audit.sqlite"
    open_audit(str(path), clock=clock).close()
    impatient = SqliteStore(path, clock=clock, busy_timeout_s=0.05)
    work_an_item(sqlite_work, clock, "T1")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the database: this run fails
    try:
        with pytest.raises(StoreError, match="locked"):
            ingest_work_store(sqlite_work, impatient)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert _rows(impatient) == []
    assert high_water(impatient, f"work:{log_id(sqlite_work)}") == 0
    assert ingest_work_store(sqlite_work, impatient).added == 7
    impatient.close()


def test_recreating_the_work_database_is_a_new_log_not_a_repeat(
    db_dir: Path, sqlite_audit: Store, clock: FakeClock
) -> None:
    audit = sqlite_audit
    path = db_dir / "harness.sqlite"
    for _ in range(2):
        work = open_store(str(path), clock=clock)
        work_an_item(work, clock, "T1")
        clock.advance(1)
        assert ingest_work_store(work, audit).added == 7
        work.close()
        for leftover in path.parent.glob("harness.sqlite*"):
            leftover.unlink()
    assert len(events(audit, project=PROJECT, limit=100).events) == 14


def test_a_watch_records_every_round_and_maintains_once_a_utc_day(
    sqlite_work: Store, db_dir: Path, clock: FakeClock
) -> None:
    target = str(db_dir / "watched.sqlite")
    rounds: list[object] = []

    def nap(seconds: float) -> None:  # half a day passes, and another item is worked
        clock.advance(seconds)
        work_an_item(sqlite_work, clock, f"T{len(rounds)}")

    work_an_item(sqlite_work, clock, "T-first")
    done = watch(
        sqlite_work,
        target,
        every_s=12 * 3600,
        sleep=nap,
        stop=lambda: len(rounds) >= 5,
        on_round=rounds.append,
    )
    assert done.problems == []
    assert done.recorded == 5 * 7  # T-first and four more, each once
    assert len(done.maintained) == len(set(done.maintained)) == 3  # 2.5 days: three UTC days
    audit = open_audit(target, clock=clock)
    try:
        with audit.transaction(write=False) as tx:
            assert tx.one("SELECT COUNT(*) FROM maintenance_runs") == (3,)
    finally:
        audit.close()


def test_a_model_call_is_priced_only_when_its_whole_payload_fits_and_unknown_stays_null(
    sqlite_work: Store, sqlite_audit: Store, clock: FakeClock
) -> None:
    """Ingest reads a model call straight to its columns; a payload with any field that does
    not fit (even one the audit never reads) is kept but is not usage, and a model of unknown
    price is NULL with its reason every time, not only the first."""
    good = {"role": "reviewer", "vendor": "openai", "model": "gpt-4o", "tokens_in": 1000}
    with sqlite_work.transaction() as tx:
        tx.record_outside_event(PROJECT, None, "model.call", {**good, "tokens_out": 10})
        tx.record_outside_event(PROJECT, None, "model.call", {**good, "latency_s": "slow"})
        for tokens_out in (10, 20):
            unknown = {**good, "model": "gpt-nowhere", "tokens_out": tokens_out}
            tx.record_outside_event(PROJECT, None, "model.call", unknown)
    ingest_work_store(sqlite_work, sqlite_audit)
    with sqlite_audit.transaction(write=False) as tx:
        rows = tx.all("SELECT usage_source, cost_usd, cost_reason FROM audit_events ORDER BY id")
    priced, unfit, *unknown = rows
    assert priced[0] == "api" and priced[1] is not None and priced[1] > 0
    assert unfit == (None, None, None)
    assert [(row[1], "no price known" in str(row[2])) for row in unknown] == [(None, True)] * 2


def test_a_model_call_with_counts_no_call_reports_is_kept_unpriced_and_the_rest_recorded(
    sqlite_work: Store, sqlite_audit: Store
) -> None:
    # A negative count priced a call below zero; 10**30 overflowed the database and 1000.5
    # dropped the call from cost: every later ingest failed, or the call went unseen.
    good = {"role": "reviewer", "vendor": "openai", "model": "gpt-4.1"}
    with sqlite_work.transaction() as tx:
        tx.record_outside_event(
            PROJECT, None, "model.call", {**good, "tokens_in": 1000, "tokens_out": 0}
        )
        for bad in (-1_000_000, 10**30, 1000.5):
            tx.record_outside_event(PROJECT, None, "model.call", {**good, "tokens_out": bad})
    ingest_work_store(sqlite_work, sqlite_audit)
    with sqlite_work.transaction() as tx:
        tx.record_outside_event(
            PROJECT, None, "model.call", {**good, "tokens_in": 2000, "tokens_out": 0}
        )
    ingest_work_store(sqlite_work, sqlite_audit)
    with sqlite_audit.transaction(write=False) as tx:
        rows = tx.all(
            "SELECT tokens_in, tokens_out, cost_usd, cost_reason FROM audit_events ORDER BY id"
        )
    assert len(rows) == 5
    first, *unfit, last = rows
    assert first[2] is not None and first[2] > 0 and last[2] is not None and last[2] > 0
    for row in unfit:
        assert row[:3] == (None, None, None)
        assert "not whole numbers from 0 to 1,000,000,000,000" in row[3]


def test_an_agent_run_is_counted_once_and_one_that_reported_nothing_is_of_unknown_price(
    sqlite_work: Store, sqlite_audit: Store
) -> None:
    from agent_harness.audit.cost import cost
    from agent_harness.audit.records import NOTHING_REPORTED
    from agent_harness.store.events import AgentFinished, ModelCall

    call = ModelCall(
        role="implementer", vendor="openai", model="gpt-4.1", tokens_in=1000, tokens_out=0
    )
    for payload in (
        # The executor: its two calls are priced rows; its end (their sum) adds no third.
        call,
        call,
        AgentFinished(ok=True, state="done", tokens_in=2000, tokens_out=0, usage_from="calls"),
        # A CLI agent that said nothing of its usage still ran, and cost something unknown.
        AgentFinished(ok=True, state="done", usage_from="agent"),
        AgentFinished(ok=False, state="missing_binary", usage_from="agent"),  # never started
        AgentFinished(ok=True, state="done"),  # before `usage_from`: whose, is not known
    ):
        sqlite_work.append_event(PROJECT, "T1", payload)
    ingest_work_store(sqlite_work, sqlite_audit)
    report = cost(sqlite_audit)
    implementer = {line.usage_source: line for line in report.lines}
    assert implementer["api"].calls == 2 and implementer["api"].cost_usd is not None
    assert (implementer["cli"].calls, implementer["cli"].cost_usd) == (1, None)
    # Its tokens are as unknown as its price: not 0.
    assert (implementer["api"].tokens_in, implementer["api"].tokens_out) == (2000, 0)
    assert (implementer["cli"].tokens_in, implementer["cli"].tokens_out) == (None, None)
    assert [(u.calls, u.reason) for u in report.unknown] == [(1, NOTHING_REPORTED)]
    assert report.summary.endswith("+ 1 call of unknown price")


def test_attempts_per_delivery_count_failures_not_claims_taken_back(
    sqlite_work: Store, sqlite_audit: Store
) -> None:
    from agent_harness.audit.delivery import delivery
    from agent_harness.store.events import AttemptFailed, Claimed, LeaseExpired, Outcome

    def claim(attempt: int) -> Claimed:
        return Claimed(to="claimed", worker="w1", attempt=attempt, token=1, expires_at=0.0)

    for payload in (
        claim(1),
        LeaseExpired(worker="w1", attempt=1, attempt_refunded=True),  # killed: no attempt spent
        claim(1),
        AttemptFailed(worker="w1", attempt=1, reason="a check failed"),
        claim(2),
        Outcome(to="merged"),
    ):
        sqlite_work.append_event(PROJECT, "T1", payload)
    ingest_work_store(sqlite_work, sqlite_audit)
    # Two attempts (one failed, one delivered), as `work` counts them; three claims.
    assert delivery(sqlite_audit).attempts_per_delivered == 2


def test_a_merge_standing_again_after_its_revert_was_reverted_is_not_a_second_delivery(
    sqlite_work: Store, sqlite_audit: Store
) -> None:
    # It counted twice: 6 merged where the forge had 5 merged pull requests.
    from agent_harness.audit.delivery import delivery
    from agent_harness.store.events import Claimed, Outcome

    claim = Claimed(to="claimed", worker="w1", attempt=1, token=1, expires_at=0.0)
    for payload in (
        claim,
        Outcome(to="merged", evidence={"pr": 9, "sha": "a1"}),
        Outcome(from_="merged", to="reverted", evidence={"pr": 9, "revert_sha": "b2"}),
        Outcome(
            from_="reverted", to="merged", evidence={"pr": 9, "reapplied_after": ["b2 (a revert)"]}
        ),
    ):
        sqlite_work.append_event(PROJECT, "T1", payload)
    ingest_work_store(sqlite_work, sqlite_audit)
    report = delivery(sqlite_audit)
    assert (report.merged, report.reverted) == (1, 1)


def test_a_call_lost_with_its_run_is_a_call_of_unknown_price_with_that_reason(
    sqlite_work: Store, sqlite_audit: Store
) -> None:
    from agent_harness.audit.cost import cost
    from agent_harness.audit.records import LOST_REASON
    from agent_harness.store.model_events import ModelLost

    sqlite_work.append_event(PROJECT, "T1", ModelLost(role="reviewer", worker="w1"))
    ingest_work_store(sqlite_work, sqlite_audit)
    report = cost(sqlite_audit)
    [line] = report.lines
    assert (line.role, line.usage_source, line.calls, line.cost_usd) == (
        "reviewer",
        "lost",
        1,
        None,
    )
    assert line.label == "lost with its run"
    assert [(u.calls, u.reason) for u in report.unknown] == [(1, LOST_REASON)]
    assert report.summary == "$0.00 priced + 1 call of unknown price"
