"""Worktrees per item, with real git: made, reused, rebuilt without losing commits, guarded."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from agent_harness.git.errors import DefaultBranchGuard, WorktreeError
from agent_harness.git.naming import branch_name
from agent_harness.git.runner import GitError
from agent_harness.git.worktrees import WorkRepo
from tests.shared.git import git, seeded_clone

pytestmark = pytest.mark.integration


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    return seeded_clone(tmp_path)


def test_a_new_worktree_on_its_own_branch_from_the_default(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "Count words!")
    assert tree.branch == "agent-harness/T1-count-words" == branch_name("T1", "Count words!")
    assert git(tree.path, "symbolic-ref", "--short", "HEAD") == tree.branch
    assert tree.base_sha == git(clone, "rev-parse", "origin/main") and not tree.reused


def test_an_item_another_clone_pushed_continues_from_its_branch_despite_a_recent_fetch(
    clone: Path,
) -> None:
    here = WorkRepo(clone, clone.parent / "state")
    here.prepare("T0", "warm up")  # a fetch a moment ago, which items started soon after share
    there_clone = clone.parent / "there"
    git(clone.parent, "clone", "-q", str(clone.parent / "origin.git"), str(there_clone))
    there = WorkRepo(there_clone, clone.parent / "state-there")
    tree = there.prepare("T1", "x")  # another host worked on T1, pushed, and died
    (tree.path / "work.txt").write_text("done there\n")
    sha = there.commit_all(tree, "T1: x")
    there.push(tree)
    stale = here.prepare("T1", "x")  # the recent fetch has not seen that push
    assert here.head(stale) != sha and not stale.reused
    here.discard("T1")
    taken = here.prepare("T1", "x", pushed=True)  # the item's history says it was pushed
    assert here.head(taken) == sha and taken.reused and taken.branch == tree.branch
    assert (taken.path / "work.txt").read_text() == "done there\n"


def two_hosts(clone: Path) -> tuple[WorkRepo, WorkRepo]:
    """This clone's repo, and another host's clone of the same origin."""
    there_clone = clone.parent / "there"
    git(clone.parent, "clone", "-q", str(clone.parent / "origin.git"), str(there_clone))
    return WorkRepo(clone, clone.parent / "state"), WorkRepo(
        there_clone, clone.parent / "state-there"
    )


def test_a_worktree_behind_its_pushed_branch_catches_up_and_one_ahead_is_left(
    clone: Path,
) -> None:
    here, there = two_hosts(clone)
    mine = here.prepare("T1", "x")
    (mine.path / "a.txt").write_text("here\n")
    first = here.commit_all(mine, "T1: here")
    here.push(mine)
    theirs = there.prepare("T1", "x", pushed=True)  # a later round, on another host
    assert there.head(theirs) == first
    (theirs.path / "b.txt").write_text("there\n")
    later = there.commit_all(theirs, "T1: there")
    there.push(theirs)
    back = here.prepare("T1", "x", pushed=True)  # back here: on from the newest work
    assert back.reused and here.head(back) == later and (back.path / "b.txt").exists()
    (back.path / "c.txt").write_text("mine only\n")
    own = here.commit_all(back, "T1: not pushed")
    again = here.prepare("T1", "x", pushed=True)  # commits of its own: left as they are
    assert here.head(again) == own


def _diverged(clone: Path, their_file: str, their_text: str) -> tuple[WorkRepo, str, str]:
    """T1 pushed from here, then worked on both here (not pushed) and on another host (pushed):
    (this clone's repo, the commit only here, the commit only pushed)."""
    here, there = two_hosts(clone)
    tree = here.prepare("T1", "x")
    (tree.path / "a.txt").write_text("first\n")
    here.commit_all(tree, "T1: first")
    here.push(tree)
    (tree.path / "a.txt").write_text("changed here\n")
    own = here.commit_all(tree, "T1: here, never pushed (this host lost its lease)")
    other = there.prepare("T1", "x", pushed=True)
    (other.path / their_file).write_text(their_text)
    pushed = there.commit_all(other, "T1: there, pushed")
    there.push(other)
    return here, own, pushed


def test_own_commits_that_apply_go_on_top_of_work_another_host_pushed(clone: Path) -> None:
    here, own, pushed = _diverged(clone, "b.txt", "b\n")
    back = here.prepare("T1", "x", pushed=True)
    assert back.kept is None
    assert git(back.path, "rev-parse", "HEAD~1") == pushed  # its own commit, replayed on top
    assert git(back.path, "log", "-1", "--format=%s") == git(clone, "log", "-1", "--format=%s", own)
    assert (back.path / "a.txt").read_text() == "changed here\n"
    assert (back.path / "b.txt").read_text() == "b\n"
    here.push(back)  # a fast-forward of the pushed branch, not refused on every retry
    assert git(clone, "ls-remote", "origin", back.branch).split()[0] == here.head(back)


def test_own_commits_that_conflict_are_kept_aside_and_the_pushed_work_goes_on(
    clone: Path,
) -> None:
    here, own, pushed = _diverged(clone, "a.txt", "changed there\n")
    back = here.prepare("T1", "x", pushed=True)
    assert back.kept is not None and git(clone, "rev-parse", back.kept) == own  # nothing lost
    assert here.head(back) == pushed and (back.path / "a.txt").read_text() == "changed there\n"
    assert git(back.path, "status", "--porcelain") == ""
    (back.path / "c.txt").write_text("next round\n")
    here.commit_all(back, "T1: next round")
    here.push(back)
    assert git(clone, "ls-remote", "origin", back.branch).split()[0] == here.head(back)


def test_a_worker_killed_mid_rebase_leaves_nothing_stuck_and_nothing_lost(clone: Path) -> None:
    """A host killed while it replayed its own commits onto pushed work leaves the worktree
    mid-rebase (HEAD detached, the rebase's state on disk). The next prepare starts over
    from the branch, which git moves only when a rebase ends, and comes to the same end as an
    uninterrupted catch-up: its own commits kept aside, the branch at the pushed head."""
    here, own, pushed = _diverged(clone, "a.txt", "changed there\n")
    tree = here.prepare("T1", "x")  # not `pushed`: this look does not fetch, so no catch-up
    git(tree.path, "fetch", "-q", "origin")
    stopped = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "rebase", f"origin/{tree.branch}"],
        cwd=tree.path,
        capture_output=True,
        text=True,
    )
    assert stopped.returncode != 0  # stopped on the conflict, as a kill would leave it
    assert git(clone, "rev-parse", f"refs/heads/{tree.branch}") == own
    back = here.prepare("T1", "x", pushed=True)
    assert back.path == tree.path
    assert git(back.path, "symbolic-ref", "--short", "HEAD") == back.branch
    assert back.kept is not None and git(clone, "rev-parse", back.kept) == own  # nothing lost
    assert here.head(back) == pushed and git(back.path, "status", "--porcelain") == ""


