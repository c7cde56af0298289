"""Refs read from the repository's files answer as git does, and say when they cannot."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_harness.git.refs import RefFiles, Unreadable
from tests.shared.git import git

pytestmark = pytest.mark.integration


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(bare))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(bare), str(work))
    (work / "a.txt").write_text("a\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "first")
    git(work, "push", "-q", "origin", "main")
    git(work, "fetch", "-q")
    return work


def gits_answer(where: Path, name: str) -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", name], cwd=where, capture_output=True, text=True
    )
    return done.stdout.strip() or None


def test_a_linked_worktree_reads_its_own_head_and_the_shared_branches(
    clone: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    git(clone, "worktree", "add", "-q", "-b", "agent-harness/T1-x", str(tree), "origin/main")
    (tree / "b.txt").write_text("b\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-qm", "second")
    files = RefFiles(tree)
    assert files.head() == ("refs/heads/agent-harness/T1-x", gits_answer(tree, "HEAD"))
    for name in ("refs/heads/main", "refs/remotes/origin/main", "refs/remotes/origin/HEAD"):
        assert files.resolve(name) == gits_answer(tree, name), name
    assert files.resolve("refs/heads/no-such-branch") is None


def test_packed_refs_and_a_detached_head_read_as_git_reads_them(clone: Path) -> None:
    git(clone, "pack-refs", "--all")
    assert not (clone / ".git" / "refs" / "heads" / "main").exists()
    files = RefFiles(clone)
    assert files.resolve("refs/heads/main") == gits_answer(clone, "refs/heads/main")
    git(clone, "checkout", "-q", "--detach")
    assert RefFiles(clone).head() == (None, gits_answer(clone, "HEAD"))


def test_a_branch_with_no_commit_yet_has_no_head_commit(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "--initial-branch=main", "fresh")
    assert RefFiles(tmp_path / "fresh").head() == ("refs/heads/main", None)


def test_what_does_not_read_as_a_ref_sends_the_caller_to_git(clone: Path, tmp_path: Path) -> None:
    (clone / ".git" / "refs" / "heads" / "odd").write_text("not a commit id\n")
    with pytest.raises(Unreadable):
        RefFiles(clone).resolve("refs/heads/odd")
    with pytest.raises(Unreadable):
        RefFiles(clone).resolve("refs/heads/../../config")
    (clone / ".git" / "reftable").mkdir()
    with pytest.raises(Unreadable):
        RefFiles(clone)
    with pytest.raises(Unreadable):
        RefFiles(tmp_path)  # no repository at all


def gits_listing(where: Path, *patterns: str) -> dict[str, str]:
    out = git(where, "for-each-ref", "--format=%(refname) %(objectname)", *patterns)
    return dict(line.split(" ") for line in out.splitlines())


def test_a_listing_by_prefix_matches_for_each_ref_loose_and_packed(clone: Path) -> None:
    for branch in ("agent-harness/T1-a", "agent-harness/T1-b", "agent-harness/T10-c"):
        git(clone, "branch", branch)
    git(clone, "branch", "agent-harness/T1-deeper/x")  # * does not cross a /
    git(clone, "push", "-q", "origin", "agent-harness/T1-a")
    git(clone, "pack-refs", "--all")
    git(clone, "branch", "agent-harness/T1-loose")  # written after the packing: a loose file
    (clone / ".git" / "refs" / "heads" / "agent-harness" / "T1-z.lock").write_text("x\n")
    patterns = (
        "refs/heads/agent-harness/T1-*",
        "refs/remotes/origin/agent-harness/T1-*",
        "refs/heads/main",
        "refs/remotes/origin/main",
    )
    files = RefFiles(clone)
    listed = files.matching(*patterns)
    assert listed == gits_listing(clone, *patterns)
    assert "refs/heads/agent-harness/T1-loose" in listed and len(listed) == 6
    assert files.matching("refs/heads/agent-harness/T9-*") == {}
    with pytest.raises(Unreadable):
        files.matching("refs/heads/*/T1-*")


def test_a_folder_of_branches_asked_for_as_a_branch_is_none_not_a_call_to_git(
    clone: Path,
) -> None:
    # Every item asks whether `agent-harness` is a branch (it would block the folder): once
    # the first item's branch is made, that name is a folder of loose refs.
    git(clone, "branch", "agent-harness/T1-a")
    patterns = ("refs/heads/agent-harness/T1-*", "refs/heads/agent-harness")
    files = RefFiles(clone)
    assert files.matching(*patterns) == gits_listing(clone, *patterns)
    assert files.resolve("refs/heads/agent-harness") is None
    git(clone, "pack-refs", "--all")  # packed, the folder may stay behind, empty
    (clone / ".git" / "refs" / "heads" / "agent-harness").mkdir(exist_ok=True)
    assert RefFiles(clone).matching(*patterns) == gits_listing(clone, *patterns)


def test_a_bare_repositorys_folder_of_refs_lists_as_for_each_ref_lists_it(
    clone: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "origin.git"
    for branch in ("agent-harness/T1-a", "agent-harness/docs/T2-b", "z"):
        git(clone, "push", "-q", "origin", f"main:refs/heads/{branch}")
    git(bare, "pack-refs", "--all")
    git(clone, "push", "-q", "origin", "main:refs/heads/after-packing")
    files = RefFiles(bare, bare=True)
    assert files.under("refs/heads/") == gits_listing(bare, "refs/heads/")
    assert len(files.under("refs/heads/")) == 5
    assert files.under("refs/heads/agent-harness/") == gits_listing(
        bare, "refs/heads/agent-harness/"
    )
    assert files.resolve("refs/heads/z") == gits_answer(bare, "refs/heads/z")
    with pytest.raises(Unreadable):
        files.under("refs/heads")  # a folder ends in /


@pytest.mark.parametrize(
    "name", ["refs/heads/./main", "refs/heads//main", "refs/heads/main/", "refs/heads/main.lock"]
)
def test_a_name_git_would_refuse_is_never_answered_from_a_file_that_reads_alike(
    clone: Path, name: str
) -> None:
    # The file system reads these as refs/heads/main (or a lock file); git takes none of them.
    (clone / ".git" / "refs" / "heads" / "main.lock").write_text(gits_answer(clone, "HEAD") or "")
    with pytest.raises(Unreadable):
        RefFiles(clone).resolve(name)
    assert gits_answer(clone, name) is None


def test_the_forge_answers_a_branch_name_git_refuses_as_git_does(
    clone: Path, tmp_path: Path
) -> None:
    from agent_harness.forge.gitrepo import BareRepo

    bare = BareRepo(tmp_path / "origin.git")
    assert bare.resolve("main") == gits_answer(clone, "refs/remotes/origin/main")
    for odd in ("main/", "./main", "heads/../main"):
        assert bare.resolve(odd) is None, odd
