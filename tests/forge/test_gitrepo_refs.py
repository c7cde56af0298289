"""The forge's refs, read from the repository's files as `git for-each-ref` lists them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.forge.gitrepo import BareRepo
from tests.shared.git import git, noted_git

pytestmark = pytest.mark.integration


def listing(bare: Path, pattern: str) -> dict[str, str]:
    out = git(bare, "--git-dir", str(bare), "for-each-ref", "--format=%(refname) %(objectname)",
              pattern)  # fmt: skip
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_one_ref_asked_by_its_full_name_is_read_from_files_as_git_lists_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GitHub's `git/ref/heads/main`, and the forge's own checks before it makes, moves or
    # deletes a ref, ask for one ref by its full name: each of those started a git process.
    bare, work = tmp_path / "repo.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(bare))
    git(tmp_path, "clone", "-q", str(bare), str(work))
    git(work, "commit", "-q", "--allow-empty", "-m", "first")
    for branch in ("main", "ma/x", "mainline"):
        git(work, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
    git(work, "push", "-q", "origin", "HEAD:refs/tags/v1")
    git(work, "tag", "-a", "-m", "release", "v2")  # names a tag object, not the commit
    git(work, "push", "-q", "origin", "refs/tags/v2")
    git(bare, "--git-dir", str(bare), "pack-refs", "--all")  # some packed, one loose after
    git(work, "push", "-q", "origin", "HEAD:refs/heads/ma/y")
    asked = ("refs/heads/main", "refs/heads/ma", "refs/heads/mai", "refs/heads/none",
             "refs/heads/MAIN", "refs/tags/v1", "refs/tags/v2", "refs/heads/")  # fmt: skip
    expected = {pattern: listing(bare, pattern) for pattern in asked}
    assert len(expected["refs/heads/ma"]) == 2 and len(expected["refs/heads/main"]) == 1
    calls = noted_git(tmp_path, monkeypatch)
    repo = BareRepo(bare)
    assert {pattern: repo.refs(pattern) for pattern in asked} == expected
    assert not calls.exists(), calls.read_text()
