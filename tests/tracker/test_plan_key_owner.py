"""Two plan files under one plan key would rewrite each other's issues: the issue's marker names
the plan file it came from (its path in the repository), and another file is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.plan.markdown import parse_plan_file
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.markers import Marker, read_marker
from agent_harness.tracker.protocol import IssueDraft
from agent_harness.tracker.sync import PlanKeyTaken, refuse_taken_key, render_issue, sync_plan

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
    (root / ".git").mkdir(parents=True)  # all `plan_in_repo` looks for: a git directory's HEAD
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for feature, text in (("001-auth", AUTH), ("002-billing", BILLING)):
        (root / "specs" / feature).mkdir(parents=True)
        (root / "specs" / feature / "tasks.md").write_text(text)
    return root


def client(rf: RunningForge) -> GitHubTracker:
    return GitHubTracker(REPO, TOKEN, rf.server.api_url, write_spacing_s=0.0)


def marker_of(body: str) -> Marker:
    marker = read_marker(body)
    assert marker is not None
    return marker


def sources(tracker: GitHubTracker) -> set[str | None]:
    return {marker_of(issue.body).source for issue in tracker.list_issues()}


def titles(tracker: GitHubTracker) -> list[str]:
    return sorted(issue.title for issue in tracker.list_issues())


def test_a_second_plan_file_under_the_same_key_is_refused_before_any_write(
    rf: RunningForge, clone: Path
) -> None:
    tracker = client(rf)
    auth_path = clone / "specs" / "001-auth" / "tasks.md"
    auth = parse_plan_file(auth_path)
    first = sync_plan(auth, tracker, "tasks")
    assert [c.id for c in first.created] == ["T001", "T002"]
    assert sources(tracker) == {"specs/001-auth/tasks.md"}

    billing = parse_plan_file(clone / "specs" / "002-billing" / "tasks.md")
    writes = tracker.tally.writes
    for dry_run in (True, False):
        with pytest.raises(PlanKeyTaken) as refused:
            sync_plan(billing, tracker, "tasks", dry_run=dry_run)
    assert str(refused.value) == (
        "plan key 'tasks' on octo/app is specs/001-auth/tasks.md's (issue #1 is its T001); "
        "syncing specs/002-billing/tasks.md under it would rewrite that plan's issues. Give "
        "specs/002-billing/tasks.md a plan key of its own (e.g. --plan-key 002-billing); or, if "
        "specs/001-auth/tasks.md was moved to specs/002-billing/tasks.md, sync it once with "
        "--moved-from specs/001-auth/tasks.md"
    )
    # On spec-kit's branch per feature the other feature's file is not there: still refused.
    auth_path.unlink()
    with pytest.raises(PlanKeyTaken):
        sync_plan(billing, tracker, "tasks")
    assert tracker.tally.writes == writes
    assert titles(tracker) == ["T001: Add the login form", "T002: Check the password"]

    # Under the key it suggests, each plan has its own issues, and neither touches the other's.
    auth_path.write_text(AUTH)
    own = sync_plan(billing, tracker, "002-billing")
    assert [c.id for c in own.created] == ["T001", "T002"]
    again = sync_plan(auth, tracker, "tasks")
    assert again.writes == 0 and [c.id for c in again.unchanged] == ["T001", "T002"]
    assert len(titles(tracker)) == 4


def test_the_same_plan_from_anywhere_is_the_same_plan(
    rf: RunningForge, clone: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Named by its path in the repository, not as given: a run from another directory, on
    # another host's clone, or through a symbolic link, rewrites nothing.
    tracker = client(rf)
    plan_path = clone / "specs" / "001-auth" / "tasks.md"
    sync_plan(parse_plan_file(plan_path), tracker, "tasks")
    monkeypatch.chdir(clone / "specs")
    (clone / "AUTH.md").symlink_to(plan_path)
    for given in ("001-auth/tasks.md", str(clone / "AUTH.md")):
        again = sync_plan(parse_plan_file(given), tracker, "tasks")
        assert again.writes == 0 and len(again.unchanged) == 2
    other_host = clone.parent / "elsewhere"
    clone.rename(other_host)
    moved_clone = sync_plan(
        parse_plan_file(other_host / "specs/001-auth/tasks.md"), tracker, "tasks"
    )
    assert moved_clone.writes == 0 and len(moved_clone.unchanged) == 2
    [issue, _] = sorted(tracker.list_issues(), key=lambda i: i.number)
    assert "Mirrored from `specs/001-auth/tasks.md`" in issue.body


def test_a_plan_moved_in_its_repository_takes_its_issues_along_when_told(
    rf: RunningForge, clone: Path
) -> None:
    tracker = client(rf)
    old = clone / "specs" / "001-auth" / "tasks.md"
    sync_plan(parse_plan_file(old), tracker, "tasks")
    new = clone / "docs" / "tasks.md"
    new.parent.mkdir()
    old.rename(new)
    with pytest.raises(PlanKeyTaken, match=r"--moved-from specs/001-auth/tasks\.md"):
        sync_plan(parse_plan_file(new), tracker, "tasks")
    moved = sync_plan(parse_plan_file(new), tracker, "tasks", moved_from="specs/001-auth/tasks.md")
    assert moved.created == [] and [c.id for c in moved.updated] == ["T001", "T002"]
    assert sources(tracker) == {"docs/tasks.md"}
    assert sync_plan(parse_plan_file(new), tracker, "tasks").writes == 0


def test_issues_whose_marker_names_no_plan_are_upgraded_once_then_guarded(
    rf: RunningForge, clone: Path
) -> None:
    # Issues an older harness made name no plan file: the first sync names it in each (one
    # write per issue, the text unchanged), and from then on another plan file is refused.
    tracker = client(rf)
    auth = parse_plan_file(clone / "specs" / "001-auth" / "tasks.md")
    for item in auth.items:
        draft, _ = render_issue(item, "tasks", "specs/001-auth/tasks.md", {})
        tracker.create_issue(draft)
    assert sources(tracker) == {None}
    upgraded = sync_plan(auth, tracker, "tasks")
    assert upgraded.created == []
    assert [c.changes for c in upgraded.updated] == [["marker: names specs/001-auth/tasks.md"]] * 2
    assert sync_plan(auth, tracker, "tasks").writes == 0
    with pytest.raises(PlanKeyTaken):
        sync_plan(parse_plan_file(clone / "specs/002-billing/tasks.md"), tracker, "tasks")


def test_a_plan_outside_any_repository_names_none_and_refuses_nothing(
    rf: RunningForge, tmp_path: Path
) -> None:
    tracker = client(rf)
    loose = tmp_path / "loose" / "tasks.md"
    loose.parent.mkdir()
    loose.write_text(AUTH)
    (tmp_path / ".git").mkdir()  # a stray empty one (some tool left it) makes no work tree
    assert sync_plan(parse_plan_file(loose), tracker, "tasks").ok
    assert sources(tracker) == {None}
    assert sync_plan(parse_plan_file(loose), tracker, "tasks").writes == 0


@pytest.mark.parametrize("source", ["../outside.md", "/etc/passwd", "x" * 300 + "/tasks.md"])
def test_any_other_plan_named_in_a_marker_is_refused_in_one_bounded_line(
    rf: RunningForge, clone: Path, source: str
) -> None:
    # Whatever a marker names (anyone with write access may edit one), the answer is the same
    # one line, never an error of the file system.
    tracker = client(rf)
    body = Marker("T001", "tasks", "h" * 16, (), source).render()
    tracker.create_issue(IssueDraft("T001: planted", body, (), None))
    billing = parse_plan_file(clone / "specs" / "002-billing" / "tasks.md")
    with pytest.raises(PlanKeyTaken) as refused:
        sync_plan(billing, tracker, "tasks")
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 800


def test_a_path_that_would_end_the_marker_syncs_as_one_plan(rf: RunningForge, clone: Path) -> None:
    # `-->` in the plan's path used to end the hidden comment early: the marker did not read,
    # and every sync opened the items' issues again.
    tracker = client(rf)
    odd = clone / "notes-->old" / "PLAN.md"
    odd.parent.mkdir()
    odd.write_text(AUTH)
    first = sync_plan(parse_plan_file(odd), tracker, "PLAN")
    assert first.ok and len(first.created) == 2
    assert sources(tracker) == {"notes-->old/PLAN.md"}
    again = sync_plan(parse_plan_file(odd), tracker, "PLAN")
    assert again.ok and again.writes == 0 and len(again.unchanged) == 2


def test_the_cli_refuses_in_one_line_and_takes_a_move_when_told(
    clone: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(clone)
    sync = ["plan", "--repo", "me/app", "--forge", "local", "--json"]
    assert main([*sync, "specs/001-auth/tasks.md"]) == 0
    assert len(json.loads(capsys.readouterr().out)["created"]) == 2
    for extra in ([], ["--adopt-duplicate"]):  # adopting twins is refused first, too
        assert main([*sync, "specs/002-billing/tasks.md", *extra]) == 3
        said = json.loads(capsys.readouterr().err)
        assert said["exit"] == 3 and "--plan-key 002-billing" in said["error"]
    assert main([*sync, "specs/002-billing/tasks.md", "--plan-key", "002-billing"]) == 0
    assert len(json.loads(capsys.readouterr().out)["created"]) == 2
    (clone / "specs" / "001-auth" / "tasks.md").rename(clone / "auth.md")
    moved = ["auth.md", "--plan-key", "tasks", "--moved-from", "specs/001-auth/tasks.md"]
    assert main([*sync, *moved]) == 0
    assert len(json.loads(capsys.readouterr().out)["updated"]) == 2
    assert main(["plan", "auth.md", "--moved-from", "x.md"]) == 2
    assert "need --repo" in capsys.readouterr().err


def test_a_plan_whose_file_name_is_not_utf8_syncs_again_without_change(
    rf: RunningForge, clone: Path
) -> None:
    """A name git and the file system keep as bytes (Latin-1 here) is shown with its odd byte
    written out, the same on every sync: the second sync finds its own issues."""
    folder = clone / "specs" / "003-caf\udce9"  # b"caf\xe9", as os.fsdecode gives it
    folder.mkdir()
    (folder / "tasks.md").write_text(AUTH)
    tracker = client(rf)
    plan = parse_plan_file(folder / "tasks.md")
    first = sync_plan(plan, tracker, "tasks")
    assert [c.id for c in first.created] == ["T001", "T002"]
    assert sources(tracker) == {"specs/003-caf\\xe9/tasks.md"}
    for issue in tracker.list_issues():
        assert "Mirrored from `specs/003-caf\\xe9/tasks.md`" in issue.body
    again = sync_plan(parse_plan_file(folder / "tasks.md"), tracker, "tasks")
    assert (again.created, again.updated) == ([], [])
    assert [c.id for c in again.unchanged] == ["T001", "T002"]


def test_one_plan_file_under_a_second_key_is_refused_while_the_first_keys_issues_are_open(
    rf: RunningForge, clone: Path
) -> None:
    """A host started with another --plan-key (or none, where the others gave one) would open
    every item's issue and pull request a second time."""
    tracker = client(rf)
    auth = parse_plan_file(clone / "specs" / "001-auth" / "tasks.md")
    sync_plan(auth, tracker, "tasks")
    writes = tracker.tally.writes
    with pytest.raises(PlanKeyTaken):  # the check a run of several plans makes first, too
        refuse_taken_key(auth, tracker, "OTHER")
    with pytest.raises(PlanKeyTaken) as refused:
        sync_plan(auth, tracker, "OTHER")
    assert str(refused.value) == (
        "specs/001-auth/tasks.md's items already have issues on octo/app under plan key "
        "'tasks' (issue #1 is its T001); syncing it under 'OTHER' would open a second issue "
        "and pull request for every item. Run it with --plan-key tasks; to start it over "
        "under 'OTHER', close 'tasks''s issues first"
    )
    assert tracker.tally.writes == writes and len(titles(tracker)) == 2
    for issue in tracker.list_issues():  # the person closes the first key's issues
        rf.github.get_repo(REPO).get_issue(issue.number).edit(state="closed")
    again = sync_plan(auth, tracker, "OTHER")
    assert [c.id for c in again.created] == ["T001", "T002"]
