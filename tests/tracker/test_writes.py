"""Creates whose answer is lost, or refused by a burst of 5xx: never twice, never silently lost.

Through GitHubTracker (PyGithub over HTTP) against the embedded forge, whose faults hold a
request past the client's timeout (the write still lands) or answer 502 before doing anything.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_harness.forge import FaultKind
from agent_harness.plan.markdown import parse_plan
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.markers import read_marker
from agent_harness.tracker.sync import sync_plan

pytestmark = pytest.mark.integration

REPO = "octo/app"
PLAN = "### T1: First\n\n### T2: Second\n"


@pytest.fixture
def rf(tmp_path: Path) -> Iterator[RunningForge]:
    with running_forge(tmp_path / "forge") as running:
        running.forge.create_repo("octo", "app", auto_init=True)
        yield running


def marked(rf: RunningForge) -> list[str]:
    ids = []
    for issue in rf.github.get_repo(REPO).get_issues(state="all"):
        marker = read_marker(issue.body or "")
        ids.append(marker.item_id if marker else "?")
    return sorted(ids)


def test_a_create_held_past_the_client_timeout_is_found_not_made_twice(rf: RunningForge) -> None:
    # The forge works on the create for 2.5 s; the client gives up after 1 s. Looking at once
    # would find nothing, and a resend would make a twin.
    rf.forge.faults.inject(FaultKind.LATENCY, "POST", "*/issues", delay_s=2.5, count=1)
    client = GitHubTracker(REPO, TOKEN, rf.server.api_url, write_spacing_s=0.0, timeout_s=1.0)
    report = sync_plan(parse_plan(PLAN), client, "PLAN")
    assert report.ok, report.problems
    assert marked(rf) == ["T1", "T2"]
    time.sleep(0.1)  # nothing still in flight could add a third
    assert marked(rf) == ["T1", "T2"]


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_a_burst_of_server_errors_on_create_is_outlasted_with_backoff(rf: RunningForge) -> None:
    rf.forge.faults.inject(FaultKind.STATUS, "POST", "*/issues", status=502, count=5)
    sleeps = Sleeps()
    client = GitHubTracker(REPO, TOKEN, rf.server.api_url, write_spacing_s=0.0, sleep=sleeps)
    report = sync_plan(parse_plan(PLAN), client, "PLAN")
    assert report.ok, report.problems
    assert marked(rf) == ["T1", "T2"]
    assert len(sleeps) >= 5  # every resend waited first


def test_items_a_longer_burst_keeps_out_are_named_and_nothing_is_made_twice(
    rf: RunningForge,
) -> None:
    rf.forge.faults.inject(FaultKind.STATUS, "POST", "*/issues", status=502, count=None)
    client = GitHubTracker(REPO, TOKEN, rf.server.api_url, write_spacing_s=0.0, sleep=Sleeps())
    report = sync_plan(parse_plan(PLAN), client, "PLAN")
    assert [p.split(":")[0] for p in report.problems] == ["T1", "T2"]
    assert "was not created after 6 tries" in report.problems[0]
    assert marked(rf) == []