def test_a_broken_worktree_is_rebuilt_and_keeps_its_commits(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "work.txt").write_text("done\n")
    sha = repo.commit_all(tree, "T1: x")
    assert sha and repo.unpushed(tree) == 1
    (tree.path / ".git").unlink()  # broken: the worktree no longer knows its repository
    again = repo.prepare("T1", "x")
    assert again.path == tree.path and repo.head(again) == sha
    assert (again.path / "work.txt").read_text() == "done\n"


def test_the_users_own_worktree_away_for_a_while_is_never_forgotten(
    clone: Path, tmp_path: Path
) -> None:
    # A global `git worktree prune` ran whenever the harness tidied one of its own: a worktree
    # of the user's on a disk not mounted at the time lost its registration for good.
    mine = tmp_path / "mine"
    git(clone, "worktree", "add", "-q", str(mine), "-b", "my-feature")
    away = tmp_path / "mine.away"
    mine.rename(away)  # an unmounted disk
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / ".git").unlink()  # a broken worktree of the harness's: rebuilt
    repo.prepare("T1", "x")
    shutil.rmtree(repo.prepare("T2", "y").path)
    repo.discard("T2")
    away.rename(mine)
    assert git(mine, "rev-parse", "--abbrev-ref", "HEAD") == "my-feature"


