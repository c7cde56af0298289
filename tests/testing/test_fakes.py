"""The in-package fakes keep the promises the pipeline leans on."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.git.worktrees import Worktree
from agent_harness.plan.model import WorkItem
from agent_harness.testing.scripted import (
    ScriptedChecks,
    ScriptedImplementer,
    ScriptedReviewer,
    Step,
    failed,
    verdict,
)
from agent_harness.testing.tracker import MemoryTracker
from agent_harness.tracker.protocol import IssueDraft, TrackerError

pytestmark = pytest.mark.unit


def test_the_memory_tracker_numbers_issues_and_pulls_together_and_counts_writes() -> None:
    tracker = MemoryTracker("octo/app")
    issue = tracker.create_issue(IssueDraft("T1: a", "body", ("bug",)))
    pull = tracker.create_pull("T1: a", "Closes #1", "agent-harness/T1-a", "main")
    assert (issue.number, pull.number) == (1, 2)
    assert tracker.find_pull("agent-harness/T1-a") == pull
    with pytest.raises(TrackerError):  # one open pull request per head branch, as on GitHub
        tracker.create_pull("again", "", "agent-harness/T1-a", "main")
    merged = tracker.merge(pull.number)
    assert merged.merged and merged.state == "closed"
    listing = tracker.pulls_by_update(stop_before=merged.updated_at)
    assert [p.number for p in listing.items] == [2]
    # The refused create was still sent: the tally counts requests, as it does for GitHub.
    assert tracker.tally.writes == 3 and tracker.tally.by_kind["create_pull"] == 2


def test_the_scripted_implementer_writes_its_files_and_plays_steps_in_order(
    tmp_path: Path,
) -> None:
    implementer = ScriptedImplementer([Step(files={"a/b.txt": "one\n"}), Step(files={"c": "x"})])
    tree = Worktree("T1", tmp_path, "agent-harness/T1-x", "base")
    item = WorkItem(id="T1", title="x", line=1, form="heading")
    states: list[tuple[str, str]] = []
    for _ in range(3):
        result = implementer.implement(
            item,
            tree,
            "prompt",
            session="s",
            state_dir=tmp_path,
            on_state=lambda s, d: states.append((s, d)),
        )
        assert result.ok
    assert (tmp_path / "a" / "b.txt").read_text() == "one\n" and (tmp_path / "c").exists()
    assert len(implementer.calls) == 3


def test_the_scripted_reviewer_answers_in_order_and_raises_what_it_was_given() -> None:
    reviewer = ScriptedReviewer([verdict(False, "no tests"), RuntimeError("down")])
    assert '"approved": false' in reviewer.ask("p", "s").text
    with pytest.raises(RuntimeError, match="down"):
        reviewer.ask("p", "s")
    with pytest.raises(AssertionError, match="asked 3 times"):
        reviewer.ask("p", "s")


def test_scripted_checks_stop_at_the_first_failure_and_remember_the_env(tmp_path: Path) -> None:
    checks = ScriptedChecks({"lint": [failed("lint", "E501"), failed("lint", "ok", code=0)]})
    first = checks(["lint", "tests"], tmp_path, timeout_s=5, env={"PATH": "/bin"})
    assert not first.passed and first.skipped == ("tests",)
    second = checks(["lint", "tests"], tmp_path, timeout_s=5, env={"PATH": "/bin"})
    assert second.passed and [r.command for r in second.results] == ["lint", "tests"]
    assert checks.envs == [{"PATH": "/bin"}, {"PATH": "/bin"}]
