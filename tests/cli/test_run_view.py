"""The run's closing table, drawn for a person."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from agent_harness.cli.plan_view import TABLE_ROWS_MAX
from agent_harness.cli.run_view import render_report
from agent_harness.pipeline.report import ItemOutcome, RunReport

pytestmark = pytest.mark.unit


def test_a_run_of_thousands_draws_what_it_touched_and_counts_the_rest() -> None:
    # `run --only T1` on a 3,000-item plan printed all 3,000 rows (5,700 lines).
    items = [ItemOutcome(f"T{n}", "t", "pending", 0) for n in range(1, 701)]
    items[650] = ItemOutcome("T651", "t", "pr_open", 1, pr_url="http://x/pull/1")
    buffer = io.StringIO()
    render_report(Console(file=buffer, width=120), RunReport("me/app:PLAN", None, items))
    text = buffer.getvalue()
    assert "T651" in text  # the one this run worked, though it comes late in the plan
    assert text.count("│ T") == TABLE_ROWS_MAX
    assert f"… and {700 - TABLE_ROWS_MAX} more items ({700 - TABLE_ROWS_MAX} pending;" in text


def test_a_failure_is_drawn_before_what_earlier_runs_delivered() -> None:
    items = [ItemOutcome(f"T{n}", "t", "merged", 1) for n in range(1, 601)]
    items.append(ItemOutcome("T601", "t", "failed", 3, reason="check `pytest` failed"))
    buffer = io.StringIO()
    render_report(Console(file=buffer, width=120), RunReport("me/app:PLAN", None, items))
    text = buffer.getvalue()
    assert "T601" in text and "… and 101 more items (101 merged;" in text


@pytest.mark.parametrize(
    ("items", "code"),
    [
        ([("pr_open", None)], 0),
        ([("pr_open", None), ("waiting", "parked until a person clears it")], 75),
        ([("waiting", "held: not selected for this run (--only)")], 0),
        (
            [
                (
                    "waiting",
                    "held: its issue could not be made (see the sync's problems); fix the "
                    "plan item",
                )
            ],
            4,
        ),
        ([("failed", "checks failed"), ("waiting", "parked")], 4),
    ],
)
def test_the_exit_code_tells_done_from_waiting_from_needing_a_person(
    items: list[tuple[str, str | None]], code: int
) -> None:
    from agent_harness.cli.run_view import run_exit_code

    outcomes = [
        ItemOutcome(f"T{n}", "t", state, 1, reason) for n, (state, reason) in enumerate(items)
    ]
    assert run_exit_code([RunReport("o/r:PLAN", None, outcomes)]) == code


def test_a_run_budget_that_left_items_to_do_is_no_run_that_ended_well() -> None:
    from agent_harness.cli.run_view import run_exit_code

    # It said "stopped claiming: run cost budget spent" and exited 0, with T2 never started.
    outcomes = [
        ItemOutcome("T1", "t", "pr_open", 1, None),
        ItemOutcome("T2", "t", "pending", 0, None),
    ]
    stopped = RunReport("o/r:PLAN", None, outcomes, stopped_by_budget=True)
    assert run_exit_code([stopped]) == 75
    all_done = RunReport("o/r:PLAN", None, outcomes[:1], stopped_by_budget=True)
    assert run_exit_code([all_done]) == 0  # the budget ran out on nothing left to do


def test_with_only_the_exit_code_speaks_of_the_items_selected() -> None:
    from agent_harness.cli.run_view import run_exit_code

    # T7 failed in an earlier run; this one was to work T3, and opened its pull request.
    outcomes = [
        ItemOutcome("T3", "t", "pr_open", 1, None),
        ItemOutcome("T7", "t", "failed", 2, "check `false` failed (exit 1)"),
    ]
    reports = [RunReport("o/r:PLAN", None, outcomes)]
    assert run_exit_code(reports, {"o/r:PLAN": {"T3"}}) == 0
    assert run_exit_code(reports, {"o/r:PLAN": {"T3", "T7"}}) == 4
    assert run_exit_code(reports, {"o/r:PLAN": None}) == 4  # no --only: every item counts
    assert run_exit_code(reports) == 4


def test_the_runs_cost_is_said_as_known_plus_what_is_of_unknown_price() -> None:
    from agent_harness.cli.run_view import cost_said

    # Before: "known cost unknown", and "known cost $0.01" with nine unpriced runs unsaid.
    assert cost_said(0.0071, 11) == "cost $0.0071 + 11 agent runs or reviews of unknown price"
    assert cost_said(None, 1) == "cost unknown: 1 agent run or review of unknown price"
    assert cost_said(1.5, 0) == "cost $1.50"
    assert cost_said(None, 0) == "no agent or review ran"


def test_local_links_recorded_on_a_port_since_taken_are_shown_where_the_pages_are_now(
    tmp_path: Path,
) -> None:
    from agent_harness.cli.run_view import render_end
    from agent_harness.pipeline.launch import RunRequest

    # The pages were on 28987 when #10 was opened; another program held that port at this
    # run's start, so they moved to 28988, and #10's stored link opened that program.
    (tmp_path / "forge").mkdir()
    (tmp_path / "forge" / "address").write_text("http://127.0.0.1:28988\n")
    items = [
        ItemOutcome("T1", "t", "pr_open", 1, pr_url="http://127.0.0.1:28987/_html/me/app/pull/10"),
        ItemOutcome("T2", "t", "pr_open", 1, pr_url="http://127.0.0.1:28988/_html/me/app/pull/12"),
    ]
    buffer = io.StringIO()
    request = RunRequest(repo="me/app", work=None, plan_path=None, forge="local")
    render_end(Console(file=buffer, width=200), [RunReport("me/app:PLAN", None, items)],
               request, tmp_path, as_json=False)  # fmt: skip
    text = buffer.getvalue()
    assert "http://127.0.0.1:28988/_html/me/app/pull/10" in text
    assert ":28987" not in text


def test_no_word_of_links_when_no_item_has_one(tmp_path: Path) -> None:
    from agent_harness.cli.run_view import render_end
    from agent_harness.pipeline.launch import RunRequest

    items = [ItemOutcome("T1", "t", "waiting", 1, reason="the reviewer's endpoint is parked")]
    buffer = io.StringIO()
    request = RunRequest(repo="me/app", work=None, plan_path=None, forge="local")
    render_end(Console(file=buffer, width=200), [RunReport("me/app:PLAN", None, items)],
               request, tmp_path, as_json=False)  # fmt: skip
    assert "The links answer" not in buffer.getvalue()


def test_the_pull_request_to_merge_by_hand_is_this_runs_not_an_earlier_runs(
    tmp_path: Path,
) -> None:
    from agent_harness.cli.run_view import render_local_pages

    # After `run --only C4`, the hint named C1's #4, opened by the run before, not C4's #10.
    items = [
        ItemOutcome("C1", "t", "pr_open", 1, pr_number=4, pr_url="http://127.0.0.1:1/p/4"),
        ItemOutcome("C4", "t", "pr_open", 1, pr_number=10, pr_url="http://127.0.0.1:1/p/10"),
    ]
    buffer = io.StringIO()
    report = RunReport("me/app:PLAN", None, items)
    render_local_pages(Console(file=buffer, width=300), "me/app", tmp_path, report)
    assert "agent-harness forge merge me/app 10 --data" in buffer.getvalue()
