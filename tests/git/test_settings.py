"""The clone's git settings and hooks, held to what they were before any agent ran (real git)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_harness.git.settings import GitSettingsChanged
from agent_harness.git.worktrees import WorkRepo, Worktree
from tests.shared.git import git, seeded_clone

pytestmark = pytest.mark.integration


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The user's own settings live in a home of this test, so they can be changed too.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    return seeded_clone(tmp_path)


def changed(repo: WorkRepo) -> str:
    with pytest.raises(GitSettingsChanged) as raised:
        repo.settings.check()
    return raised.value.message


def test_settings_an_agent_may_write_harmlessly_are_taken_as_the_new_normal(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    git(clone, "config", "user.email", "agent@example.com")
    git(clone, "config", "color.ui", "always")
    git(clone, "branch", "--track", "old-style", "origin/main")  # writes its upstream
    repo.settings.check()
    git(clone, "branch", "-D", "old-style")  # and removes it again
    repo.settings.check()


def test_attributes_written_into_the_clones_git_directory_are_a_change(clone: Path) -> None:
    # They steer every git command of ours (a filter's program runs at `git add`) and which
    # markers the conflict gate counts; a person's own, there before the run, stay as they are.
    info = clone / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text("*.bin binary\n")
    repo = WorkRepo(clone, clone.parent / "state")
    repo.settings.check()
    (info / "attributes").write_text("*.bin binary\n* conflict-marker-size=99\n")
    assert ".git/info/attributes: changed" in changed(repo)


def test_the_users_own_attributes_file_written_during_the_run_is_a_change(
    clone: Path, tmp_path: Path
) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    repo.settings.check()
    mine = tmp_path / "home" / ".config" / "git" / "attributes"
    mine.parent.mkdir(parents=True)
    mine.write_text("* merge=ours\n")
    assert f"{mine}: changed" in changed(repo)


def test_the_users_own_settings_and_what_they_include_are_watched_too(
    clone: Path, tmp_path: Path
) -> None:
    included = tmp_path / "more.gitconfig"
    included.write_text("[color]\n\tui = auto\n")
    (tmp_path / "home" / ".gitconfig").write_text(f"[include]\n\tpath = {included}\n")
    repo = WorkRepo(clone, clone.parent / "state")
    included.write_text("[core]\n\tsshCommand = /tmp/steal\n")
    message = changed(repo)
    assert f"{included}: core.sshcommand" in message
    assert "/tmp/steal" not in message  # never a setting's value: it may be a credential

    (tmp_path / "home" / ".gitconfig").write_text("[credential]\n\thelper = /tmp/steal\n")
    message = changed(repo)
    assert "credential.helper" in message and "include.path" in message


def test_a_setting_written_into_a_file_that_did_not_exist_is_found(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    xdg = Path(os.environ["HOME"]) / ".config" / "git"
    xdg.mkdir(parents=True)
    (xdg / "config").write_text('[url "https://elsewhere.example/"]\n\tpushInsteadOf = /\n')
    assert "url.https://elsewhere.example/.pushinsteadof" in changed(repo)


def marking_hook(path: Path, mark: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch {mark}\n")
    path.chmod(0o755)


def test_the_users_hooks_run_and_one_an_agent_changes_stops_before_it_runs(
    clone: Path, tmp_path: Path
) -> None:
    hooks = clone / ".git" / "hooks"
    marking_hook(hooks / "post-commit", tmp_path / "users-hook-ran")
    (hooks / "lib").mkdir()  # a helper beside it, as husky keeps one, runs from where it is
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "a.txt").write_text("a\n")
    repo.commit_all(tree, "T1: x")
    assert (tmp_path / "users-hook-ran").exists()
    # `pre-commit install` writes a hook no git command of the harness runs: nothing to stop.
    marking_hook(hooks / "pre-commit", tmp_path / "pre-commit-ran")
    repo.settings.check(tree.path)
    before = (hooks / "post-commit").stat()
    marking_hook(hooks / "post-commit", tmp_path / "agents-hook-ran")  # changed in place ...
    os.utime(hooks / "post-commit", ns=(before.st_atime_ns, before.st_mtime_ns))  # ... hidden
    (tree.path / "b.txt").write_text("b\n")
    with pytest.raises(GitSettingsChanged, match=r"\.git/hooks/post-commit \(changed\)"):
        repo.commit_all(tree, "T1: x")
    assert not (tmp_path / "agents-hook-ran").exists()


def sparse_worktree(clone: Path) -> tuple[WorkRepo, Worktree, Path]:
    """An item's worktree in a sparse clone, one commit made (its settings read as normal),
    and its folder in the clone's git directory (which holds its own `config.worktree`)."""
    # `git worktree add` copies a sparse checkout's settings into the worktree's own file.
    git(clone, "sparse-checkout", "init", "--cone")
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "a.txt").write_text("a\n")
    assert repo.commit_all(tree, "T1: x") is not None
    return repo, tree, Path(git(tree.path, "rev-parse", "--absolute-git-dir"))


def test_a_worktrees_own_settings_as_git_made_them_are_its_normal(clone: Path) -> None:
    repo, tree, admin = sparse_worktree(clone)
    git(tree.path, "config", "--file", str(admin / "config.worktree"), "core.sshCommand", "x")
    with pytest.raises(GitSettingsChanged, match=r"config\.worktree: core\.sshcommand"):
        repo.commit_all(tree, "T1: x")


