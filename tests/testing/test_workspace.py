"""The in-memory workspace behaves as the real one does, on the questions the pipeline asks.

The same contract runs against `WorkRepo` on real git (integration) and `MemoryWorkspace`
(unit), so the fake cannot drift from what it stands in for.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_harness.git.errors import DefaultBranchGuard
from agent_harness.git.workspace import Workspace
from agent_harness.git.worktrees import WorkRepo, Worktree
from agent_harness.secrets.scan import scan_diff
from agent_harness.testing.workspace import MemoryWorkspace


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def real(tmp: Path) -> Workspace:
    bare, seed, work = tmp / "origin.git", tmp / "seed", tmp / "work"
    _git(tmp, "init", "-q", "--bare", "--initial-branch=main", str(bare))
    _git(tmp, "init", "-q", "--initial-branch=main", str(seed))
    (seed / "README.md").write_text("a project\n")
    _git(seed, "add", "-A")
    _git(seed, "commit", "-qm", "first")
    _git(seed, "push", "-q", str(bare), "main")
    _git(tmp, "clone", "-q", str(bare), str(work))
    return WorkRepo(work, tmp / "state")


def memory(tmp: Path) -> Workspace:
    return MemoryWorkspace(tmp / "state", {"README.md": b"a project\n"})


KINDS = [
    pytest.param(real, marks=pytest.mark.integration, id="git"),
    pytest.param(memory, marks=pytest.mark.unit, id="memory"),
]


@pytest.fixture(params=KINDS)
def space(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    make: Callable[[Path], Workspace] = request.param
    workspace = make(tmp_path)
    workspace.set_default_branch("main")
    return workspace


def test_a_worktree_starts_from_the_default_branch_on_its_own(space: Workspace) -> None:
    tree = space.prepare("T1", "Count words")
    assert tree.branch == "agent-harness/T1-count-words" and not tree.reused
    assert (tree.path / "README.md").read_text() == "a project\n"
    assert space.head(tree) == tree.base_sha and not space.has_uncommitted(tree)
    assert space.commit_all(tree, "nothing") is None


def test_a_change_is_committed_diffed_and_listed(space: Workspace) -> None:
    tree = space.prepare("T1", "Count words")
    (tree.path / "words.py").write_text("def count():\n    return 1\n")
    assert space.has_uncommitted(tree)
    assert space.changed_paths(tree) == ["words.py"]
    sha = space.commit_all(tree, "T1: Count words")
    assert sha is not None and sha != tree.base_sha and space.head(tree) == sha
    # Of the commit, only what it holds: a later edit is in the worktree's list, not the commit's.
    (tree.path / "notes.txt").write_text("later\n")
    assert space.changed_paths(tree) == ["notes.txt", "words.py"]
    assert space.changed_paths(tree, sha) == ["words.py"]
    diff = space.diff(tree, sha)
    assert "+def count():" in diff and "later" not in diff
    (tree.path / "notes.txt").unlink()
    added = [line for line in space.committed_diff(tree).splitlines() if line.startswith("+")]
    where = added.index("+def count():")
    assert added[where : where + 2] == ["+def count():", "+    return 1"]
    again = space.prepare("T1", "Count words")
    assert again.reused and space.head(again) == sha  # the commit is never lost


def test_a_binary_file_is_scanned_not_shown_and_a_rename_names_both_paths(
    space: Workspace,
) -> None:
    tree = space.prepare("T1", "Add a logo")
    (tree.path / "logo.bin").write_bytes(b"\x89PNG\x00\x01\nkey=sk-binary-canary-42\n\x00")
    (tree.path / "README.md").rename(tree.path / "READ.md")
    sha = space.commit_all(tree, "T1: Add a logo")
    assert sha is not None
    # Either side of a rename may be a protected path.
    assert space.changed_paths(tree, sha) == ["READ.md", "README.md", "logo.bin"]
    diff = space.diff(tree, sha)
    assert "Binary files" in diff and "sk-binary-canary-42" not in diff  # not for a reviewer
    found = scan_diff(space.committed_diff(tree), {"sk-binary-canary-42": "THE_KEY"})
    assert [(hit.path, hit.what) for hit in found] == [("logo.bin", "the value of THE_KEY")]


def test_a_diff_of_bytes_that_are_not_utf8_is_still_text_a_request_can_carry(
    space: Workspace,
) -> None:
    tree = space.prepare("T1", "Latin-1")
    (tree.path / "latin1.py").write_bytes(b"caf\xe9 = 1\n")
    sha = space.commit_all(tree, "T1: Latin-1")
    assert sha is not None
    diff = space.diff(tree, sha)
    diff.encode("utf-8")  # strict: what a JSON request body needs
    assert "caf\ufffd = 1" in diff


def test_the_push_guard_refuses_the_default_branch(space: Workspace) -> None:
    tree = space.prepare("T1", "Count words")
    (tree.path / "x.txt").write_text("x\n")
    space.commit_all(tree, "x")
    space.push(tree)
    sneaky = Worktree("T1", tree.path, "main", tree.base_sha)
    with pytest.raises(DefaultBranchGuard):
        space.push(sneaky)


def test_two_plans_get_separate_branches(space: Workspace) -> None:
    first = space.prepare("T1", "Count words")
    other = space.prepare("T1", "Count words", namespace="docs")
    assert first.branch != other.branch and first.path != other.path
