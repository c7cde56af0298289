"""Worktree cleanup: list the per-item worktrees with their size, and remove the finished ones.

A worktree (and its local branch) is removed only when nothing can be lost: the item is merged or
closed, the worktree has no uncommitted changes, and every commit on its branch is reachable from
a remote-tracking ref (or is exactly the head of the pull request the tracker says was merged).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_harness.git.worktrees import WorkRepo, WorktreeError, item_of_dir_name, repo_git

FINISHED = frozenset({"merged", "closed"})


@dataclass(frozen=True)
class WorktreeInfo:
    """One harness worktree as it stands on disk."""

    item_id: str
    path: Path
    branch: str | None
    size_bytes: int
    state: str | None  # the item's queue state; None when the queue does not know the item
    unpushed: int  # commits on the branch that no remote-tracking ref contains
    dirty: bool
    safe: bool
    reason: str

    def as_json(self) -> dict[str, object]:
        return {
            "item": self.item_id,
            "path": str(self.path),
            "branch": self.branch,
            "size_bytes": self.size_bytes,
            "state": self.state,
            "unpushed": self.unpushed,
            "dirty": self.dirty,
            "safe": self.safe,
            "reason": self.reason,
        }


@dataclass
class PruneReport:
    removed: list[WorktreeInfo] = field(default_factory=list)
    kept: list[WorktreeInfo] = field(default_factory=list)
    dry_run: bool = False

    @property
    def freed_bytes(self) -> int:
        return sum(info.size_bytes for info in self.removed)


def _git(cwd: Path, *args: str, check: bool = True) -> str:
    # A listing or a removal is quick: two minutes is already a hung git.
    return repo_git(cwd, *args, check=check, timeout_s=120.0).stdout.strip()


def disk_size(path: Path) -> int:
    """Bytes of the files under `path`, symlinks not followed."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # vanished while we walked: it takes no room any more
    return total


def _registered(repo: WorkRepo) -> dict[Path, str | None]:
    """Worktrees git knows under the harness's directory: path -> branch (None if detached)."""
    out: dict[Path, str | None] = {}
    base = repo.worktrees_dir.resolve()
    path: Path | None = None
    for line in _git(repo.path, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            path = Path(line.removeprefix("worktree ")).resolve()
            if path.parent == base:
                out[path] = None
        elif line.startswith("branch ") and path in out:
            out[path] = line.removeprefix("branch refs/heads/")
    return out


def assess(
    repo: WorkRepo, path: Path, branch: str | None, state: str | None, merged_head: str | None
) -> WorktreeInfo:
    """Everything needed to decide whether one worktree may go."""
    item_id = item_of_dir_name(path.name)
    size = disk_size(path) if path.is_dir() else 0
    dirty = bool(path.is_dir() and _git(path, "status", "--porcelain", check=False))
    unpushed = 0
    tip = None
    if branch is not None:
        tip = _git(repo.path, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False)
        listed = _git(repo.path, "rev-list", "--count", branch, "--not", f"--remotes={repo.remote}")
        unpushed = int(listed or 0)
    if state not in FINISHED:
        reason = f"item is {state}" if state else "item state unknown (not in the queue)"
        safe = False
    elif dirty:
        safe, reason = False, "uncommitted changes in the worktree"
    elif branch is None:
        safe, reason = False, "detached HEAD: no branch to check against the remote"
    elif unpushed and not (merged_head and tip == merged_head):
        safe, reason = False, f"{unpushed} commit(s) not on the remote"
    else:
        safe, reason = True, f"{state}; every commit is on the remote"
    return WorktreeInfo(item_id, path, branch, size, state, unpushed, dirty, safe, reason)


def list_worktrees(
    repo: WorkRepo,
    states: Mapping[str, str] | None = None,
    merged_heads: Mapping[str, str] | None = None,
) -> list[WorktreeInfo]:
    """Every harness worktree, with size, item state and whether removing it is safe.

    `states` maps item id -> queue state; `merged_heads` maps item id -> head sha of its merged
    pull request (a squash merge leaves the branch's commits off every remote ref).
    """
    repo.fetch()
    known = _registered(repo)
    if repo.worktrees_dir.is_dir():
        for child in repo.worktrees_dir.iterdir():
            if child.is_dir() and child.resolve() not in known:
                known[child.resolve()] = None  # left behind by a crash: still takes room
    states = states or {}
    merged_heads = merged_heads or {}
    return [
        assess(repo, path, branch, states.get(path.name), merged_heads.get(path.name))
        for path, branch in sorted(known.items())
    ]


def remove(repo: WorkRepo, info: WorktreeInfo) -> None:
    """Remove a worktree judged safe, and its local branch."""
    if not info.safe:
        raise WorktreeError(f"refusing to remove {info.path}: {info.reason}")
    if info.path.is_dir():
        _git(repo.path, "worktree", "remove", str(info.path))
    _git(repo.path, "worktree", "prune")
    if info.branch is not None:
        # -D: a squash merge never makes the branch "merged" in git's eyes; we checked the remote.
        _git(repo.path, "branch", "-D", info.branch)


def prune(repo: WorkRepo, infos: list[WorktreeInfo], dry_run: bool = False) -> PruneReport:
    report = PruneReport(dry_run=dry_run)
    for info in infos:
        if not info.safe:
            report.kept.append(info)
            continue
        if not dry_run:
            remove(repo, info)
        report.removed.append(info)
    return report


def clean_items(
    repo: WorkRepo, states: Mapping[str, str], merged_heads: Mapping[str, str] | None = None
) -> PruneReport:
    """Remove the worktrees of the items in `states` that are safe to remove; keep the rest."""
    infos = [i for i in list_worktrees(repo, states, merged_heads) if i.item_id in states]
    return prune(repo, infos)
