"""Resume from events: what a killed run may skip, read from the item's history alone."""

from __future__ import annotations

import pytest

from agent_harness.pipeline.budgets import RunBudget, item_over_budget
from agent_harness.pipeline.history import ItemHistory, known_cost
from agent_harness.store.events import (
    Advanced,
    AgentFinished,
    AgentStarted,
    AgentStateChanged,
    ChecksPassed,
    Claimed,
    FeedbackGiven,
    Outcome,
    Retried,
    Reviewed,
)

from .conftest import Rig

pytestmark = pytest.mark.unit


def test_an_approval_stands_until_something_newer_speaks_about_the_item() -> None:
    history = ItemHistory([ChecksPassed(sha="a1"), Reviewed(approved=True, sha="a1")])
    approval = history.approval()
    assert approval is not None and approval.sha == "a1"
    history.record(FeedbackGiven(source="review", summary="a person asked for more"))
    assert history.approval() is None
    history.record(Reviewed(approved=True, sha="b2"))
    history.record(Outcome(from_="pr_open", to="reverted"))
    assert history.approval() is None  # a revert re-queues the item afresh


def test_a_checked_commit_waits_for_review_until_a_verdict_or_feedback() -> None:
    history = ItemHistory([ChecksPassed(sha="c3")])
    assert history.checked_sha() == "c3"
    history.record(Reviewed(approved=False, sha="c3"))
    assert history.checked_sha() is None


def test_an_ingested_approval_is_never_trusted(rig: Rig) -> None:
    project = "octo/app:PLAN"
    rig.store.record_outside_event(
        project, "T1", "review", {"approved": True, "sha": "evil"}, external_id="file:1"
    )
    history = ItemHistory.read(rig.store, project, "T1")
    assert history.approval() is None and history.spent_usd() is None
    rig.store.append_event(project, "T1", Reviewed(approved=True, sha="good", cost_usd=0.25))
    history = ItemHistory.read(rig.store, project, "T1")
    approval = history.approval()
    assert approval is not None and approval.sha == "good" and history.spent_usd() == 0.25


def test_feedback_comes_back_for_the_next_prompt() -> None:
    history = ItemHistory([FeedbackGiven(source="checks", summary="check failed", detail="E x")])
    feedback = history.feedback()
    assert feedback is not None
    assert (feedback.kind, feedback.summary, feedback.detail) == ("checks", "check failed", "E x")


def test_unknown_cost_is_none_never_zero_and_known_costs_add_up() -> None:
    unknown = AgentFinished(ok=True, state="done")
    assert known_cost([unknown, Reviewed(approved=True)]) is None
    assert known_cost([unknown, AgentFinished(ok=True, state="done", cost_usd=0.5),
                       Reviewed(approved=True, cost_usd=0.25)]) == 0.75  # fmt: skip
    history = ItemHistory([AgentFinished(ok=True, state="done", cost_usd=2.0)])
    assert item_over_budget(history, 1.0) == (
        "item cost budget spent: $2.00 of $1.00 (budgets.item_cost_usd)"
    )
    assert item_over_budget(history, 5.0) is None and item_over_budget(history, None) is None
    assert item_over_budget(ItemHistory([unknown]), 0.0) is None


def test_what_a_claimed_item_is_doing_reads_from_its_latest_events() -> None:
    history = ItemHistory([Claimed(worker="w", attempt=1, token=1, expires_at=1.0)])
    assert history.activity() == "claimed"

    history.record(AgentStarted(implementer="x", session="s", attempt=1))
    assert history.activity() == "agent running"
    history.record(AgentStateChanged(state="waiting_for_input", detail="Proceed? [y/N]"))
    assert history.activity() == "waiting for input: attach to answer"
    # Its checks begun, none ended yet: it said "agent done" all through the first check.
    history.record(AgentStateChanged(state="done"))
    history.record(Advanced(from_="claimed", to="checks", worker="w", attempt=1))
    assert history.activity() == "checks running"
    history.record(Advanced(from_="checks", to="review", worker="w", attempt=1))
    assert history.activity() == "in review"


