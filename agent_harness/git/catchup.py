"""An item's branch against its pushed head: brought up to it when another run of the harness
moved it (a host that took the item over, a later round on another host), left alone when a
person did (`foreign_head`), so nothing is ever pushed over a person's commit."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from agent_harness.git.runner import GitResult

Git = Callable[..., str]  # runs git in a folder, its output
RepoGit = Callable[..., GitResult]  # the same, its result whole (`check=False` to read a no)


def foreign_head(
    repo_git: RepoGit,
    repo: Path,
    pushed: str | None,
    local: str | None,
    ours: Collection[str] | None,
) -> str | None:
    """The pushed head, when `ours` (the heads harness runs pushed) is given and it is none of
    them nor already in the local branch (a run killed after its push, before it noted it): a
    commit a person pushed, which a worktree is not moved up to and nothing is pushed over."""
    if ours is None or pushed is None or pushed in ours or pushed == local:
        return None
    if local is None:
        return pushed
    within = repo_git(repo, "merge-base", "--is-ancestor", pushed, local, check=False)
    return None if within.ok else pushed


def catch_up(
    git: Git, repo_git: RepoGit, path: Path, branch: str, pushed_sha: str | None
) -> str | None:
    """Bring a clean worktree's branch onto its pushed head, which another clone may have
    moved, so its next push adds to the newest work instead of being refused on every retry:

    - behind the pushed head: moved up to it;
    - ahead of it: left, its push adds to it;
    - both (commits of its own and the pushed head has others): its own commits are replayed
      on top of the pushed head; when they do not apply, they are kept under a ref of their
      own, whose name is returned, and the branch is set to the pushed head.

    A worktree with uncommitted changes is left as it is."""
    if pushed_sha is None:
        return None
    head = git(path, "rev-parse", "HEAD")
    if head == pushed_sha or git(path, "status", "--porcelain").strip():
        return None
    if repo_git(path, "merge-base", "--is-ancestor", "HEAD", pushed_sha, check=False).ok:
        git(path, "merge", "--ff-only", "--quiet", pushed_sha)
        return None
    if repo_git(path, "merge-base", "--is-ancestor", pushed_sha, "HEAD", check=False).ok:
        return None
    who = ("-c", "user.name=agent-harness", "-c", "user.email=agent-harness@localhost")
    # --rebase-merges: a merge of the base made here (update_from_base) stays a merge,
    # instead of the base's commits being copied onto the item's branch.
    rebase = ("rebase", "--quiet", "--rebase-merges", pushed_sha)
    if repo_git(path, *who, *rebase, check=False).ok:
        return None
    repo_git(path, "rebase", "--abort", check=False)
    kept = f"refs/agent-harness/kept/{branch}/{head[:12]}"
    git(path, "update-ref", kept, head)
    git(path, "reset", "--hard", "--quiet", pushed_sha)
    return kept