def test_a_worktree_setting_written_back_with_its_old_size_and_time_is_still_found(
    clone: Path,
) -> None:
    # The links of a worktree found sound are not read again while their files' stats stay
    # the same: an agent that rewrites one and sets its time back must still be seen.
    repo, tree, admin = sparse_worktree(clone)
    settings = admin / "config.worktree"
    before = settings.stat()
    text = settings.read_text()
    planted = "[core]\n\tsshCommand = x\n"
    pad = len(text) - len(planted) - 1
    settings.write_text(planted + "#" * pad + "\n" if pad >= 0 else planted)
    os.utime(settings, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(GitSettingsChanged, match=r"config\.worktree: core\.sshcommand"):
        repo.commit_all(tree, "T1: x")


def test_a_hooks_path_relative_to_each_worktree_runs_the_clones_not_the_agents(
    clone: Path, tmp_path: Path
) -> None:
    # husky's `core.hooksPath = .husky/_` is read in each worktree, from the agent's own files.
    marking_hook(clone / ".husky" / "_" / "pre-push", tmp_path / "clones-hook-ran")
    git(clone, "config", "core.hooksPath", ".husky/_")
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    marking_hook(tree.path / ".husky" / "_" / "pre-push", tmp_path / "agents-hook-ran")
    repo.commit_all(tree, "T1: x")
    repo.push(tree)
    assert (tmp_path / "clones-hook-ran").exists()
    assert not (tmp_path / "agents-hook-ran").exists()


@pytest.mark.parametrize("when", ["include.path", "includeIf.onbranch:agent-harness/**.path"])
def test_a_file_the_settings_include_is_watched_even_before_it_exists(
    clone: Path, tmp_path: Path, when: str
) -> None:
    later = tmp_path / "later.gitconfig"
    git(clone, "config", when, str(later))
    repo = WorkRepo(clone, clone.parent / "state")
    later.write_text('[remote "origin"]\n\tpushurl = /tmp/elsewhere\n')
    assert f"{later}: remote.origin.pushurl" in changed(repo)


def test_a_fifo_where_settings_are_read_is_a_change_not_a_hang(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    os.mkfifo(clone / ".git" / "config.worktree")
    assert ".git/config.worktree: (the file does not read as git settings)" in changed(repo)


def test_a_token_in_a_settings_name_is_never_shown(clone: Path) -> None:
    base = "https://x-access-token:ghp_secret123@github.com/"
    git(clone, "config", f"url.{base}.insteadOf", "https://github.com/")
    repo = WorkRepo(clone, clone.parent / "state")
    git(clone, "config", "--unset", f"url.{base}.insteadOf")
    message = changed(repo)
    assert "url.https://***@github.com/.insteadof" in message
    assert "ghp_secret123" not in message


def test_a_template_folder_is_not_a_harmless_setting(clone: Path) -> None:
    # `git init` copies a template's settings (a reviewer's workspace is made so).
    repo = WorkRepo(clone, clone.parent / "state")
    git(clone, "config", "--global", "init.templateDir", "/tmp/templates")
    assert "init.templatedir" in changed(repo)


def test_the_users_file_is_watched_without_a_home(
    clone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOME")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    repo = WorkRepo(clone, clone.parent / "state")
    (tmp_path / "xdg" / "git").mkdir(parents=True)
    (tmp_path / "xdg" / "git" / "config").write_text("[core]\n\tsshCommand = /tmp/x\n")
    assert "core.sshcommand" in changed(repo)


def test_a_change_that_is_found_stays_found_until_put_back(clone: Path) -> None:
    repo = WorkRepo(clone, clone.parent / "state")
    git(clone, "config", "core.fsmonitor", "/tmp/watch")
    assert "core.fsmonitor" in changed(repo)
    assert "core.fsmonitor" in changed(repo)  # every worker is stopped, not only the first
    git(clone, "config", "--unset", "core.fsmonitor")
    repo.settings.check()


def test_worktrees_the_harness_makes_leave_the_clones_settings_as_they_were(clone: Path) -> None:
    before = (clone / ".git" / "config").read_bytes()
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / "a.txt").write_text("a\n")
    repo.commit_all(tree, "T1: x")
    repo.push(tree)
    repo.discard("T1")
    again = repo.prepare("T1", "x", pushed=True)  # made from the pushed branch: no upstream
    assert again.reused and (again.path / "a.txt").exists()
    assert (clone / ".git" / "config").read_bytes() == before


def test_what_is_reviewed_and_scanned_is_the_file_not_a_textconv_of_it(clone: Path) -> None:
    # A diff driver of the user's own (set before the run) would show a converted file: the
    # reviewer and the secret scan must read what is pushed.
    git(clone, "config", "diff.hide.textconv", "sh -c 'echo nothing to see'")
    repo = WorkRepo(clone, clone.parent / "state")
    tree = repo.prepare("T1", "x")
    (tree.path / ".gitattributes").write_text("*.conf diff=hide\n")
    (tree.path / "app.conf").write_text("token = real-content\n")
    sha = repo.commit_all(tree, "T1: x")
    assert sha is not None
    assert "+token = real-content" in repo.diff(tree, sha)
    assert "nothing to see" not in repo.committed_diff(tree)
