"""The work queue: enqueue, claims under leases, failures, dependencies and retries."""

from __future__ import annotations

import pytest

from agent_harness.plan.model import Plan
from agent_harness.queue.items import (
    KEPT_BY_STOP,
    IllegalTransition,
    ItemBusy,
    ItemState,
    UnknownItem,
    enqueue,
    flagged_item,
    get_item,
    history,
    note_rounds_stopped,
    record_outcome,
    status,
)
from agent_harness.queue.leases import (
    MAX_RECLAIMS,
    LeaseLost,
    advance,
    claim_next,
    complete,
    defer,
    fail,
    heartbeat,
    keep_for_restart,
    reclaim_own,
    release,
)
from agent_harness.queue.retries import retry
from agent_harness.store.database import Store
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import item

pytestmark = pytest.mark.integration

P = "owner/repo:plan"


def _state(store: Store, item_id: str) -> ItemState:
    return get_item(store, P, item_id).state


def _kinds(store: Store, item_id: str) -> list[str]:
    return [e.kind for e in store.all_events(project=P, item=item_id)]


def test_reenqueueing_an_unchanged_plan_changes_nothing(store: Store) -> None:
    plan = Plan(source="PLAN.md", items=(item("T0"), item("T1", "T0"), item("T2", done=True)))
    first = enqueue(store, P, plan)
    assert first.added == ("T0", "T1", "T2")
    events = len(store.all_events())
    second = enqueue(store, P, plan)
    assert (second.added, second.updated, second.unchanged) == ((), (), ("T0", "T1", "T2"))
    assert len(store.all_events()) == events
    assert _state(store, "T2") == ItemState.DONE


