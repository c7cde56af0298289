"""Two plan files under one plan key would rewrite each other's issues: the issue's marker names
the plan file it came from (its path in the repository), and a second file is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.plan.markdown import parse_plan_file
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.protocol import IssueDraft
from agent_harness.tracker.sync import Marker, PlanKeyTaken, read_marker, sync_plan

pytestmark = pytest.mark.integration
REPO = "octo/app"
AUTH = "# Tasks: auth\n\n- [ ] T001 Add the login form\n- [ ] T002 Check the password\n"
BILLING = "# Tasks: billing\n\n- [ ] T001 Add the invoice table\n- [ ] T002 Send the invoice\n"


@pytest.fixture
def rf(tmp_path: Path) -> Iterator[RunningForge]:
    with running_forge(tmp_path / "forge") as running:
        running.forge.create_repo("octo", "app", auto_init=True)
        yield running


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A work tree with two spec-kit features, each with its own tasks.md numbered from T001."""
    root = tmp_path / "clone"
    (root / ".git").mkdir(parents=True)  # all `plan_in_repo` looks for
    for feature, text in (("001-auth", AUTH), ("002-billing", BILLING)):
        (root / "specs" / feature).mkdir(parents=True)
        (root / "specs" / feature / "tasks.md").write_text(text)
    return root


def client(rf: RunningForge) -> GitHubTracker:
    return GitHubTracker(REPO, TOKEN, rf.server.api_url, write_spacing_s=0.0)


def titles(tracker: GitHubTracker) -> list[str]:
    return sorted(issue.title for issue in tracker.list_issues())


def test_a_second_plan_file_under_the_same_key_is_refused_before_any_write(
    rf: RunningForge, clone: Path
) -> None:
    tracker = client(rf)
    auth = parse_plan_file(clone / "specs" / "001-auth" / "tasks.md")
    first = sync_plan(auth, tracker, "tasks")
    assert [c.id for c in first.created] == ["T001", "T002"]
    markers = [read_marker(issue.body) for issue in tracker.list_issues()]
    assert {m.source for m in markers if m is not None} == {"specs/001-auth/tasks.md"}

    billing = parse_plan_file(clone / "specs" / "002-billing" / "tasks.md")
    writes = tracker.tally.writes
    for dry_run in (True, False):
        with pytest.raises(PlanKeyTaken) as refused:
            sync_plan(billing, tracker, "tasks", dry_run=dry_run)
    assert tracker.tally.writes == writes
    assert str(refused.value) == (
        "plan key 'tasks' on octo/app is specs/001-auth/tasks.md's (issue #1 is its T001); "
        "syncing specs/002-billing/tasks.md under it would rewrite that plan's issues. Give "
        "specs/002-billing/tasks.md a key of its own, e.g. --plan-key 002-billing"
    )
    assert titles(tracker) == ["T001: Add the login form", "T002: Check the password"]

    # Under the key it suggests, each plan has its own issues, and neither touches the other's.
    own = sync_plan(billing, tracker, "002-billing")
    assert [c.id for c in own.created] == ["T001", "T002"]
    again = sync_plan(auth, tracker, "tasks")
    assert again.writes == 0 and [c.id for c in again.unchanged] == ["T001", "T002"]
    assert len(titles(tracker)) == 4


def test_the_same_plan_from_anywhere_is_the_same_plan(
    rf: RunningForge, clone: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Named by its path in the repository, not as given: a run from another directory, or on
    # another host's clone, rewrites nothing.
    tracker = client(rf)
    plan_path = clone / "specs" / "001-auth" / "tasks.md"
    sync_plan(parse_plan_file(plan_path), tracker, "tasks")
    monkeypatch.chdir(clone / "specs")
    relative = sync_plan(parse_plan_file("001-auth/tasks.md"), tracker, "tasks")
    assert relative.writes == 0 and len(relative.unchanged) == 2
    other_host = clone.parent / "elsewhere"
    clone.rename(other_host)
    moved_clone = sync_plan(
        parse_plan_file(other_host / "specs/001-auth/tasks.md"), tracker, "tasks"
    )
    assert moved_clone.writes == 0 and len(moved_clone.unchanged) == 2
    [issue, _] = sorted(tracker.list_issues(), key=lambda i: i.number)
    assert "Mirrored from `specs/001-auth/tasks.md`" in issue.body


def test_a_plan_moved_in_its_repository_takes_its_issues_along(
    rf: RunningForge, clone: Path
) -> None:
    tracker = client(rf)
    old = clone / "specs" / "001-auth" / "tasks.md"
    sync_plan(parse_plan_file(old), tracker, "tasks")
    new = clone / "docs" / "tasks.md"
    new.parent.mkdir()
    old.rename(new)
    moved = sync_plan(parse_plan_file(new), tracker, "tasks")
    assert moved.created == [] and [c.id for c in moved.updated] == ["T001", "T002"]
    sources = {read_marker(issue.body).source for issue in tracker.list_issues()}  # type: ignore[union-attr]
    assert sources == {"docs/tasks.md"}
    assert sync_plan(parse_plan_file(new), tracker, "tasks").writes == 0


def test_markers_with_no_source_or_a_path_outside_the_repository_refuse_nothing(
    rf: RunningForge, clone: Path
) -> None:
    # Issues synced before markers named their plan, and a marker someone edited to name a
    # file outside the clone (`../..`, an absolute path), cannot say which plan they are.
    tracker = client(rf)
    (clone.parent / "outside.md").write_text("x\n")
    for n, source in enumerate((None, "../outside.md", str(clone.parent / "outside.md")), 1):
        body = Marker("T001", f"key{n}", "h" * 16, (), source).render()
        tracker.create_issue(IssueDraft("T001: planted", body, (), None))
        billing = parse_plan_file(clone / "specs" / "002-billing" / "tasks.md")
        report = sync_plan(billing, tracker, f"key{n}")
        assert report.ok and [c.id for c in report.updated] == ["T001"]


def test_the_cli_refuses_in_one_line(
    clone: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(clone)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    sync = ["plan", "--repo", "me/app", "--forge", "local", "--json"]
    assert main([*sync, "specs/001-auth/tasks.md"]) == 0
    assert len(json.loads(capsys.readouterr().out)["created"]) == 2
    assert main([*sync, "specs/002-billing/tasks.md"]) == 3
    said = json.loads(capsys.readouterr().err)
    assert said["exit"] == 3 and "--plan-key 002-billing" in said["error"]
    assert main([*sync, "specs/002-billing/tasks.md", "--plan-key", "002-billing"]) == 0
    assert len(json.loads(capsys.readouterr().out)["created"]) == 2
