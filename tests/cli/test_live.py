"""The live view of a run: its elapsed column moves while an agent works in silence."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from agent_harness.cli.live import LiveView
from agent_harness.store.events import AgentStateChanged, AttemptStarted
from agent_harness.testing.clock import FakeClock

pytestmark = pytest.mark.unit


def shown(console: Console, renderable: object) -> str:
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


def test_elapsed_ticks_between_events() -> None:
    clock = FakeClock(start=1000.0)
    console = Console(file=io.StringIO(), width=120)
    view = LiveView(console, clock=clock)
    live = view.display()
    view("attempt", "T1", AttemptStarted(attempt=1, worker="host/w1"))
    assert "  0.0s" in shown(console, live.get_renderable())
    clock.advance(42.5)  # no event: the agent is thinking
    assert " 42.5s" in shown(console, live.get_renderable())
    view("agent_state", "T1", AgentStateChanged(state="working"))
    clock.advance(60.0)
    later = shown(console, live.get_renderable())
    assert "102.5s" in later and "agent: working" in later


def test_the_executors_steps_show_as_they_happen() -> None:
    from agent_harness.store.executor_events import ExecutorStepDone, ExecutorStepStarted

    console = Console(file=io.StringIO(), width=120)
    view = LiveView(console, clock=FakeClock(start=1000.0))
    live = view.display()
    view("attempt", "T1", AttemptStarted(attempt=1, worker="host/w1"))
    view("executor.step_started", "T1", ExecutorStepStarted(step="2", attempt=1))
    assert "step 2: try 1" in shown(console, live.get_renderable())
    view("executor.step_done", "T1", ExecutorStepDone(step="2", result="notes.txt exists"))
    assert "step 2: done: notes.txt exists" in shown(console, live.get_renderable())


def test_what_the_run_waits_for_shows_under_the_table() -> None:
    from agent_harness.store.events import DeliveryDue, TrackerUnanswered

    console = Console(file=io.StringIO(), width=160)
    view = LiveView(console, clock=FakeClock(start=1000.0))
    live = view.display()
    view("delivery_due", "", DeliveryDue(items=["T1"], due_in_s=60.0))
    assert "delivery of T1 tried again in 60 s; waiting" in shown(console, live.get_renderable())
    down = TrackerUnanswered(reason="HTTP 502", status=502, stops_run=False)
    view("tracker_unanswered", "", down)
    assert "going on without its news" in shown(console, live.get_renderable())


def test_the_table_is_drawn_from_the_first_event_on() -> None:
    # A run refused while it begins (a plan key another plan holds, a tracker that refuses the
    # token) says its one line of error, under no empty table.
    file = io.StringIO()
    view = LiveView(Console(file=file, width=120), clock=FakeClock(start=1000.0))
    with view.display():
        pass
    assert file.getvalue() == ""
    with view.display():
        view("attempt", "T1", AttemptStarted(attempt=1, worker="host/w1"))
    assert "agent-harness run" in file.getvalue() and "T1" in file.getvalue()


def test_what_follows_the_table_starts_on_a_line_of_its_own_when_not_on_a_terminal() -> None:
    # Written to a file or a pipe, the table's last line used to end without a newline, and the
    # run's one line of error was glued to its bottom border.
    file = io.StringIO()
    console = Console(file=file, width=120)
    assert not console.is_terminal
    view = LiveView(console, clock=FakeClock(start=1000.0))
    with view.display():
        view("attempt", "T1", AttemptStarted(attempt=1, worker="host/w1"))
    console.print("error: the run stops")
    assert file.getvalue().splitlines()[-1] == "error: the run stops"


def test_elapsed_stops_when_the_attempt_ends_and_starts_again_with_the_next() -> None:
    from agent_harness.store.events import PullOpened, Waiting

    clock = FakeClock(start=1000.0)
    console = Console(file=io.StringIO(), width=160)
    view = LiveView(console, clock=clock)
    live = view.display()
    view("attempt", "T1", AttemptStarted(attempt=1, worker="host/w1"))
    clock.advance(8.0)
    view("pr_opened", "T1", PullOpened(number=3, url="http://x/pull/3", reused=False, branch="b"))
    clock.advance(60.0)  # the run goes on with other items
    assert "  8.0s" in shown(console, live.get_renderable())
    view("attempt", "T2", AttemptStarted(attempt=1, worker="host/w1"))
    clock.advance(5.0)
    view("waiting", "T2", Waiting(until=None, reason="window"))
    clock.advance(100.0)
    view("attempt", "T2", AttemptStarted(attempt=2, worker="host/w1"))
    clock.advance(2.0)
    table = shown(console, live.get_renderable())
    assert "  8.0s" in table and "  2.0s" in table


@pytest.mark.parametrize("width", [100, 160])
def test_a_pull_request_link_is_never_shown_folded_in_two(width: int) -> None:
    from agent_harness.store.events import PullOpened

    url = "http://127.0.0.1:8765/_html/forge-user/tally/pull/7"
    console = Console(file=io.StringIO(), width=width)
    view = LiveView(console, clock=FakeClock(start=1000.0))
    live = view.display()
    view("attempt", "T1", AttemptStarted(attempt=1, worker="vm-8694ad/w1"))
    view("pr_opened", "T1", PullOpened(number=7, url=url))
    table = shown(console, live.get_renderable())
    # Folded, its first half opened the repository's page: whole, or by its number.
    assert (url in table) if width == 160 else ("PR #7" in table and "_html" not in table)


def test_a_wait_for_the_next_run_says_why_and_a_timed_one_says_when() -> None:
    import time as wall

    from agent_harness.store.events import Waiting

    console = Console(file=io.StringIO(), width=160)
    view = LiveView(console, clock=FakeClock(start=1000.0))
    live = view.display()
    for item in ("T1", "T2"):
        view("attempt", item, AttemptStarted(attempt=1, worker="host/w1"))
    # Put back for the next run (a spent budget): it said "until" the moment it was put back.
    view("waiting", "T1", Waiting(until=wall.time(), reason="run cost budget spent: $1.00"))
    later = wall.time() + 3600
    view("waiting", "T2", Waiting(until=later, reason="anthropic's window"))
    table = shown(console, live.get_renderable())
    assert "run cost budget spent: $1.00" in table
    assert f"until {wall.strftime('%H:%M', wall.localtime(later))}" in table
    assert table.count("until ") == 1
