"""The fleet: pools per project, fair shared slots, pause / drain / resume, crash isolation."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from agent_harness.queue.fleet import Backoff, Fleet, PoolState
from agent_harness.queue.items import enqueue, get_item, list_items
from agent_harness.queue.leases import Lease, complete, reclaim_own
from agent_harness.store.database import Store
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import Engine, item

BIG, SMALL = "acme/big:plan", "acme/small:plan"


@pytest.fixture
def fleet_store(sqlite_engine: Engine) -> Iterator[Store]:
    store = sqlite_engine.open()
    try:
        yield store
    finally:
        store.close()


def _merge(store: Store) -> Callable[[Lease], None]:
    return lambda lease: complete(store, lease, "merged")


def _make(store: Store, **kwargs: object) -> tuple[Fleet, list[float]]:
    naps: list[float] = []
    fleet = Fleet(store, sleep=naps.append, idle_poll_s=0.02, **kwargs)  # type: ignore[arg-type]
    return fleet, naps


@pytest.mark.integration
def test_a_project_starts_stopped(fleet_store: Store) -> None:
    enqueue(fleet_store, BIG, [item("T0")])
    fleet, _ = _make(fleet_store)
    fleet.add_project(BIG, _merge(fleet_store), concurrency=3)
    [pool] = fleet.status()
    assert (pool.state, pool.workers) == (PoolState.STOPPED, 0)
    assert get_item(fleet_store, BIG, "T0").state == "pending"
    fleet.start(BIG)
    assert fleet.wait_idle(BIG, timeout=20)
    fleet.drain()
    assert fleet.join(timeout=20)
    assert get_item(fleet_store, BIG, "T0").state == "merged"
    assert fleet.status()[0].state == PoolState.STOPPED


@pytest.mark.integration
def test_a_shared_limit_is_round_robin_so_a_small_project_is_not_starved(
    fleet_store: Store,
) -> None:
    enqueue(fleet_store, BIG, [item(f"B{n}") for n in range(40)])
    enqueue(fleet_store, SMALL, [item(f"S{n}") for n in range(4)])
    fleet, _ = _make(fleet_store, global_limit=2)
    fleet.add_project(BIG, _merge(fleet_store), concurrency=2)
    fleet.add_project(SMALL, _merge(fleet_store), concurrency=2)
    fleet.start()
    assert fleet.wait_idle(timeout=60)
    fleet.drain()
    assert fleet.join(timeout=20)
    done = [e for e in fleet_store.all_events() if e.kind == "completed"]
    assert len(done) == 44
    big_done = [e.id for e in done if e.project == BIG]
    small_last = max(e.id for e in done if e.project == SMALL)
    assert small_last < big_done[19], "the small project waited for half the big one"


@pytest.mark.integration
def test_pause_claims_nothing_new_and_resume_carries_on(fleet_store: Store) -> None:
    enqueue(fleet_store, BIG, [item(f"T{n}") for n in range(3)])
    entered, leave = threading.Event(), threading.Event()

    def slow_then_merge(lease: Lease) -> None:
        if lease.item_id == "T0":
            entered.set()
            assert leave.wait(20)
        complete(fleet_store, lease, "merged")

    fleet, _ = _make(fleet_store)
    fleet.add_project(BIG, slow_then_merge, concurrency=1)
    fleet.start(BIG)
    assert entered.wait(20)
    fleet.pause(BIG)
    leave.set()  # the item in flight is allowed to finish
    assert fleet.wait_idle(BIG, timeout=20)
    states = {r.id: r.state for r in list_items(fleet_store, BIG)}
    assert states == {"T0": "merged", "T1": "pending", "T2": "pending"}
    assert fleet.status()[0].state == PoolState.PAUSED
    fleet.drain(BIG)
    assert fleet.join(BIG, timeout=20)
    states = {r.id: r.state for r in list_items(fleet_store, BIG)}
    assert states == {"T0": "merged", "T1": "pending", "T2": "pending"}
    fleet.start(BIG)
    assert fleet.wait_idle(BIG, timeout=20)
    assert {r.state for r in list_items(fleet_store, BIG)} == {"merged"}
    fleet.drain()
    assert fleet.join(timeout=20)


@pytest.mark.integration
def test_drain_finishes_work_in_flight_then_stops(fleet_store: Store) -> None:
    enqueue(fleet_store, BIG, [item(f"T{n}") for n in range(5)])
    started = threading.Semaphore(0)
    gate = threading.Event()

    def gated(lease: Lease) -> None:
        started.release()
        assert gate.wait(20)
        complete(fleet_store, lease, "merged")

    fleet, _ = _make(fleet_store)
    fleet.add_project(BIG, gated, concurrency=2)
    fleet.start(BIG)
    assert started.acquire(timeout=20) and started.acquire(timeout=20)
    fleet.drain(BIG)
    assert fleet.status()[0].state == PoolState.DRAINING
    gate.set()
    assert fleet.join(BIG, timeout=20)
    counts: dict[str, int] = {}
    for record in list_items(fleet_store, BIG):
        counts[record.state] = counts.get(record.state, 0) + 1
    assert counts == {"merged": 2, "pending": 3}  # both in flight finished, nothing new began
    assert fleet.status()[0].state == PoolState.STOPPED


@pytest.mark.integration
def test_a_crashing_handler_fails_its_item_and_backs_off_alone(fleet_store: Store) -> None:
    enqueue(fleet_store, BIG, [item("BAD"), *(item(f"T{n}") for n in range(6))])
    enqueue(fleet_store, SMALL, [item(f"S{n}") for n in range(3)])

    def flaky(lease: Lease) -> None:
        if lease.item_id == "BAD":
            raise RuntimeError("agent exploded")
        complete(fleet_store, lease, "merged")

    fleet, naps = _make(fleet_store, backoff=Backoff(base_s=2.0, cap_s=5.0))
    fleet.add_project(BIG, flaky, concurrency=2)
    fleet.add_project(SMALL, _merge(fleet_store), concurrency=1)
    fleet.start()
    assert fleet.wait_idle(timeout=30)
    fleet.drain()
    assert fleet.join(timeout=20)
    bad = get_item(fleet_store, BIG, "BAD")
    assert bad.state == "failed" and bad.attempts == 3
    assert bad.reason is not None and "RuntimeError: agent exploded" in bad.reason
    assert {r.state for r in list_items(fleet_store, BIG) if r.id != "BAD"} == {"merged"}
    assert {r.state for r in list_items(fleet_store, SMALL)} == {"merged"}
    assert len(naps) == 3 and naps[0] == 2.0 and set(naps) <= {2.0, 4.0, 5.0}
    big = next(p for p in fleet.status() if p.project == BIG)
    assert big.crashes == 3


@pytest.mark.integration
def test_a_handler_that_forgets_to_finish_does_not_hold_the_item(fleet_store: Store) -> None:
    enqueue(fleet_store, BIG, [item("T0")], max_attempts=2)
    fleet, _ = _make(fleet_store)
    fleet.add_project(BIG, lambda lease: None, concurrency=1)
    fleet.start()
    assert fleet.wait_idle(timeout=20)
    fleet.drain()
    assert fleet.join(timeout=20)
    record = get_item(fleet_store, BIG, "T0")
    assert record.state == "failed" and record.worker is None
    assert record.reason is not None and "without completing" in record.reason


@pytest.mark.unit
def test_backoff_doubles_up_to_its_cap() -> None:
    assert [Backoff(base_s=2.0, cap_s=5.0).delay(n) for n in (1, 2, 3, 4)] == [2, 4, 5, 5]


@pytest.mark.integration
def test_the_fleet_heartbeats_a_lease_while_the_handler_works(sqlite_engine: Engine) -> None:
    clock = FakeClock()
    store = sqlite_engine.open(clock=clock)
    enqueue(store, BIG, [item("T0")])
    outcome: list[str] = []

    def long_job(lease: Lease) -> None:
        for _ in range(5):
            clock.advance(lease.lease_s * 0.8)  # past the original expiry by the end
            target = clock() + lease.lease_s * 0.5
            pause = threading.Event()
            for _ in range(400):  # the heartbeat thread runs on real time: give it a moment
                record = get_item(store, BIG, lease.item_id)
                if record.lease_expires is not None and record.lease_expires >= target:
                    break
                pause.wait(0.005)
        complete(store, lease, "merged")
        outcome.append("completed")

    fleet = Fleet(store, sleep=lambda s: None, idle_poll_s=0.02, heartbeat_every=0.2)
    fleet.add_project(BIG, long_job, lease_s=0.1)
    try:
        fleet.start()
        assert fleet.wait_idle(timeout=20)
        fleet.drain()
        assert fleet.join(timeout=20)
        assert outcome == ["completed"]
        assert get_item(store, BIG, "T0").state == "merged"
    finally:
        store.close()


@pytest.mark.integration
def test_a_lease_taken_over_while_its_handler_works_is_told_at_once(fleet_store: Store) -> None:
    enqueue(fleet_store, BIG, [item("T0")])
    working, told = threading.Event(), threading.Event()
    lost: list[Lease] = []
    ended: list[str] = []

    def stuck_agent(lease: Lease) -> None:
        working.set()
        # As an agent would, it goes on until something stops it: here, being told.
        ended.append("stopped" if told.wait(30) else "ran to its end")

    def on_lost(lease: Lease) -> None:
        lost.append(lease)
        told.set()

    fleet = Fleet(fleet_store, sleep=lambda s: None, idle_poll_s=0.02, heartbeat_every=0.1)
    fleet.add_project(BIG, stuck_agent, lease_s=0.5, worker_prefix="h1", on_lost=on_lost)
    fleet.start()
    assert working.wait(20)
    # Another run under the same host id takes the live lease, as it would a dead run's.
    assert reclaim_own(fleet_store, BIG, "h1/", prefix=True) == ("T0",)
    fleet.drain()
    assert fleet.join(timeout=20)
    assert ended == ["stopped"]
    assert [lease.item_id for lease in lost] == ["T0"]
