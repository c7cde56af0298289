"""`agent-harness work` and `agent-harness ingest` as a user runs them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.queue.items import enqueue
from agent_harness.queue.leases import claim_next, fail
from agent_harness.store.database import open_store
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import item

A, B = "me/app:PLAN", "me/lib:PLAN"


@pytest.fixture
def db(db_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = str(db_dir / "cli.sqlite")
    monkeypatch.setenv("AGENT_HARNESS_DB", url)
    return url


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> object:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.integration
def test_work_shows_counts_live_and_stale_claims(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(db) as store:
        enqueue(store, A, [item("T1"), item("T2"), item("T3"), item("T4", done=True)])
        assert claim_next(store, A, "w-live", 600) is not None
    with open_store(db, clock=FakeClock(start=time.time() - 3600)) as an_hour_ago:
        assert claim_next(an_hour_ago, A, "w-stale", 60) is not None  # lapsed long since
    view = _json(capsys, "work")
    assert isinstance(view, dict)
    assert view["counts"] == {"claimed": 2, "done": 1, "pending": 1}
    assert [c["worker"] for c in view["live"]] == ["w-live"]
    assert [c["worker"] for c in view["stale"]] == ["w-stale"]
    assert main(["work"]) == 0
    out = capsys.readouterr().out
    assert "w-live" in out and "w-stale" in out and "expired" in out


@pytest.mark.integration
def test_a_claim_its_stopped_run_kept_says_so_not_that_its_agent_runs(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # After Ctrl-C the table still said "agent running", long after the agent had ended.
    from agent_harness.queue.items import KEPT_BY_STOP
    from agent_harness.queue.leases import keep_for_restart
    from agent_harness.store.events import AgentStarted

    with open_store(db) as store:
        enqueue(store, A, [item("T1"), item("T2")])
        assert claim_next(store, A, "h1/w1", 600) is not None
        assert claim_next(store, A, "h1/w2", 600) is not None
        for one in ("T1", "T2"):
            store.append_event(A, one, AgentStarted(implementer="agent", session="s", attempt=1))
        assert keep_for_restart(store, A, "h1/w1") == ("T1",)
    view = _json(capsys, "work")
    assert isinstance(view, dict)
    assert {c["item"]: c["reason"] for c in view["live"]} == {"T1": KEPT_BY_STOP, "T2": None}
    assert main(["work"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "h1/w" in line]
    assert "its run was stopped" in rows[0] and "agent running" not in rows[0]
    assert "agent running" in rows[1]


@pytest.mark.integration
def test_a_paused_queue_and_a_held_pull_request_are_said_not_left_to_guess(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # "2 pending" was all a paused queue said, and an item whose rounds a person stopped read
    # as any open pull request.
    from agent_harness.queue.control import set_control
    from agent_harness.queue.items import note_rounds_stopped
    from agent_harness.queue.leases import complete

    with open_store(db) as store:
        enqueue(store, A, [item("T1"), item("T2"), item("T3")])
        lease = claim_next(store, A, "w1", 600)
        assert lease is not None
        complete(store, lease)
        note_rounds_stopped(store, A, "T1", "a person asked `/agent-harness stop`")
        set_control(store, "paused", A, by="control")
    view = _json(capsys, "work")
    assert isinstance(view, dict)
    assert view["control"]["asked"] == "paused" and view["control"]["asked_by"] == "control"
    assert main(["work"]) == 0
    out = capsys.readouterr().out
    assert "paused by control: no item is claimed until `agent-harness control resume`" in out
    assert "pr_open: T1: its pull request's rounds stopped: a person asked" in out


@pytest.mark.integration
def test_items_a_dependency_holds_back_are_shown_with_what_they_wait_for(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # They counted only as pending, and `--json` said "waiting": [].
    with open_store(db) as store:
        enqueue(store, A, [item("T1"), item("T2", "T1"), item("T3")])
        assert claim_next(store, A, "w1", 600) is not None  # T1, in flight
    view = _json(capsys, "work")
    assert isinstance(view, dict)
    assert view["blocked"] == [{"id": "T2", "reason": "waits for T1 (claimed) to be merged"}]
    assert main(["work"]) == 0
    assert "pending: T2 waits for T1 (claimed) to be merged" in capsys.readouterr().out


@pytest.mark.integration
def test_an_ambiguous_project_is_named_with_the_choices(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(db) as store:
        enqueue(store, A, [item("T1")])
        enqueue(store, B, [item("T1")])
    assert main(["work"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and A in err and B in err and "--project" in err
    assert _json(capsys, "work", "--project", B)["counts"] == {"pending": 1}  # type: ignore[index]


@pytest.mark.integration
def test_an_item_only_one_project_holds_needs_no_project_named(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # With two plans in one database, `work show B1` asked for --project though only one
    # project has a B1.
    with open_store(db) as store:
        enqueue(store, A, [item("T1"), item("A1")])
        enqueue(store, B, [item("T1"), item("B1")])
    shown = _json(capsys, "work", "show", "B1")
    assert isinstance(shown, dict) and shown["item"]["id"] == "B1"
    assert main(["work", "show", "T1"]) == 2  # both have a T1: which one is asked
    err = capsys.readouterr().err
    assert A in err and B in err and "--project" in err
    assert main(["work", "retry", "A1", "B1"]) == 2  # no one project holds both
    assert "--project" in capsys.readouterr().err


@pytest.mark.integration
def test_show_and_retry_an_item(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(db) as store:
        enqueue(store, A, [item("T1"), item("T2", "T1")])
        lease = claim_next(store, A, "w1", 60)
        assert lease is not None
        fail(store, lease, "cannot be done", permanent=True)
    shown = _json(capsys, "work", "show", "T1")
    assert isinstance(shown, dict)
    assert shown["item"]["state"] == "failed" and shown["item"]["reason"] == "cannot be done"
    assert [e["kind"] for e in shown["events"]] == [
        "enqueued",
        "claimed",
        "attempt_failed",
        "failed",
    ]
    assert main(["work", "show", "T1"]) == 0
    assert "attempt_failed" in capsys.readouterr().out
    # `work` names the failure; `work --json` lists every item, as the run's report says.
    assert main(["work"]) == 0
    assert "failed: T1: cannot be done" in capsys.readouterr().out
    listed = _json(capsys, "work")
    assert isinstance(listed, dict)
    assert [(i["id"], i["state"], i["reason"], i["depends_on"]) for i in listed["items"]] == [
        ("T1", "failed", "cannot be done", []),
        ("T2", "skipped", "blocked by T1", ["T1"]),  # as `work show T2` says
    ]
    assert _json(capsys, "work", "retry", "T1") == {"requeued": ["T1", "T2"]}
    assert main(["work", "retry", "T1"]) == 2  # pending now: nothing to retry
    assert capsys.readouterr().err.strip() == (
        "error: T1 is pending; only failed, skipped, closed or reverted items can be retried"
    )
    assert main(["work", "show", "T9"]) == 2
    assert "no item T9" in capsys.readouterr().err


@pytest.mark.integration
def test_ingest_reports_bad_lines_and_adds_nothing_twice(
    db: str, db_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = db_dir / "events.jsonl"
    path.write_text('{"id": 1, "kind": "ci"}\n[1, 2]\n{"id": 2, "kind": "ci"}\n')
    assert main(["ingest", "--events", str(path), "--project", A]) == 1
    captured = capsys.readouterr()
    assert "2 added" in captured.out
    assert f"{path}:2: not a JSON object" in captured.err
    assert main(["ingest", "--events", str(path), "--project", A, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["duplicates"] == 2


@pytest.mark.unit
def test_help_explains_with_examples() -> None:
    for args in (["work"], ["work", "show"], ["work", "retry"], ["ingest"]):
        assert main([*args, "--help"]) == 0


@pytest.mark.integration
def test_retry_of_an_item_over_its_budget_is_refused_until_the_budget_is_raised(
    db: str, db_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_harness.store.events import AgentFinished

    with open_store(db) as store:
        enqueue(store, A, [item("T1")])
        lease = claim_next(store, A, "w1", 60)
        assert lease is not None
        store.append_event(A, "T1", AgentFinished(ok=True, state="done", cost_usd=1.5))
        fail(store, lease, "item cost budget spent: $1.50 of $1.00", permanent=True)
    monkeypatch.chdir(db_dir)
    config = db_dir / "agent-harness.toml"
    config.write_text("[budgets]\nitem_cost_usd = 1.0\n")
    assert main(["work", "retry", "T1", "--project", A]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: T1 not re-queued: item cost budget: $1.50 spent of $1.00, and the next "
        "agent run and the review after it may cost up to $1.50 (budgets.item_cost_usd); raise "
        "the budget to retry it"
    )
    config.write_text("[budgets]\nitem_cost_usd = 3.0\n")  # room for one more $1.50 run
    assert _json(capsys, "work", "retry", "T1", "--project", A) == {"requeued": ["T1"]}


@pytest.mark.integration
def test_attach_names_an_item_that_is_not_there_as_such(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "T9 has no agent session on record", as if T9 were an item whose agent never ran.
    with open_store(db) as store:
        enqueue(store, A, [item("T1")])
    assert main(["attach", "T9", "--project", A]) == 2  # as `work show T9` exits
    assert f"no item T9 in project {A}" in capsys.readouterr().err
    assert main(["work", "retry", " T1", "--project", A]) == 2
    assert f"no item ' T1' in project {A}" in capsys.readouterr().err  # the space is shown
    assert main(["attach", "T1", "--project", A]) == 1
    assert f"T1 has no agent session on record in {A}" in capsys.readouterr().err


@pytest.mark.unit
def test_an_empty_db_option_is_refused_not_taken_for_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # `--db "$DB"` with DB unset once read (or made) ./.agent-harness/harness.sqlite.
    assert main(["work", "--db", ""]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --db is empty: give a path, sqlite:///path or postgresql://..."
    )


@pytest.mark.integration
def test_a_waiting_item_whose_time_has_come_is_shown_due_not_at_a_past_time(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # After `work unpark`, an item woken kept showing its old "until" (a past time) and reason
    # as though it still waited.
    from agent_harness.queue.items import wake
    from agent_harness.queue.leases import defer

    with open_store(db) as store:
        enqueue(store, A, [item("T1")])
        lease = claim_next(store, A, "w1", 60)
        assert lease is not None
        defer(store, lease, time.time() + 3600, "agent:custom parked: a window")
        assert main(["work", "--project", A]) == 0
        assert "due now" not in capsys.readouterr().out
        assert wake(store, ["agent:custom"], "unparked") == [(A, "T1")]
    assert main(["work", "--project", A]) == 0
    assert "due now (the next run takes it)" in capsys.readouterr().out


@pytest.mark.integration
def test_several_items_are_retried_at_once_or_none_of_them(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(db) as store:
        enqueue(store, A, [item("T1"), item("T2", "T1"), item("T3"), item("T4")])
        for _ in range(2):
            lease = claim_next(store, A, "w1", 60)
            assert lease is not None
            fail(store, lease, "cannot be done", permanent=True)
    states = {i["id"]: i["state"] for i in _json(capsys, "work")["items"]}  # type: ignore[index]
    assert states == {"T1": "failed", "T2": "skipped", "T3": "failed", "T4": "pending"}
    # T4 is pending: refused, and T1 and T3, named before it, stay as they were.
    assert main(["work", "retry", "T1", "T3", "T4"]) == 2
    assert "T4 is pending" in capsys.readouterr().err
    after = {i["id"]: i["state"] for i in _json(capsys, "work")["items"]}  # type: ignore[index]
    assert after == states
    # T2 came back with T1 (it was blocked by it): naming it too retries it once.
    assert main(["work", "retry", "T1", "T3", "T2"]) == 0
    assert capsys.readouterr().out.strip() == "re-queued T1, T2, T3"
    events = _json(capsys, "work", "show", "T2")["events"]  # type: ignore[index]
    assert [e["kind"] for e in events].count("retried") == 1
