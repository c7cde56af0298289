"""The control state in the store: what a person asked of each project, and what its pool says."""

from __future__ import annotations

import pytest

from agent_harness.errors import UsageError
from agent_harness.queue.control import LIVE_REPORT_S, get_control, report_pools, set_control
from agent_harness.queue.fleet import PoolState, PoolStatus
from agent_harness.queue.items import enqueue
from agent_harness.store.database import Store
from agent_harness.store.events import ControlChanged
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import item

pytestmark = pytest.mark.integration
A, B = "me/app:A", "me/app:B"


def test_nothing_asked_reads_as_running_with_no_report(store: Store) -> None:
    enqueue(store, A, [item("A1")])
    [shown] = get_control(store)
    assert (shown.project, shown.asked, shown.asked_at, shown.pool) == (A, "running", None, None)


def test_a_pause_for_one_project_leaves_the_other_and_is_one_event(store: Store) -> None:
    enqueue(store, A, [item("A1")])
    enqueue(store, B, [item("B1")])
    set_control(store, "paused", B, by="agent-harness control")
    set_control(store, "paused", B, by="agent-harness control")  # asked again: no new event
    assert [(c.project, c.asked) for c in get_control(store)] == [(A, "running"), (B, "paused")]
    changes = [e.payload for e in store.all_events() if isinstance(e.payload, ControlChanged)]
    assert changes == [
        ControlChanged(state="paused", previous="running", by="agent-harness control")
    ]
    report_pools(store, [running(A), running(B)])
    set_control(store, "draining")
    assert {c.asked for c in get_control(store)} == {PoolState.DRAINING}


def running(project: str, state: PoolState = PoolState.RUNNING) -> PoolStatus:
    return PoolStatus(project, state, workers=1, in_flight=0, handled=0, crashes=0)


def test_every_project_means_those_a_run_works_now(store: Store, clock: FakeClock) -> None:
    """A pause of every project leaves a project whose run ended (its next run would wait for
    a person); a resume of every project also lifts such a pause asked by name."""
    enqueue(store, A, [item("A1")])
    enqueue(store, B, [item("B1")])
    with pytest.raises(UsageError, match="no run is working any project now"):
        set_control(store, "paused")  # no run has reported
    report_pools(store, [running(B)])
    clock.advance(LIVE_REPORT_S + 1)  # B's run went quiet: it ended or died
    report_pools(store, [running(A)])
    assert [c.project for c in set_control(store, "paused")] == [A]
    set_control(store, "paused", B)  # by name: asked ahead of B's next run
    report_pools(store, [running(A, PoolState.STOPPED)])  # A's run ended
    assert [(c.project, c.asked) for c in set_control(store, "running")] == [
        (A, "running"),
        (B, "running"),
    ]


def test_the_pools_report_counts_up(store: Store) -> None:
    enqueue(store, A, [item("A1")])
    status = PoolStatus(A, PoolState.PAUSED, workers=2, in_flight=1, handled=3, crashes=0)
    report_pools(store, [status])
    report_pools(store, [status])
    [shown] = get_control(store, A)
    assert shown.pool is not None
    assert (shown.pool.state, shown.pool.in_flight, shown.pool.handled, shown.pool.reports) == (
        "paused",
        1,
        3,
        2,
    )


def test_unknown_project_or_state_is_a_usage_error(store: Store) -> None:
    with pytest.raises(UsageError, match="no project 'x:y'"):
        set_control(store, "paused", "x:y")
    with pytest.raises(UsageError, match="start a run first"):
        set_control(store, "paused")
    enqueue(store, A, [item("A1")])
    report_pools(store, [running(A)])
    with pytest.raises(UsageError, match="not stopped"):
        set_control(store, "stopped")


