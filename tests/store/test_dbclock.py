"""Hosts whose clocks disagree share one PostgreSQL queue without taking each other's leases."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from agent_harness.queue import items, leases
from agent_harness.store.database import Store, open_store
from agent_harness.store.dbclock import DatabaseClock
from tests.shared.stores import _drop_schema, item, pg_problem, pg_url


class Readings:
    """A host clock, a monotonic clock and a database clock a test moves by hand."""

    def __init__(self) -> None:
        self.host = 1000.0
        self.mono = 0.0
        self.database = 1300.0  # the server is 300 s ahead of this host
        self.database_down = False
        self.asked = 0

    def read_database(self) -> float:
        self.asked += 1
        if self.database_down:
            raise OSError("connection refused")
        return self.database


@pytest.mark.unit
def test_the_clock_reads_the_database_time_and_measures_again_after_a_while() -> None:
    r = Readings()
    clock = DatabaseClock(lambda: r.host, r.read_database, resync_s=30, monotonic=lambda: r.mono)
    assert clock() == 1300.0 and r.asked == 1
    r.host += 10
    r.database += 10
    r.mono += 10
    assert clock() == 1310.0 and r.asked == 1  # within the resync span: no new question
    r.host += 100  # the host's clock is stepped forward 100 s; the server's is not
    r.database += 20
    r.mono += 20
    assert clock() == 1330.0 and r.asked == 2  # measured again, and put right


@pytest.mark.unit
def test_a_failed_measurement_keeps_the_last_offset() -> None:
    r = Readings()
    clock = DatabaseClock(lambda: r.host, r.read_database, resync_s=30, monotonic=lambda: r.mono)
    assert clock() == 1300.0
    r.database_down = True
    r.host += 40
    r.mono += 40
    assert clock() == 1340.0  # the host's time plus the offset measured before
    assert r.asked == 2


@pytest.fixture
def schema() -> Iterator[str]:
    problem = pg_problem(pg_url())
    if problem:
        pytest.skip(problem)
    name = f"ah_clock_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        _drop_schema(pg_url(), name)


def _host(schema: str, skew_s: float, database_clock: bool) -> Store:
    return open_store(
        pg_url(),
        schema=schema,
        clock=lambda: time.time() + skew_s,
        database_clock=database_clock,
    )


@pytest.mark.postgres
@pytest.mark.integration
@pytest.mark.parametrize("database_clock", [True, False], ids=["database clock", "host clocks"])
def test_a_host_ten_minutes_fast_does_not_take_a_live_lease(
    schema: str, database_clock: bool
) -> None:
    project = "o/r:PLAN"
    right = _host(schema, 0.0, database_clock)
    fast = _host(schema, 600.0, database_clock)
    try:
        items.enqueue(right, project, [item("T1")], max_attempts=3)
        held = leases.claim_next(right, project, "host-a/w1", 60.0)
        assert held is not None
        taken = leases.claim_next(fast, project, "host-b/w1", 60.0)
        if database_clock:
            assert taken is None  # A's lease is live by the database's clock
        else:
            # What hosts reading their own clocks do: B thinks A's lease ended 9 minutes ago.
            assert taken is not None and taken.item_id == "T1"
    finally:
        right.close()
        fast.close()
