"""Money: shown as a person reads it, and budgets checked before a call is paid for."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent_harness.implement.protocol import ImplementResult
from agent_harness.pipeline.budgets import format_usd
from agent_harness.testing.scripted import ScriptedImplementer, ScriptedReviewer, Step, verdict

from .conftest import Rig
from .test_run_fakes import pipeline

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "unknown"),
        (0.0, "$0.00"),
        (0.00007 * 2, "$0.00014"),
        (0.1 + 0.2, "$0.30"),
        (0.004999, "$0.0050"),
        (0.0000012345, "$0.0000012"),
        (12345.678, "$12,345.68"),
        (0.01, "$0.01"),
    ],
)
def test_money_is_shown_without_float_noise(value: float | None, shown: str) -> None:
    assert format_usd(value) == shown


# -- checked before money is spent ------------------------------------------------------------


def _costing(cost: float, ok: bool = False) -> Step:
    state = "done" if ok else "crashed"
    result = ImplementResult(ok=ok, state=state, reason="exited 1", cost_usd=cost)
    return Step(files={"x.py": "x\n"}, result=result)


def test_the_spend_of_a_failed_run_counts_and_stops_the_next_run(rig: Rig) -> None:
    # An agent that reports $0.50 and then exits non-zero, with a $1.00 item budget and
    # attempts to spare: the third run would pass the budget, so it never starts.
    rig.settings.item_cost_usd = 1.0
    rig.settings.max_attempts = 6
    rig.implementer = ScriptedImplementer([_costing(0.5)])
    report = pipeline(rig, "### T1: One\n").run()
    assert len(rig.implementer.calls) == 2
    (item,) = report.items
    assert item.state == "failed"
    assert item.reason == (
        "item cost budget: $1.00 spent of $1.00, and the next agent run and the review after it "
        "may cost up to $0.50 (budgets.item_cost_usd)"
    )
    assert report.cost_usd == 1.0


def test_a_configured_call_bound_refuses_a_run_that_could_pass_the_budget(rig: Rig) -> None:
    rig.settings.item_cost_usd = 1.0
    rig.settings.max_call_usd = 1.5
    rig.implementer = ScriptedImplementer([_costing(1.5, ok=True)])
    report = pipeline(rig, "### T1: One\n").run()
    assert rig.implementer.calls == []  # not one cent spent
    assert report.items[0].state == "failed" and report.cost_usd is None


def test_the_reviewer_is_not_paid_when_its_bound_would_pass_the_budget(rig: Rig) -> None:
    rig.settings.item_cost_usd = 1.0
    rig.settings.max_call_usd = 0.4
    rig.implementer = ScriptedImplementer([_costing(0.7, ok=True)])
    report = pipeline(rig, "### T1: One\n").run()
    assert rig.reviewer.prompts == []
    assert report.items[0].reason == (
        "item cost budget: $0.70 spent of $1.00, and the next reviewer call may cost up to "
        "$0.40 (budgets.item_cost_usd)"
    )


def test_the_largest_call_seen_bounds_the_next_one(rig: Rig) -> None:
    # No bound configured: the first call of $0.60 is what the next one may cost.
    rig.settings.item_cost_usd = 1.0
    rig.implementer = ScriptedImplementer([_costing(0.6)])
    rig.settings.max_attempts = 5
    report = pipeline(rig, "### T1: One\n").run()
    assert len(rig.implementer.calls) == 1 and report.cost_usd == 0.6


def test_a_retried_item_over_its_budget_spends_nothing_more(rig: Rig) -> None:
    from agent_harness.queue import retries

    rig.settings.item_cost_usd = 1.0
    rig.implementer = ScriptedImplementer([_costing(1.5, ok=True)])
    first = pipeline(rig, "### T1: One\n").run()
    assert first.items[0].state == "failed" and len(rig.implementer.calls) == 1
    retries.retry(rig.store, "octo/app:PLAN", "T1")
    again = pipeline(rig, "### T1: One\n").run()
    assert len(rig.implementer.calls) == 1  # the retry paid nothing
    assert again.items[0].state == "failed" and "budgets.item_cost_usd" in (
        again.items[0].reason or ""
    )


# -- the run's budget -------------------------------------------------------------------------


def test_the_run_budget_counts_this_runs_spend_only(rig: Rig) -> None:
    from agent_harness.store.events import AgentFinished

    project = "octo/app:PLAN"
    # An ingested line that says it cost $100, and an earlier run's $0.90: neither is this run's.
    rig.store.record_outside_event(
        project,
        "T1",
        "agent_finished",
        {"ok": True, "state": "done", "cost_usd": 100},
        external_id="ext-1",
    )
    rig.store.append_event(
        project, "T1", AgentFinished(ok=True, state="done", cost_usd=0.9, run_id="before")
    )
    rig.settings.run_cost_usd = 1.0
    rig.implementer = ScriptedImplementer([_costing(0.25, ok=True)])
    rig.reviewer = ScriptedReviewer([verdict(True, cost_usd=0.01)])
    report = pipeline(rig, "### T1: One\n").run()
    assert not report.stopped_by_budget and report.cost_usd == 0.26
    assert report.items[0].state == "pr_open"


def test_a_spent_run_budget_ends_the_claiming_in_a_bounded_number_of_events(rig: Rig) -> None:
    rig.settings.run_cost_usd = 1.0
    rig.settings.workers = 2
    rig.implementer = ScriptedImplementer([_costing(5.0, ok=True)])
    plan = "".join(f"### T{n}: Item {n}\n\n" for n in range(1, 6))
    report = pipeline(rig, plan).run()
    assert report.stopped_by_budget
    assert report.stopped_because == "run cost budget spent: $5.00 of $1.00 (budgets.run_cost_usd)"
    claims = [e for e in rig.store.all_events(project="octo/app:PLAN") if e.kind == "claimed"]
    # T1 and at most one claim per worker after the budget was found spent: never a loop.
    assert len(claims) <= 1 + rig.settings.workers
    assert report.events < 60
    assert len(rig.implementer.calls) == 1
    assert all(i.attempts == 0 for i in report.items)


@pytest.mark.parametrize("reported", [-5.0, 1e308])
def test_a_cost_no_run_can_cost_is_unknown_neither_giving_budget_back_nor_spending_it_all(
    rig: Rig, reported: float
) -> None:
    # -5 a run gave the budget back ("cost $-20.00", no stop); 1e308 refused every later call
    # for good, the next one "may cost up to $100,000,…" whatever the budget was raised to.
    # Unknown, it counts as the most one call may cost.
    rig.settings.item_cost_usd = 2.0
    rig.settings.max_call_usd = 0.5
    rig.settings.max_attempts = 2
    rig.implementer = ScriptedImplementer([_costing(reported), _costing(0.25, ok=True)])
    rig.reviewer = ScriptedReviewer([verdict(True, cost_usd=0.01)])
    report = pipeline(rig, "### T1: One\n").run()
    assert len(rig.implementer.calls) == 2
    assert [(i.state, i.attempts) for i in report.items] == [("pr_open", 2)]
    assert report.cost_usd == 0.26  # the known runs; the other's is unknown, not a figure


def test_a_cost_not_known_stops_a_budget_it_cannot_keep_unless_a_call_has_a_most(
    rig: Rig,
) -> None:
    # An agent that reports no cost ran six times under a budget of $0.01: "never counted as
    # zero", but counted as nothing at all.
    rig.settings.run_cost_usd = 5.0
    rig.settings.max_attempts = 6
    rig.implementer = ScriptedImplementer([_costing_nothing()])
    report = pipeline(rig, "### T1: One\n### T2: Two\n").run()
    assert len(rig.implementer.calls) == 1 and report.stopped_by_budget
    assert report.stopped_because == (
        "run cost budget: an agent run or review reported no cost, so the budget cannot be "
        "kept; set budgets.max_call_usd (the most one call may cost) to count each such call "
        "at that (budgets.run_cost_usd)"
    )
    # Said what one call may cost at most, each such call counts as that.
    rig.settings.max_call_usd = 1.0
    rig.implementer = ScriptedImplementer([_costing_nothing()])
    rig.reviewer = ScriptedReviewer([verdict(False, "no")] * 6)
    again = pipeline(rig, "### T1: One\n### T2: Two\n").run()
    assert again.stopped_by_budget and len(rig.implementer.calls) == 5  # $1 each, of $5
    assert again.stopped_because == "run cost budget spent: $5.00 of $5.00 (budgets.run_cost_usd)"


def test_an_item_budget_that_cannot_be_kept_fails_the_item_saying_why(rig: Rig) -> None:
    rig.settings.item_cost_usd = 5.0
    rig.settings.max_attempts = 6
    rig.implementer = ScriptedImplementer([_costing_nothing()])
    [item] = pipeline(rig, "### T1: One\n").run().items
    assert len(rig.implementer.calls) == 1 and item.state == "failed"
    assert item.reason is not None and "set budgets.max_call_usd" in item.reason


def _costing_nothing() -> Step:
    result = ImplementResult(ok=False, state="crashed", reason="exited 1", cost_usd=None)
    return Step(files={"x.py": "x\n"}, result=result)


# -- an implementer that pays call by call (the direct-API executor) --------------------------


def _stopped_before_passing(reason: str) -> Step:
    from agent_harness.implement.protocol import OVER_BUDGET

    stopped = ImplementResult(ok=False, state=OVER_BUDGET, reason=reason, cost_usd=0.0)
    return Step(files={}, result=stopped)  # the executor says what its calls cost


def test_the_implementer_is_told_what_the_item_and_the_run_have_left(rig: Rig) -> None:
    rig.settings.item_cost_usd = 1.0
    rig.settings.run_cost_usd = 5.0
    rig.settings.max_attempts = 3
    rig.implementer = ScriptedImplementer([_costing(0.25), _costing(0.25, ok=True)])
    pipeline(rig, "### T1: One\n").run()
    # Its first run may spend the item's whole budget; the next, what the first left of it.
    assert [c["allowance_usd"] for c in rig.implementer.calls] == [1.0, 0.75]


def test_an_implementer_stopped_by_the_items_budget_fails_the_item_for_good(rig: Rig) -> None:
    rig.settings.item_cost_usd = 1.0
    rig.settings.max_attempts = 3
    why = "$0.9000 spent of the $1.0000 left for this run, and the next implementer call may cost"
    rig.implementer = ScriptedImplementer([_stopped_before_passing(why)])
    [item] = pipeline(rig, "### T1: One\n").run().items
    assert item.state == "failed" and len(rig.implementer.calls) == 1
    assert item.reason == f"item cost budget: {why} (budgets.item_cost_usd)"


def test_an_implementer_stopped_by_the_runs_budget_leaves_its_item_for_the_next_run(
    rig: Rig,
) -> None:
    rig.settings.item_cost_usd = 10.0
    rig.settings.run_cost_usd = 1.0
    rig.implementer = ScriptedImplementer([_stopped_before_passing("no room for the next call")])
    report = pipeline(rig, "### T1: One\n### T2: Two\n").run()
    assert report.stopped_by_budget and len(rig.implementer.calls) == 1
    assert (
        report.stopped_because
        == "run cost budget: no room for the next call (budgets.run_cost_usd)"
    )
    states = sorted((i.id, i.state, i.attempts) for i in report.items)
    assert states == [("T1", "waiting", 0), ("T2", "pending", 0)]  # its attempt given back


def test_the_budget_that_stopped_the_implementer_is_the_one_blamed(rig: Rig) -> None:
    # The item's budget was the smaller, but its spend was counted two ways: the run was
    # blamed, stopped claiming, and the item waited instead of failing.
    rig.settings.item_cost_usd = 1.0
    rig.settings.max_call_usd = 0.4
    rig.settings.run_cost_usd = 0.4
    rig.implementer = ScriptedImplementer([_costing_nothing()])  # counts as $0.40
    pipeline(rig, "### T1: One\n").run()
    rig.settings.run_cost_usd = 0.8
    stopped = _stopped_before_passing("$0.3000 spent of the $0.6000 left for this run")
    rig.implementer = ScriptedImplementer(
        [replace(stopped, result=replace(stopped.result, cost_usd=0.3))]
    )
    report = pipeline(rig, "### T1: One\n").run()
    assert not report.stopped_by_budget
    [item] = report.items
    assert item.state == "failed" and (item.reason or "").startswith("item cost budget:")


def test_the_implementer_leaves_room_for_the_review_after_it(rig: Rig) -> None:
    # Given the item's whole budget, it could spend what the review then needed: the item
    # failed for good with its work done.
    rig.settings.item_cost_usd = 1.0
    rig.settings.max_attempts = 3
    rig.implementer = ScriptedImplementer([_costing(0.25, ok=True)])
    rig.reviewer = ScriptedReviewer(
        [verdict(False, "no", cost_usd=0.2), verdict(True, cost_usd=0.2)]
    )
    pipeline(rig, "### T1: One\n").run()
    allowances = [c["allowance_usd"] for c in rig.implementer.calls]
    # The first review's $0.20 is what the next may cost: held back from the second run.
    assert allowances[:2] == [pytest.approx(1.0), pytest.approx(1.0 - 0.45 - 0.2)]


def test_an_agent_is_not_paid_when_the_review_after_it_could_not_be(rig: Rig) -> None:
    # With $0.30 left, a $0.20 agent run fit and was paid; its $0.20 review then did not, and
    # the item failed with work nobody reviewed. `work retry` let the same run through.
    rig.settings.item_cost_usd = 0.7
    rig.settings.max_attempts = 3
    rig.implementer = ScriptedImplementer([_costing(0.2, ok=True)])
    rig.reviewer = ScriptedReviewer([verdict(False, "no", cost_usd=0.2)] * 3)
    [item] = pipeline(rig, "### T1: One\n").run().items
    assert len(rig.implementer.calls) == 1 and item.state == "failed"
    assert item.reason == (
        "item cost budget: $0.40 spent of $0.70, and the next agent run and the review after it "
        "may cost up to $0.40 (budgets.item_cost_usd)"
    )