def test_hosts_sharing_a_database_each_report_and_the_pool_is_their_sum(
    store: Store, clock: FakeClock
) -> None:
    enqueue(store, A, [item("A1")])

    def status(state: PoolState, workers: int, in_flight: int, handled: int) -> PoolStatus:
        return PoolStatus(A, state, workers, in_flight, handled, crashes=0)

    report_pools(store, [status(PoolState.RUNNING, 2, 2, 1)], host="build-1")
    report_pools(store, [status(PoolState.RUNNING, 2, 1, 3)], host="build-2")
    report_pools(store, [status(PoolState.PAUSED, 2, 0, 0)], host="build-3")
    [shown] = get_control(store, A)
    assert [h.host for h in shown.hosts] == ["build-1", "build-2", "build-3"]
    assert shown.pool is not None
    summed = (shown.pool.state, shown.pool.workers, shown.pool.in_flight, shown.pool.handled)
    assert summed == (PoolState.RUNNING, 6, 3, 4)  # not the last host to report alone
    clock.advance(LIVE_REPORT_S + 1)  # build-2 and build-3 went quiet; build-1 ends its run
    report_pools(store, [status(PoolState.STOPPED, 0, 0, 5)], host="build-1")
    [shown] = get_control(store, A)
    assert shown.pool is not None
    assert (shown.pool.state, shown.pool.in_flight, shown.pool.handled) == ("stopped", 0, 5)


def test_a_report_of_an_older_release_is_left_out_once_a_host_reports_its_own(
    store: Store,
) -> None:
    enqueue(store, A, [item("A1")])
    report_pools(store, [PoolStatus(A, PoolState.STOPPED, 0, 0, 9, crashes=0)])  # no host
    [old] = get_control(store, A)
    assert [h.host for h in old.hosts] == [""] and old.pool is not None
    report_pools(store, [PoolStatus(A, PoolState.RUNNING, 2, 1, 0, crashes=0)], host="b-1")
    [shown] = get_control(store, A)
    assert [h.host for h in shown.hosts] == ["b-1"]
    assert shown.pool is not None and (shown.pool.state, shown.pool.handled) == ("running", 0)


def test_a_run_starting_is_told_of_a_pause_and_drops_a_drain_no_live_run_carries_out(
    store: Store, clock: FakeClock
) -> None:
    from agent_harness.queue.control import left_asked

    enqueue(store, A, [item("A1")])
    assert left_asked(store, A, "host-a") is None  # nothing asked
    set_control(store, "paused", A, by="agent-harness control")
    said = left_asked(store, A, "host-a")
    assert said is not None and "control resume --project me/app:A" in said
    assert get_control(store, A)[0].asked == "paused"  # a person's pause stands

    # A drain asked of host-b's run, which goes on draining: this run waits on it as asked.
    set_control(store, "draining", A)
    report_pools(store, [running(A, PoolState.DRAINING)], host="host-b")
    assert left_asked(store, A, "host-a") is None
    # The drain was asked of this host's run, which was killed before it ended draining (its
    # last report is a second old): the new run is not ended by it at once, and says so.
    clock.advance(LIVE_REPORT_S + 1)
    report_pools(store, [running(A, PoolState.DRAINING)], host="host-a")
    assert left_asked(store, A, "host-a") == (
        "me/app:A: the drain asked of a run that has since ended was dropped"
    )
    assert get_control(store, A)[0].asked == "running"
    last = [e.payload for e in store.all_events() if isinstance(e.payload, ControlChanged)][-1]
    assert last == ControlChanged(state="running", previous="draining", by="run")


def test_a_drain_stands_until_the_last_live_host_has_carried_it_out(
    store: Store, clock: FakeClock
) -> None:
    # The first host to finish draining lifted it, and the other hosts went back to claiming.
    from agent_harness.queue.control import end_drain

    enqueue(store, A, [item("A1")])
    set_control(store, "draining", A)
    report_pools(store, [running(A, PoolState.DRAINING)], host="host-b")
    report_pools(store, [running(A, PoolState.STOPPED)], host="host-a")
    end_drain(store, A, "host-a")
    assert get_control(store, A)[0].asked == "draining"  # host-b is still at it
    report_pools(store, [running(A, PoolState.STOPPED)], host="host-b")
    end_drain(store, A, "host-b")
    assert get_control(store, A)[0].asked == "running"  # carried out: the next run runs
    # A host that stopped reporting (killed) does not hold a drain up for ever.
    set_control(store, "draining", A)
    report_pools(store, [running(A, PoolState.DRAINING)], host="host-c")
    clock.advance(LIVE_REPORT_S + 1)
    end_drain(store, A, "host-a")
    assert get_control(store, A)[0].asked == "running"
