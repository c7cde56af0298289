"""Worktree cleanup: list the per-item worktrees with their size, and remove the finished ones.

A worktree (and its local branch) is removed only when nothing can be lost: the item is merged or
closed, the worktree has no uncommitted changes, and every commit on its branch is reachable from
a remote-tracking ref (or is exactly the head of the pull request the tracker says was merged).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_harness.git.errors import WorktreeError
from agent_harness.git.naming import item_of_dir_name, plan_namespace, worktree_dir_name
from agent_harness.git.worktrees import WorkRepo, repo_git

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
    """Bytes the files under `path` take on disk (the blocks allocated, so a sparse file of a
    terabyte counts what it holds, not its length), symlinks not followed."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
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
    repo: WorkRepo,
    path: Path,
    branch: str | None,
    state: str | None,
    merged_head: str | None,
    item_id: str | None = None,
) -> WorktreeInfo:
    """Everything needed to decide whether one worktree may go (`item_id`: whose it is, when
    known; else as its directory spells it)."""
    item_id = item_id or item_of_dir_name(path.name)
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
    namespace: str = "",
) -> list[WorktreeInfo]:
    """Every harness worktree, with size, item state and whether removing it is safe.

    `states` maps item id -> queue state, for the items of the plan whose worktrees carry
    `namespace` (see `plan_namespace`); `merged_heads` maps item id -> head sha of its merged
    pull request (a squash merge leaves the branch's commits off every remote ref). A worktree
    is its item's whatever its retry generation (`T1.r2`) and however its id is spelled on
    disk (`2.1` as `2-1`).
    """
    owners = _owners([(namespace, states or {}, merged_heads or {})])
    return [
        assess(repo, path, branch, *owners.get(item_of_dir_name(path.name), (None, None, None)))
        for path, branch in _on_disk(repo)
    ]


def _on_disk(repo: WorkRepo) -> list[tuple[Path, str | None]]:
    """Every harness worktree (registered, or left behind by a crash) and its branch."""
    repo.fetch()
    known = _registered(repo)
    if repo.worktrees_dir.is_dir():
        for child in repo.worktrees_dir.iterdir():
            if child.is_dir() and child.resolve() not in known:
                known[child.resolve()] = None  # left behind by a crash: still takes room
    return sorted(known.items())


def _owners(
    plans: Iterable[tuple[str, Mapping[str, str], Mapping[str, str]]],
) -> dict[str, tuple[str, str | None, str]]:
    """Worktree directory name (without its generation) -> (state, merged head, item id), for
    each plan given as (its namespace, item -> state, item -> merged head)."""
    return {
        worktree_dir_name(item_id, namespace): (state, heads.get(item_id), item_id)
        for namespace, states, heads in plans
        for item_id, state in states.items()
    }


def remove(repo: WorkRepo, info: WorktreeInfo) -> None:
    """Remove a worktree judged safe, and its local branch."""
    if not info.safe:
        raise WorktreeError(f"refusing to remove {info.path}: {info.reason}")
    repo.settings.check()
    pins = repo.settings.pins  # removing a worktree or a branch runs hooks
    if info.path.is_dir():
        # A worktree with submodules checked out is removed only when forced; judged safe, it
        # holds nothing to lose (its submodules are the user's own copies, checked out).
        forced = ("--force",) if (info.path / ".gitmodules").is_file() else ()
        _git(repo.path, *pins, "worktree", "remove", *forced, str(info.path))
    repo.forget_worktree(info.path)  # gone already: its record alone, never a global prune
    if info.branch is not None:
        # -D: a squash merge never makes the branch "merged" in git's eyes; we checked the remote.
        _git(repo.path, *pins, "branch", "-D", info.branch)


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


def clean_plans(
    repo: WorkRepo,
    finished: Mapping[tuple[str, str], str],
    merged_heads: Mapping[tuple[str, str], str],
) -> PruneReport:
    """Remove the worktrees of the finished items, keyed (plan key, item id), that are safe to
    remove; keep the rest. `merged_heads`: the head sha of each merged item's pull request."""
    states: dict[str, dict[str, str]] = {}
    heads: dict[str, dict[str, str]] = {}
    for (plan, item_id), state in finished.items():
        states.setdefault(plan, {})[item_id] = state
    for (plan, item_id), sha in merged_heads.items():
        heads.setdefault(plan, {})[item_id] = sha
    return _clean(
        repo, _owners((plan_namespace(plan), states[plan], heads.get(plan, {})) for plan in states)
    )


def _clean(repo: WorkRepo, owners: dict[str, tuple[str, str | None, str]]) -> PruneReport:
    """Assess only the worktrees `owners` names (a size walk of every other is wasted), and
    remove those safe to remove."""
    infos = []
    for path, branch in _on_disk(repo):
        owner = owners.get(item_of_dir_name(path.name))
        if owner is not None:
            infos.append(assess(repo, path, branch, *owner))
    return prune(repo, infos)
