"""A create whose answer was lost: the sync still names each item's issue by what the tracker
holds (the oldest issue of the item), and says out loud when a twin was made."""

from __future__ import annotations

import pytest

from agent_harness.plan.markdown import parse_plan
from agent_harness.testing.tracker import MemoryTracker
from agent_harness.tracker.protocol import RateLimited, TrackerError, WriteUncertain
from agent_harness.tracker.sync import sync_plan

pytestmark = pytest.mark.unit

PLAN = parse_plan("### T1: First\nDo it.\n\n### T2: Second\nDo that.\n", source="PLAN.md")


def lost(message: str = "connection dropped") -> WriteUncertain:
    return WriteUncertain(message, in_flight=False)


def test_a_twin_made_when_the_look_missed_the_first_create_keeps_the_older_issue() -> None:
    tracker = MemoryTracker()
    # T1's create lands as #1 but its answer is lost, and the look after it cannot see #1 yet:
    # the resend makes #2.
    tracker.fail_after_next("create_issue", lost())
    tracker.unlisted_recent = {1}

    report = sync_plan(PLAN, tracker, "PLAN")

    assert sorted(tracker.issues) == [1, 2, 3]
    assert report.issue_numbers == {"T1": 1, "T2": 3}
    assert any("T1: issues #1, #2 carry the same marker" in p for p in report.problems)


def test_a_create_that_landed_although_every_try_looked_failed_still_names_its_issue() -> None:
    tracker = MemoryTracker()
    # Every send of T1 fails; the last one lands as #1 first, and its answer is lost.
    tracker.fail_next("create_issue", *(lost() for _ in range(tracker.write_pace.sends - 1)))
    tracker.fail_after_next("create_issue", lost())
    tracker.unlisted_recent = {1}  # no look ever sees it

    report = sync_plan(PLAN, tracker, "PLAN")

    assert [i.title for i in tracker.issues.values()] == ["T1: First", "T2: Second"]
    assert report.issue_numbers == {"T1": 1, "T2": 2}
    assert sorted((c.id, c.number) for c in report.created) == [("T1", 1), ("T2", 2)]
    assert report.problems == []  # "not created after 6 tries" was wrong, and is not said


def test_a_create_that_never_landed_is_still_reported() -> None:
    tracker = MemoryTracker()
    tracker.fail_next("create_issue", *(lost() for _ in range(tracker.write_pace.sends)))

    report = sync_plan(PLAN, tracker, "PLAN")

    assert [i.title for i in tracker.issues.values()] == ["T2: Second"]
    assert report.issue_numbers == {"T2": 1}
    assert [p.split(" was ")[0] for p in report.problems] == ["T1: the issue of T1"]


def test_an_issue_the_listing_again_does_not_show_yet_keeps_the_number_its_answer_gave() -> None:
    tracker = MemoryTracker()
    tracker.fail_after_next("create_issue", lost())  # T1 lands as #1; the look finds it
    tracker.unlisted = {2}  # T2's issue, made with a clear answer, is not in the listing yet

    report = sync_plan(PLAN, tracker, "PLAN")

    assert report.issue_numbers == {"T1": 1, "T2": 2}
    assert report.problems == []


def test_a_sync_with_clear_answers_lists_every_issue_once() -> None:
    tracker = MemoryTracker()
    report = sync_plan(PLAN, tracker, "PLAN")
    assert report.issue_numbers == {"T1": 1, "T2": 2}
    assert tracker.tally.by_kind["list_issues"] == 1


@pytest.mark.parametrize(
    "error",
    [TrackerError("server error", 502), RateLimited("server error", reset_at=None)],
    ids=["5xx", "rate-limited"],
)
def test_a_failed_listing_after_a_lost_answer_is_a_problem_not_a_lost_sync(
    error: TrackerError,
) -> None:
    tracker = MemoryTracker()
    tracker.fail_after_next("create_issue", lost())  # T1 lands as #1; the look finds it
    # The sync's own listing and the look go through; the listing again fails. Every write
    # is over by then, so nothing is left for the error to stop.
    tracker.fail_next("list_issues", error, after=2)

    report = sync_plan(PLAN, tracker, "PLAN")

    assert sorted(tracker.issues) == [1, 2]
    assert [c.number for c in report.created] == [1, 2]
    assert report.issue_numbers == {"T1": 1, "T2": 2}
    assert report.problems == [
        "listing the issues again, after a create got no clear answer: server error; "
        "the next sync tells which issue is each item's"
    ]