def test_an_edit_updates_idle_items_and_is_flagged_on_items_in_flight(store: Store) -> None:
    enqueue(store, P, [item("T0"), item("T1")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None and lease.item_id == "T0"
    result = enqueue(store, P, [item("T0", title="new T0"), item("T1", title="new T1")])
    assert result.updated == ("T1",) and result.flagged == ("T0",)
    assert get_item(store, P, "T1").title == "new T1"
    in_flight = get_item(store, P, "T0")
    assert in_flight.title == "do T0" and in_flight.flagged and in_flight.state == "claimed"
    edit = flagged_item(store, P, "T0")
    assert edit is not None and edit.title == "new T0"
    complete(store, lease, "pr_open")  # the holder is not disturbed by the edit


def test_dependencies_gate_claims_until_merged(store: Store) -> None:
    enqueue(store, P, [item("T0"), item("T1", "T0"), item("T2", "T1")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None and lease.item_id == "T0"
    assert claim_next(store, P, "w2", 60) is None
    complete(store, lease, "pr_open")
    assert claim_next(store, P, "w2", 60) is None  # an open PR is not done by default
    relaxed = claim_next(store, P, "w2", 60, ready_when={"merged", "done", "pr_open"})
    assert relaxed is not None and relaxed.item_id == "T1"
    release(store, relaxed)
    record_outcome(store, P, "T0", "merged", {"pr": 7})
    nxt = claim_next(store, P, "w2", 60)
    assert nxt is not None and nxt.item_id == "T1"


def test_a_note_that_rounds_stopped_stays_while_the_pull_is_open_and_goes_with_its_merge(
    store: Store,
) -> None:
    enqueue(store, P, [item("T0"), item("T1")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None
    note_rounds_stopped(store, P, lease.item_id, "a person asked")  # not pr_open yet: no note
    assert get_item(store, P, lease.item_id).reason is None
    complete(store, lease, "pr_open")
    note_rounds_stopped(store, P, lease.item_id, "a person asked")
    assert get_item(store, P, lease.item_id).reason == (
        "its pull request's rounds stopped: a person asked"
    )
    record_outcome(store, P, lease.item_id, "merged", {"pr": 7})
    assert get_item(store, P, lease.item_id).reason is None


def test_items_done_in_the_plan_satisfy_dependents(store: Store) -> None:
    enqueue(store, P, [item("T0", done=True), item("T1", "T0")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None and lease.item_id == "T1"


def test_an_expired_lease_is_reclaimed_and_the_zombie_is_fenced_out(
    store: Store, clock: FakeClock
) -> None:
    enqueue(store, P, [item("T0")])
    zombie = claim_next(store, P, "w1", 10)
    assert zombie is not None
    clock.advance(11)
    heir = claim_next(store, P, "w2", 10)
    # A dead worker is no failure of the item: the attempt is given back and run again.
    assert heir is not None and heir.item_id == "T0" and heir.attempt == 1
    assert heir.token > zombie.token
    for late in (
        lambda: complete(store, zombie, "merged"),
        lambda: heartbeat(store, zombie),
        lambda: fail(store, zombie, "late", permanent=True),
        lambda: advance(store, zombie, "checks"),
    ):
        with pytest.raises(LeaseLost) as caught:
            late()
        assert caught.value.lease == zombie and "taken over by w2" in caught.value.why
    complete(store, heir, "pr_open")
    assert _state(store, "T0") == ItemState.PR_OPEN
    assert "lease_expired" in _kinds(store, "T0")


def test_an_expired_lease_refuses_calls_even_before_anyone_reclaims(
    store: Store, clock: FakeClock
) -> None:
    enqueue(store, P, [item("T0")])
    lease = claim_next(store, P, "w1", 10)
    assert lease is not None
    clock.advance(10.5)
    with pytest.raises(LeaseLost, match="expired"):
        complete(store, lease)
    assert status(store, P).stale[0].worker == "w1"


def test_heartbeats_keep_a_lease_alive(store: Store, clock: FakeClock) -> None:
    enqueue(store, P, [item("T0")])
    lease = claim_next(store, P, "w1", 10)
    assert lease is not None
    for _ in range(5):
        clock.advance(8)
        heartbeat(store, lease)
    assert claim_next(store, P, "w2", 10) is None
    live = status(store, P).live
    assert [(c.item_id, c.worker) for c in live] == [("T0", "w1")]
    complete(store, lease, "merged")


def test_the_attempt_budget_ends_in_failed_with_the_last_reason(store: Store) -> None:
    enqueue(store, P, [item("T0"), item("T1", "T0")], max_attempts=2)
    first = claim_next(store, P, "w1", 60)
    assert first is not None
    assert fail(store, first, "tests red") == ItemState.PENDING
    second = claim_next(store, P, "w1", 60)
    assert second is not None and second.attempt == 2
    assert fail(store, second, "tests still red") == ItemState.FAILED
    record = get_item(store, P, "T0")
    assert record.state == "failed" and record.reason is not None
    assert record.reason.startswith("tests still red")
    assert _state(store, "T1") == ItemState.SKIPPED
    assert claim_next(store, P, "w1", 60) is None


def test_a_dead_worker_gives_its_attempt_back_but_a_crash_loop_still_ends(
    store: Store, clock: FakeClock
) -> None:
    enqueue(store, P, [item("T0"), item("T9")], max_attempts=1)
    for _ in range(MAX_RECLAIMS + 1):
        lease = claim_next(store, P, "w1", 10)
        assert lease is not None and (lease.item_id, lease.attempt) == ("T0", 1)
        clock.advance(20)  # the worker dies: its lease lapses
    nxt = claim_next(store, P, "w2", 10)
    assert nxt is not None and nxt.item_id == "T9"
    record = get_item(store, P, "T0")
    assert record.state == "failed" and record.attempts == 1
    assert record.reason == f"its worker died {MAX_RECLAIMS + 1} times on it (lease of w1 expired)"


def test_a_retried_item_starts_its_count_of_worker_deaths_again(
    store: Store, clock: FakeClock
) -> None:
    # A retried item kept its count: the next restart of its run failed it at once.
    enqueue(store, P, [item("T0")], max_attempts=1)
    for _ in range(MAX_RECLAIMS + 1):
        assert claim_next(store, P, "w1", 10) is not None
        clock.advance(20)
    assert claim_next(store, P, "w1", 10) is None
    assert get_item(store, P, "T0").state == "failed"
    assert retry(store, P, "T0") == ("T0",)
    for _ in range(MAX_RECLAIMS):
        lease = claim_next(store, P, "w1", 10)
        assert lease is not None and lease.item_id == "T0"
        clock.advance(20)
    assert get_item(store, P, "T0").state != "failed"


def test_a_run_a_person_stopped_is_no_worker_death_but_one_killed_outright_is(
    store: Store, clock: FakeClock
) -> None:
    enqueue(store, P, [item("T0")], max_attempts=1)
    # Stopped (Ctrl-C) and restarted more often than any crash loop may: the item still runs.
    for _ in range(MAX_RECLAIMS + 3):
        lease = claim_next(store, P, "h1/w1", 10)
        assert lease is not None and lease.item_id == "T0"
        assert get_item(store, P, "T0").reason is None  # the note goes once taken back
        assert keep_for_restart(store, P, "h1/") == ("T0",)
        assert get_item(store, P, "T0").reason == KEPT_BY_STOP
        assert reclaim_own(store, P, "h1/", prefix=True) == ("T0",)
    # Killed outright, leaving no note: that counts, and a crash loop still ends.
    for _ in range(MAX_RECLAIMS + 1):
        assert claim_next(store, P, "h1/w1", 10) is not None
        assert reclaim_own(store, P, "h1/", prefix=True) == ("T0",)
    assert claim_next(store, P, "h1/w1", 10) is None
    record = get_item(store, P, "T0")
    assert record.state == "failed" and record.reason is not None
    assert record.reason.startswith(f"its worker died {MAX_RECLAIMS + 1} times")


def test_a_permanent_failure_skips_every_dependent_and_retry_requeues_them(
    store: Store,
) -> None:
    enqueue(store, P, [item("T0"), item("T1", "T0"), item("T2", "T1"), item("T3")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None and lease.item_id == "T0"
    assert fail(store, lease, "spec impossible", permanent=True) == ItemState.FAILED
    for dependent in ("T1", "T2"):
        record = get_item(store, P, dependent)
        assert (record.state, record.reason) == ("skipped", "blocked by T0")
    other = claim_next(store, P, "w1", 60)
    assert other is not None and other.item_id == "T3"
    assert claim_next(store, P, "w1", 60) is None
    assert retry(store, P, "T0") == ("T0", "T1", "T2")
    assert [_state(store, i) for i in ("T0", "T1", "T2")] == ["pending"] * 3
    again = claim_next(store, P, "w1", 60)
    assert again is not None and again.item_id == "T0" and again.attempt == 1


def test_retry_is_refused_while_a_live_lease_holds_the_item(store: Store, clock: FakeClock) -> None:
    enqueue(store, P, [item("T0"), item("T1")])
    lease = claim_next(store, P, "w1", 10)
    assert lease is not None
    with pytest.raises(ItemBusy) as caught:
        retry(store, P, "T0")
    assert caught.value.worker == "w1"
    with pytest.raises(IllegalTransition):
        retry(store, P, "T1")  # pending: nothing to retry
    with pytest.raises(UnknownItem):
        retry(store, P, "T404")


def test_an_item_gone_from_the_plan_is_not_retried_to_be_skipped_again(
    store: Store, clock: FakeClock
) -> None:
    from agent_harness.errors import UsageError
    from agent_harness.queue.holds import restore, withdraw
    from agent_harness.queue.items import WITHDRAWN, get_item

    enqueue(store, P, [item("T0"), item("T9")])
    assert withdraw(store, P, ["T9"], WITHDRAWN) == ("T9",)
    with pytest.raises(UsageError, match="T9 is no longer in the plan; put it back, then run"):
        retry(store, P, "T9")
    assert get_item(store, P, "T9").state == "skipped"  # as it was: nothing claimed re-queued
    # Put back in the plan, the next run's sync restores it, ready to be claimed.
    enqueue(store, P, [item("T0"), item("T9")])
    assert restore(store, P, ["T0", "T9"]) == ("T9",)
    assert (get_item(store, P, "T9").state, get_item(store, P, "T9").reason) == ("pending", None)


def test_defer_parks_an_item_without_burning_an_attempt(store: Store, clock: FakeClock) -> None:
    enqueue(store, P, [item("T0")], max_attempts=1)
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None
    defer(store, lease, clock() + 3600, "rate limit resets in an hour")
    record = get_item(store, P, "T0")
    assert (record.state, record.attempts) == ("waiting", 0)
    assert claim_next(store, P, "w1", 60) is None
    clock.advance(3601)
    again = claim_next(store, P, "w1", 60)
    assert again is not None and again.attempt == 1  # the budget of one is still there
    complete(store, again, "merged")


def test_illegal_transitions_are_refused(store: Store) -> None:
    enqueue(store, P, [item("T0"), item("T1")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None
    with pytest.raises(IllegalTransition):
        advance(store, lease, "merged")
    with pytest.raises(IllegalTransition):
        complete(store, lease, "failed")
    with pytest.raises(IllegalTransition):
        record_outcome(store, P, "T1", "pending", {})
    advance(store, lease, "checks")
    advance(store, lease, "review")
    advance(store, lease, "checks")  # the reviewer sent it back
    complete(store, lease, "pr_open")
    with pytest.raises(IllegalTransition):
        record_outcome(store, P, "T0", "reverted", {})  # never merged
    assert record_outcome(store, P, "T0", "merged", {"sha": "abc"})
    assert not record_outcome(store, P, "T0", "merged", {"sha": "abc"})  # already known
    assert record_outcome(store, P, "T0", "reverted", {"sha": "def"})


def test_an_outcome_ends_a_running_lease(store: Store) -> None:
    enqueue(store, P, [item("T0")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None
    advance(store, lease, "pr_open")
    record_outcome(store, P, "T0", "merged", {"pr": 3})
    with pytest.raises(LeaseLost, match="ended"):
        complete(store, lease, "pr_open")
    assert _state(store, "T0") == ItemState.MERGED


def test_every_state_change_is_an_event(store: Store, clock: FakeClock) -> None:
    enqueue(store, P, [item("T0")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None
    fail(store, lease, "flaky network")
    lease = claim_next(store, P, "w2", 60)
    assert lease is not None
    advance(store, lease, "checks")
    advance(store, lease, "review")
    complete(store, lease, "pr_open")
    record_outcome(store, P, "T0", "merged", {"pr": 12})
    record, events = history(store, P, "T0")
    assert record.state == "merged" and record.attempts == 2
    assert [e.kind for e in events] == [
        "enqueued",
        "claimed",
        "attempt_failed",
        "requeued",
        "claimed",
        "advanced",
        "advanced",
        "completed",
        "outcome",
    ]
    assert (
        events[4].payload.as_dict()["worker"] == "w2"
        and events[4].payload.as_dict()["attempt"] == 2
    )
    assert events[3].payload.as_dict()["reason"] == "flaky network"
    assert [e.payload.as_dict().get("to") for e in events if "to" in e.payload.as_dict()][
        -1
    ] == "merged"


def test_status_counts_states_and_tells_live_from_stale(store: Store, clock: FakeClock) -> None:
    enqueue(store, P, [item("T0"), item("T1"), item("T2"), item("T3", done=True)])
    old = claim_next(store, P, "w1", 5)
    clock.advance(3)
    fresh = claim_next(store, P, "w2", 60)
    assert old is not None and fresh is not None
    clock.advance(3)
    view = status(store, P)
    assert view.counts == {"claimed": 2, "pending": 1, "done": 1}
    assert [c.worker for c in view.live] == ["w2"]
    assert [c.worker for c in view.stale] == ["w1"]


def test_the_trackers_outcome_ends_a_failed_or_requeued_item(store: Store) -> None:
    # An attempt can open its PR and then fail (a crash after the PR, a lost answer): the
    # merge or close that follows must still end the item, and unblock what depends on it.
    enqueue(store, P, [item("T0"), item("T1", "T0")])
    lease = claim_next(store, P, "w1", 60)
    assert lease is not None and lease.item_id == "T0"
    fail(store, lease, "died after opening its PR", permanent=True)
    assert get_item(store, P, "T0").state == "failed"
    assert get_item(store, P, "T1").state == "skipped"
    assert record_outcome(store, P, "T0", "merged", {"pr": 7})
    assert get_item(store, P, "T0").state == "merged"
    assert get_item(store, P, "T1").state == "pending", "merged work unblocks its dependents"
    assert record_outcome(store, P, "T1", "closed", {"pr": 8})
    assert get_item(store, P, "T1").state == "closed"


def test_a_merge_takes_off_the_note_of_a_stopped_run(store: Store) -> None:
    # Merged by a person after its run was stopped, it read "its run was stopped; the next
    # run takes it back" for good (review).
    enqueue(store, P, [item("T0")])
    lease = claim_next(store, P, "h1/w1", 60)
    assert lease is not None
    assert keep_for_restart(store, P, "h1/") == ("T0",)
    assert record_outcome(store, P, "T0", "merged", {"pr": 3})
    record = get_item(store, P, "T0")
    assert (record.state, record.reason) == ("merged", None)


def test_an_item_failed_at_its_pull_request_is_among_the_recent_failures(store: Store) -> None:
    # A spent round budget failed the item with no attempt failing: /api/errors said nothing.
    from agent_harness.queue.items import reopen_for_round
    from agent_harness.queue.views import errors_view
    from agent_harness.store.events import PullRound

    enqueue(store, P, [item("T0"), item("T1")])
    first = claim_next(store, P, "w1", 60)
    assert first is not None
    complete(store, first)
    second = claim_next(store, P, "w1", 60)
    assert second is not None
    fail(store, second, "a check failed")
    round_event = PullRound(
        pr=4, round=2, trigger="review", head_sha="a" * 40, action="failed", summary="changes"
    )
    budget = "PR #4: the budget of 1 PR round is spent"
    assert reopen_for_round(store, P, first.item_id, round_event, fail=budget)
    view = errors_view(store)
    assert view.attempts_failed == 1  # attempts alone are counted as such
    assert [(r.item, r.reason) for r in view.recent] == [
        (first.item_id, budget),
        (second.item_id, "a check failed"),
    ]