def test_a_deleted_worktree_git_still_lists_is_added_again_with_its_commits(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "work.txt").write_text("done\n")
    sha = repo.commit_all(tree, "T1: x")
    shutil.rmtree(tree.path)  # git still lists the worktree
    again = repo.prepare("T1", "x")
    assert again.path == tree.path and repo.head(again) == sha and again.reused


def test_a_stale_listing_does_not_stop_a_new_branch(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    shutil.rmtree(tree.path)
    git(clone, "update-ref", "-d", f"refs/heads/{tree.branch}")  # nothing of it left but git's list
    again = repo.prepare("T1", "x")
    assert again.path == tree.path and again.branch == tree.branch
    assert git(again.path, "symbolic-ref", "--short", "HEAD") == tree.branch
    assert again.base_sha == git(clone, "rev-parse", "origin/main")


def test_a_healthy_worktree_is_reused_with_uncommitted_work(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "draft.txt").write_text("half done\n")
    again = repo.prepare("T1", "x")
    assert again.reused and (again.path / "draft.txt").exists()


def test_what_is_put_back_is_kept_first_as_a_patch_git_applies(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "work.txt").write_text("the agent's\n")
    (tree.path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    repo.commit_all(tree, "T1")
    # A person's edits while no run held the item, in text that is not UTF-8 as well.
    (tree.path / "work.txt").write_text("the agent's\nand a person's fix\n")
    (tree.path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    saved = clone.parent / "state" / "put-back.patch"
    assert repo.discard_uncommitted(tree, save_to=saved) == ["latin1.txt", "work.txt"]
    assert (tree.path / "work.txt").read_text() == "the agent's\n"
    git(tree.path, "apply", str(saved))
    assert (tree.path / "work.txt").read_text() == "the agent's\nand a person's fix\n"
    assert (tree.path / "latin1.txt").read_bytes() == "caf\xe9 cr\xe8me\n".encode("latin-1")


def test_nothing_is_put_back_when_no_copy_of_it_could_be_kept(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "work.txt").write_text("the agent's\n")
    repo.commit_all(tree, "T1")
    (tree.path / "work.txt").write_text("a person's fix\n")
    blocked = clone.parent / "a-file"
    blocked.write_text("where a folder was meant to be\n")
    with pytest.raises(GitError, match="cannot keep a copy"):
        repo.discard_uncommitted(tree, save_to=blocked / "put-back.patch")
    assert (tree.path / "work.txt").read_text() == "a person's fix\n"


def test_a_worktree_is_put_back_to_its_commit_keeping_what_git_ignores(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / ".gitignore").write_text(".venv/\n")
    (tree.path / "work.txt").write_text("the agent's\n")
    sha = repo.commit_all(tree, "T1")
    # What a check leaves: a rewrite, a report, a folder of output, and an ignored cache.
    (tree.path / "work.txt").write_text("reformatted\n")
    (tree.path / "out" / "cov").mkdir(parents=True)
    (tree.path / "out" / "cov" / "index.html").write_text("<html/>\n")
    (tree.path / "report.xml").write_text("<testsuite/>\n")
    (tree.path / ".venv").mkdir()
    (tree.path / ".venv" / "lib.py").write_text("kept\n")
    assert repo.discard_uncommitted(tree) == ["out/cov/index.html", "report.xml", "work.txt"]
    assert repo.head(tree) == sha and not repo.has_uncommitted(tree)
    assert (tree.path / "work.txt").read_text() == "the agent's\n"
    assert not (tree.path / "out").exists() and (tree.path / ".venv" / "lib.py").exists()
    assert repo.discard_uncommitted(tree) == []
    (clone / "mine.txt").write_text("a person's work in progress\n")
    with pytest.raises(WorktreeError, match="it is the clone"):
        repo.discard_uncommitted(replace(tree, path=clone))
    assert (clone / "mine.txt").exists()


def test_push_goes_to_the_item_branch_only(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "f.txt").write_text("x\n")
    repo.commit_all(tree, "T1")
    before = git(clone, "ls-remote", "origin", "main")
    repo.push(tree)
    assert git(clone, "ls-remote", "origin", "main") == before
    assert "refs/heads/agent-harness/T1-x" in git(clone, "ls-remote", "origin")
    from dataclasses import replace

    with pytest.raises(DefaultBranchGuard):
        repo.push(replace(tree, branch="main"))


def test_the_reviewed_commit_is_what_is_diffed_and_pushed_not_what_came_after(
    clone: Path,
) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "f.txt").write_text("reviewed\n")
    reviewed = repo.commit_all(tree, "T1")
    assert reviewed is not None
    (tree.path / "f.txt").write_text("later\n")
    (tree.path / "stray.txt").write_text("never committed\n")
    later = repo.commit_all(tree, "T1 again")
    (tree.path / "loose.txt").write_text("not even added\n")
    diff = repo.diff(tree, reviewed)
    assert "+reviewed" in diff and "later" not in diff and "stray" not in diff
    assert "loose" not in diff
    repo.push(tree, reviewed)
    remote = git(clone, "ls-remote", "origin", "refs/heads/agent-harness/T1-x").split()[0]
    assert remote == reviewed != later


def test_an_agent_that_left_its_branch_is_refused_naming_where_it_went(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    repo.verify_branch(tree)  # on its own branch: nothing to refuse
    git(tree.path, "checkout", "-q", "-b", "elsewhere")
    with pytest.raises(DefaultBranchGuard, match="on 'elsewhere' instead of agent-harness/T1-x"):
        repo.verify_branch(tree)
    git(tree.path, "checkout", "-q", "--detach")
    with pytest.raises(DefaultBranchGuard, match="on 'a detached HEAD'"):
        repo.verify_branch(tree)


def test_an_agent_that_moved_the_default_branch_is_refused(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "f.txt").write_text("x\n")
    git(tree.path, "add", "-A")
    git(tree.path, "commit", "-qm", "sneaky")
    git(tree.path, "update-ref", "refs/heads/main", "HEAD")
    with pytest.raises(DefaultBranchGuard, match="gained 1 commit"):
        repo.verify_branch(tree)


def test_a_later_look_at_the_clone_keeps_where_its_default_branch_stood_at_the_start(
    clone: Path,
) -> None:
    # A plan's run that ended looked at the clone again (the clone is shared by a fleet's
    # plans), and took the default branch's new place, an agent's commit on it, as the user's.
    repo = WorkRepo(clone, clone.parent / "state")
    repo.check_clean_default()
    tree = repo.prepare("T1", "x")
    (tree.path / "f.txt").write_text("x\n")
    git(tree.path, "add", "-A")
    git(tree.path, "commit", "-qm", "sneaky")
    git(tree.path, "update-ref", "refs/heads/main", "HEAD")
    from agent_harness.git.errors import CloneUnusable

    with pytest.raises(CloneUnusable):  # another plan of the clone ends, and says it changed
        repo.check_clean_default()
    with pytest.raises(DefaultBranchGuard, match="gained 1 commit"):
        repo.verify_branch(tree)


def test_a_state_dir_inside_the_clone_is_kept_out_of_git_status(clone: Path) -> None:
    repo = WorkRepo(clone, clone / ".agent-harness")
    repo.prepare("T1", "x")
    assert git(clone, "status", "--porcelain") == ""
    WorkRepo(clone, clone / ".agent-harness")  # a second open adds no second line
    exclude = (clone / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.agent-harness/") == 1


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "is not a directory"),
        ("plain", "is not a git repository"),
        ("empty", "has no commits yet"),
        ("no-remote", "has no remote 'origin'"),
        ("bare", "is a bare repository; give a clone with a work tree"),
    ],
)
def test_unusable_work_directories_are_clear_errors(
    tmp_path: Path, setup: str, message: str
) -> None:
    path = tmp_path / "w"
    if setup not in ("missing", "bare"):
        path.mkdir()
    if setup == "bare":
        git(tmp_path, "init", "-q", "--bare", str(path))
    if setup in ("empty", "no-remote"):
        git(path, "init", "-q")
    if setup == "no-remote":
        (path / "a").write_text("a")
        git(path, "add", "-A")
        git(path, "commit", "-qm", "a")
    with pytest.raises(WorktreeError, match=message) as refused:
        WorkRepo(path, tmp_path / "state")
    assert refused.value.exit_code == 2  # input to fix, as every other bad input


def test_an_edited_title_keeps_the_items_branch(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    first = repo.prepare("T1", "Count words")
    (first.path / "f.txt").write_text("x\n")
    repo.commit_all(first, "T1")
    again = repo.prepare("T1", "Count all the words")
    assert again.branch == first.branch == "agent-harness/T1-count-words"
    assert (again.path / "f.txt").exists()
    assert repo.prepare("T10", "Other").branch == "agent-harness/T10-other"


def test_an_item_never_takes_the_branch_of_an_item_whose_id_goes_on_from_its_own(
    clone: Path,
) -> None:
    """`T1-2`'s branch starts with `T1-`, and `3.1`'s (spelled `3-1`) with `3-`: neither is
    taken by `T1` or `3` starting out, or after a title edit. A title that starts with a word
    is still found again after an edit."""
    repo = WorkRepo(clone, clone.parent / "state")
    longer = repo.prepare("T1-2", "Split the words")
    sub = repo.prepare("3.1", "Add the endpoint")
    assert (longer.branch, sub.branch) == (
        "agent-harness/T1-2-split-the-words",
        "agent-harness/3-1-add-the-endpoint",
    )
    for item_id in ("T1", "3"):
        shutil.rmtree(clone.parent / "state" / "worktrees", ignore_errors=True)
        git(clone, "worktree", "prune")
        own = repo.prepare(item_id, "Count words")
        assert own.branch == f"agent-harness/{item_id}-count-words"
        assert repo.prepare(item_id, "Count all the words").branch == own.branch  # an edit
    # A title that starts with a number, edited: its worktree (with work not yet committed)
    # is the item's own, and so is the branch its history names once the worktree is gone.
    numbered = repo.prepare("T7", "2 columns")
    (numbered.path / "wip.txt").write_text("not committed yet\n")
    edited = repo.prepare("T7", "2 columns, responsive")
    assert edited.branch == numbered.branch == "agent-harness/T7-2-columns"
    assert (edited.path / "wip.txt").exists()
    shutil.rmtree(edited.path)
    git(clone, "worktree", "prune")
    again = repo.prepare("T7", "2 columns, responsive", known=numbered.branch)
    assert again.branch == numbered.branch


def test_a_retried_generation_starts_from_todays_default_and_fresh_discards_the_old(
    clone: Path,
) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    old = repo.prepare("T1", "x")
    (old.path / "work.txt").write_text("first try\n")
    old_sha = repo.commit_all(old, "T1: x")
    # Meanwhile the default branch moves on.
    other = clone.parent / "other"
    git(clone.parent, "clone", "-q", str(clone.parent / "origin.git"), str(other))
    (other / "NEWS.md").write_text("news\n")
    git(other, "add", "-A")
    git(other, "commit", "-qm", "news")
    git(other, "push", "-q", "origin", "main")

    repo = WorkRepo(clone, clone.parent / "state")  # a later run
    again = repo.prepare("T1", "x", generation=1)
    assert again.branch == "agent-harness/T1.r1-x" and again.path != old.path
    assert again.base_sha == git(clone, "rev-parse", "origin/main") != old.base_sha
    assert not (again.path / "work.txt").exists() and (again.path / "NEWS.md").exists()
    assert repo.head(repo.prepare("T1", "x")) == old_sha  # the first life is kept as it was

    removed = repo.discard("T1")
    assert str(old.path) in removed and "agent-harness/T1-x" in removed
    assert not old.path.exists()
    branches = git(clone, "branch", "--format=%(refname:short)", "--list", "agent-harness/*")
    assert branches.split() == ["agent-harness/T1.r1-x"]


def test_nothing_to_commit_is_none_in_any_locale(
    clone: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git translates "nothing to commit"; the harness must still recognise it.
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de")
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    assert repo.commit_all(tree, "T1: nothing") is None
    (tree.path / "f.txt").write_text("x\n")
    assert repo.commit_all(tree, "T1: something") == repo.head(tree)


@pytest.mark.parametrize(
    ("action", "words"),
    [
        # A commit refused for a reason other than "nothing to commit" is not swallowed.
        ("commit", "git commit --quiet failed in {path}: Aborting commit due to empty commit"),
        ("diff", "git diff --no-color failed in {path}: bad revision 'no-such-commit'"),
    ],
)
def test_a_git_failure_is_a_worktree_error_naming_command_place_and_reason(
    clone: Path, action: str, words: str
) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "f.txt").write_text("x\n")
    with pytest.raises(WorktreeError) as failed:
        if action == "commit":
            repo.commit_all(tree, "")
        else:
            repo.committed_diff(replace(tree, base_sha="no-such-commit"))
    assert failed.value.message.startswith(words.format(path=tree.path))


def test_a_deleted_worktree_is_an_error_not_a_question_put_to_another_repository(
    clone: Path,
) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    shutil.rmtree(tree.path)
    with pytest.raises(WorktreeError, match="no such directory"):
        repo.has_uncommitted(tree)


def with_a_submodule(clone: Path) -> Path:
    """A library repository beside `clone`, added to it (and pushed) as `vendor/lib`."""
    lib = clone.parent / "lib"
    git(clone.parent, "init", "-q", "--initial-branch=main", str(lib))
    (lib / "util.py").write_text("X = 1\n")
    git(lib, "add", "-A")
    git(lib, "commit", "-qm", "lib")
    git(clone, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib")
    git(clone, "commit", "-qm", "vendor lib")
    git(clone, "push", "-q", "origin", "main")
    return lib


def test_submodules_the_clone_has_are_checked_out_in_the_worktree_from_its_own_copies(
    clone: Path,
) -> None:
    from agent_harness.git import cleanup

    lib = with_a_submodule(clone)
    lib.rename(clone.parent / "lib-moved")  # its URL answers no more: no clone from there

    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "Use the lib")
    assert (tree.path / "vendor" / "lib" / "util.py").read_text() == "X = 1\n"
    assert git(clone, "config", "--get", "submodule.vendor/lib.url") == str(lib)  # as it was
    assert git(tree.path, "status", "--porcelain") == ""

    # ... and a finished item's worktree goes, submodule and all.
    [info] = cleanup.list_worktrees(repo)
    cleanup.remove(repo, replace(info, safe=True, reason=""))
    assert not tree.path.exists()


def test_a_submodule_name_a_branch_wrote_never_reaches_gits_command_line(clone: Path) -> None:
    # A branch's .gitmodules is the agent's: a name holding `=` set another setting through
    # `-c submodule.NAME.url=…`, an update command among them, run on the host.
    with_a_submodule(clone)
    before = (clone / ".git" / "config").read_text()
    planted = clone.parent / "PWNED"
    evil = f"lib.update=!touch${{IFS}}{planted};x"
    git(clone, "checkout", "-q", "-b", "agent-harness/T2-evil")
    text = (clone / ".gitmodules").read_text().replace('"vendor/lib"', f'"{evil}"')
    (clone / ".gitmodules").write_text(text)
    git(clone, "commit", "-qam", "rename")
    git(clone, "checkout", "-q", "main")

    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T2", "evil")
    assert tree.branch == "agent-harness/T2-evil"
    assert not planted.exists()
    assert (clone / ".git" / "config").read_text() == before
    assert not (tree.path / "vendor" / "lib" / "util.py").exists()  # a name the clone knows not


def test_a_dirty_default_branch_is_refused_by_its_files_but_the_plans_own_edit(
    clone: Path,
) -> None:
    (clone / "PLAN.md").write_text("### T1: x\nDo it.\n")
    (clone / "notes.txt").write_text("mine\n")
    git(clone, "add", "PLAN.md", "notes.txt")
    git(clone, "commit", "-qm", "plan")
    repo = WorkRepo(clone, clone.parent / "state")
    (clone / "PLAN.md").write_text("### T1: x\nDo it better.\n")  # the plan, read as it is
    repo.check_clean_default(allow=[clone / "PLAN.md"])
    with pytest.raises(WorktreeError, match=r"uncommitted changes on main \(PLAN\.md\)"):
        repo.check_clean_default()
    git(clone, "mv", "notes.txt", "kept notes.txt")  # the person's own work in progress
    with pytest.raises(WorktreeError) as refused:
        repo.check_clean_default(allow=[clone / "PLAN.md"])
    assert "(kept notes.txt, notes.txt)" in refused.value.message


def test_a_state_folder_holding_another_clones_worktrees_is_refused_before_any_item(
    tmp_path: Path,
) -> None:
    # Two repositories run from one folder: the second's N1 was worked in the first's worktree
    # of N1, then the run stopped blaming an agent for the clone's settings, at every rerun.
    from agent_harness.git.errors import CloneUnusable

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = seeded_clone(tmp_path / "a"), seeded_clone(tmp_path / "b")
    state = tmp_path / "state"
    WorkRepo(first, state).prepare("N1", "Write notes")
    own = WorkRepo(first, state)
    own.check_remote("o/a", str(tmp_path / "a" / "origin.git"))  # its own: taken
    with pytest.raises(CloneUnusable) as refused:
        WorkRepo(second, state).check_remote("o/b", str(tmp_path / "b" / "origin.git"))
    said = refused.value.message
    assert f"holds worktrees of another clone, {first.resolve()} (N1)" in said
    assert "AGENT_HARNESS_STATE_DIR" in said


def test_the_scan_reads_what_a_push_publishes_beside_content_commit_messages_and_names(
    clone: Path,
) -> None:
    # A token in a commit message, or as a file's name, was pushed: only added lines were read.
    from agent_harness.secrets.scan import scan_diff

    token = "ghp_" + "Q" * 36
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("S6", "Notes")
    (tree.path / "data").mkdir()
    (tree.path / "data" / f"{token}.txt").write_text("nothing here\n")
    git(tree.path, "add", "-A")
    git(tree.path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", f"note {token}")
    found = scan_diff(repo.committed_diff(tree), {token: "GH_TOKEN"})
    assert [f.describe() for f in found] == [
        "(file names):1 holds the value of GH_TOKEN",
        "(commits):2 holds the value of GH_TOKEN",
    ]


def test_files_larger_than_a_push_may_carry_are_named_with_their_sizes(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("C2", "Data")
    (tree.path / "huge.bin").write_bytes(bytes(range(256)) * 12)  # 3,072 bytes, binary
    (tree.path / "small.txt").write_text("fine\n")
    git(tree.path, "add", "-A")
    git(tree.path, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "data")
    sha = repo.head(tree)
    assert repo.large_files(tree, sha, 1000) == [("huge.bin", 3072)]
    assert repo.large_files(tree, sha, 5000) == []


def test_an_id_that_goes_on_from_another_never_takes_or_discards_that_ones_branch(
    clone: Path,
) -> None:
    # Cursor names todos in words: `bucket-store`'s branches start with `bucket-` too.
    repo = WorkRepo(clone, clone.parent / "state")
    store = repo.prepare("bucket-store", "Add buckets.py")
    (store.path / "buckets.py").write_text("BUCKETS = {}\n")
    store_sha = repo.commit_all(store, "bucket-store: Add buckets.py")
    plan_ids = ["bucket-store", "bucket"]

    def others(me: str) -> list[str]:
        return [i for i in plan_ids if i != me]

    mine = repo.prepare("bucket", "Zones", others=lambda: others("bucket"))
    assert mine.branch == "agent-harness/bucket-zones" and not mine.reused
    assert not (mine.path / "buckets.py").exists()
    # Its worktree gone and its title edited since, the branch is found by the item's prefix
    # alone, where `bucket-store-…` sorts first: still the item's own.
    shutil.rmtree(mine.path)
    repo.forget_worktree(mine.path)
    again = repo.prepare("bucket", "Zone rules", others=lambda: others("bucket"))
    assert again.branch == mine.branch and again.reused

    removed = repo.discard("bucket", others=others("bucket"))  # `work retry --fresh bucket`
    assert "agent-harness/bucket-zones" in removed
    assert "agent-harness/bucket-store-add-buckets-py" not in removed
    assert git(clone, "rev-parse", "agent-harness/bucket-store-add-buckets-py") == store_sha
