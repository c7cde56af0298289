"""The control state in the store: what a person asked of each project, and what its pool says."""

from __future__ import annotations

import pytest

from agent_harness.errors import UsageError
from agent_harness.queue.control import get_control, report_pools, set_control
from agent_harness.queue.fleet import PoolState, PoolStatus
from agent_harness.queue.items import enqueue
from agent_harness.store.database import Store
from agent_harness.store.events import ControlChanged
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
    set_control(store, "draining")
    assert {c.asked for c in get_control(store)} == {PoolState.DRAINING}


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
    with pytest.raises(UsageError, match="not stopped"):
        set_control(store, "stopped")
