"""What the run pipeline needs of git: a worktree per item, its commits, and a guarded push.

`worktrees.WorkRepo` is the real one (the user's clone and worktrees beside it);
`agent_harness.testing.workspace.MemoryWorkspace` keeps commits in memory for tests that must
not start a process.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from agent_harness.git.worktrees import Worktree


class Workspace(Protocol):
    """One repository's item worktrees, as the pipeline uses them."""

    def default_branch(self) -> str: ...

    def set_default_branch(self, name: str) -> None:
        """Say which branch is the default (the tracker knows); it is never written to."""

    def check_clean_default(self, allow: Sequence[Path] = ()) -> None:
        """Refuse a clone whose default branch has uncommitted changes (but to `allow`)."""

    def check_remote(self, full_name: str, clone_url: str) -> None:
        """Refuse a clone whose remote is another repository than the tracker's."""

    def prepare(
        self,
        item_id: str,
        title: str,
        namespace: str = "",
        generation: int = 0,
        *,
        pushed: bool = False,
        known: str | None = None,
        guard_private: bool = False,
        ours: Collection[str] | None = None,
        others: Callable[[], Iterable[str]] = tuple,
    ) -> Worktree:
        """The item's worktree on its own branch, reused when healthy, made when not; a retried
        item (generation N) gets a new one from the current default branch. `pushed`: the
        item's branch was pushed before, maybe from another clone, so the remote is looked at
        now rather than as a recent fetch saw it. `known`: the branch the item's history says
        it worked on, kept when it is still there (a title edited since names another). With
        `guard_private`, a branch in the item's name that `known` does not name and that holds
        commits nobody pushed is someone's own: refused, never built on. With `ours` (the heads
        harness runs pushed), a pushed head that is none of them is a person's commit: the
        worktree is not moved up to it, and the worktree's `foreign` names it. `others`: the
        plan's other item ids, whose branches may start like this item's (`bucket-store-…`
        after `bucket-`), so never taken for its own."""

    def discard(
        self,
        item_id: str,
        namespace: str = "",
        generation: int = 0,
        others: Iterable[str] = (),
    ) -> list[str]:
        """Remove one generation's worktree and local branch, not `others`' (see `prepare`);
        returns what was removed."""

    def verify_branch(self, tree: Worktree) -> None:
        """Refuse a worktree whose branch was changed under it (the agent switched branches)."""

    def commit_all(self, tree: Worktree, message: str) -> str | None:
        """Commit whatever the agent left; the new head, or None when there was nothing."""

    def head(self, tree: Worktree) -> str: ...

    def has_uncommitted(self, tree: Worktree) -> bool: ...

    def discard_uncommitted(self, tree: Worktree, save_to: Path | None = None) -> list[str]:
        """Put the worktree back to its last commit: changes undone, files git does not track
        (and does not ignore) removed. Returns the paths that differed. With `save_to`, the
        changes to tracked files are first written there as a patch (`git apply` takes it)."""

    def diff(self, tree: Worktree, sha: str) -> str:
        """What commit `sha` changes since the base, as one unified diff."""

    def committed_diff(self, tree: Worktree) -> str:
        """What the item's commits add since the base, with no context lines, for a scan."""

    def large_files(self, tree: Worktree, sha: str, limit: int) -> list[tuple[str, int]]:
        """The files commit `sha` holds, among those its change touches, of more than `limit`
        bytes, with their sizes."""

    def changed_paths(self, tree: Worktree, sha: str | None = None) -> list[str]:
        """Every path that differs from the base: committed, staged, unstaged, untracked; with
        `sha`, those commit `sha` changes."""

    def attributes(
        self, tree: Worktree, names: list[str], paths: list[str]
    ) -> dict[str, dict[str, str]]:
        """The git attributes `names` of each of `paths` as the item's base commit gives them
        (`set`, `unset` or a value; an unspecified one left out), never the worktree's."""

    def push(self, tree: Worktree, sha: str | None = None) -> None:
        """Push the item branch (as commit `sha`, when given), and only it; the default branch
        is refused."""

    def worktree_of(self, branch: str) -> Path | None:
        """The worktree that has `branch` checked out here, if there is one on disk."""

    def update_from_base(self, branch: str, expected: str) -> tuple[list[str], str] | None:
        """Rebase the item branch on the default branch (pushed over `expected` only), or merge
        it leaving conflict markers; (the files in conflict, the head), or None when the
        branch has no clean worktree here at `expected`."""