def test_the_run_budget_trips_once_the_reported_spend_reaches_it(rig: Rig) -> None:
    budget = RunBudget(rig.store, "octo/app:PLAN", 1.0, run_id="r1")
    assert not budget.check() and budget.spent_usd() is None
    rig.store.append_event(
        "octo/app:PLAN", "T1", AgentFinished(ok=True, state="done", cost_usd=0.6, run_id="r1")
    )
    assert not budget.check()
    spent = Reviewed(approved=True, cost_usd=0.4, run_id="r1")
    rig.store.append_event("octo/app:PLAN", "T2", spent)
    assert budget.check() and budget.spent
    assert not RunBudget(rig.store, "octo/app:PLAN", None).check()


def test_an_agent_run_whose_worker_died_after_it_is_resumed_not_repeated() -> None:
    from agent_harness.store.events import CheckRan, LeaseExpired

    finished = AgentFinished(ok=True, state="done", reason="exited 0")
    died = ItemHistory([finished, CheckRan(command="pytest"), LeaseExpired(worker="w1")])
    assert died.finished_run() == finished
    judged = ItemHistory([finished, FeedbackGiven(source="checks", summary="red")])
    assert judged.finished_run() is None  # its work was judged: the next attempt starts anew
    crashed = ItemHistory([AgentFinished(ok=False, state="crashed")])
    assert crashed.finished_run() is None


def test_an_agent_run_in_another_hosts_worktree_is_not_resumed_here() -> None:
    from agent_harness.store.events import AgentStarted, CheckRan, LeaseExpired

    there = "/srv/build-3/.agent-harness/worktrees/T1"
    here = "/srv/build-2/.agent-harness/worktrees/T1"
    finished = AgentFinished(ok=True, state="done", reason="exited 0")
    started = AgentStarted(implementer="claude", session="s", attempt=1, worktree=there)
    died = ItemHistory([started, finished, CheckRan(command="pytest"), LeaseExpired(worker="w")])
    assert died.finished_run(there) == finished  # the same host, its work in that worktree
    assert died.finished_run(here) is None  # another host's clone: the work is not here
    unknown = ItemHistory([AgentStarted(implementer="c", session="s", attempt=1), finished])
    assert unknown.finished_run(here) == finished  # events from before worktrees were named


def test_an_agent_started_by_a_worker_that_died_is_picked_up_until_its_end_is_recorded() -> None:
    from agent_harness.pipeline.history import AGENT_PICKED_UP
    from agent_harness.store.events import LeaseExpired, Resumed

    here = "/srv/build-2/.agent-harness/worktrees/T1"
    started = AgentStarted(implementer="claude", session="s", attempt=1, worktree=here)
    died = ItemHistory([started, LeaseExpired(worker="w1")])
    assert died.unfinished_start(here) == started
    assert died.unfinished_start("/srv/build-3/.agent-harness/worktrees/T1") is None
    died.record(Resumed(sha="a1", why=AGENT_PICKED_UP))  # picked up, and died again
    assert died.unfinished_start(here) == started
    assert died.activity() == "agent running"
    died.record(AgentFinished(ok=True, state="done"))
    assert died.unfinished_start(here) is None  # its end is on record: nothing to pick up
    judged = ItemHistory([started, FeedbackGiven(source="agent", summary="crashed")])
    assert judged.unfinished_start(here) is None
    assert ItemHistory([]).unfinished_start(here) is None


def test_after_a_retry_the_next_prompt_is_told_why_not_an_old_rounds_feedback() -> None:
    conflict = FeedbackGiven(
        source="pr_conflict",
        summary="PR #5 round 1: conflicts with main",
        detail="these files have conflict markers to resolve: calc/mul.py",
    )
    history = ItemHistory([conflict, Outcome(from_="pr_open", to="reverted")])
    history.record(Retried(from_="reverted", to="pending"))
    feedback = history.feedback()
    assert feedback is not None and feedback.kind == "retry" and feedback.detail == ""
    assert "its merged change was reverted on the default branch" in feedback.summary
    assert "conflict" not in feedback.summary  # that branch and its markers are gone
    # A failure the person retried after is still worth knowing, with why it came back.
    failed = ItemHistory([FeedbackGiven(source="protected", summary="touches protected path x")])
    failed.record(Retried(from_="failed", to="pending"))
    told = failed.feedback()
    assert told is not None and "after it failed" in told.summary
    assert "The last attempt before it ended with: touches protected path x" in told.summary
    # Feedback given since the retry (a round of the new pull request) speaks for itself.
    history.record(FeedbackGiven(source="pr_check_run", summary="PR #9 round 1: ci failed"))
    later = history.feedback()
    assert later is not None and later.summary == "PR #9 round 1: ci failed"
