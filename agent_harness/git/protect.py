"""Paths an agent's change may not touch, and the list of paths a change did touch.

An agent must not edit what grades it (CI workflows, the harness config) nor wander outside the
files its item declared. The changed set is taken from git against the base commit, working
tree and untracked files included, so nothing the agent left uncommitted slips past.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from agent_harness.errors import HarnessError
from agent_harness.git.runner import GitError, run_git


class ChangedPathsUnknown(HarnessError):
    """git could not say which files a change touched."""

    def __init__(self, worktree: Path, base: str, detail: str) -> None:
        self.worktree = worktree
        self.base = base
        self.detail = detail
        super().__init__(f"cannot list the files changed in {worktree} since {base}: {detail}")


def changed_paths(worktree: Path, base: str) -> list[str]:
    """Repository-relative paths that differ between `base` and the worktree as it is now:
    committed, staged, unstaged and untracked (not ignored) files, sorted. A rename or copy
    yields both its old and its new path, because either side may be protected. (What one
    commit changes is read with the rest of its change: `git.change.read_change`.)"""
    # --no-renames reports a rename as a deletion plus an addition: both paths, in one format.
    try:
        tracked = _git(worktree, base, ["diff", "--name-only", "--no-renames", "-z", base, "--"])
    except ChangedPathsUnknown:
        # Outside a repository `git diff` misreports it as a usage question: where git finds
        # no repository, its own answer to that says so.
        _git(worktree, base, ["rev-parse", "--git-dir"])
        raise
    untracked = _git(worktree, base, ["ls-files", "--others", "--exclude-standard", "-z"])
    paths = {path for path in (tracked + untracked).split("\0") if path}
    return sorted(paths)


def _git(worktree: Path, base: str, args: list[str]) -> str:
    try:
        done = run_git(
            worktree, "-c", "core.quotePath=false", *args, check=False, errors="surrogateescape"
        )
    except GitError as exc:  # git could not run, or ran out of time
        raise ChangedPathsUnknown(worktree, base, exc.message) from exc
    if not done.ok:
        lines = done.stderr.strip().splitlines()
        # git may warn before it fails; the "fatal:" line is the one that explains.
        fatal = [line.removeprefix("fatal: ") for line in lines if line.startswith("fatal:")]
        detail = (fatal or lines or [f"git exited {done.returncode}"])[0]
        raise ChangedPathsUnknown(worktree, base, detail)
    return done.stdout


def protection_violations(
    paths: Sequence[str], protected: Sequence[str], allowed: Sequence[str] = ()
) -> list[str]:
    """One reason per offending path, in the order given (each path once).

    A path matching a `protected` glob is a violation even when `allowed` also matches it: an
    item cannot declare its way into the files that grade it. When `allowed` (the item's
    declared `files:`) is non-empty, a path matching none of its globs is a violation too.
    Globs match the whole repository-relative path; see `glob_matches`.
    """
    reasons: list[str] = []
    seen: set[str] = set()
    for raw in paths:
        path = _normalise(raw)
        if path in seen:
            continue
        seen.add(path)
        if any(glob_matches(pattern, path) for pattern in protected):
            reasons.append(f"touches protected path {path}")
        elif allowed and not any(glob_matches(pattern, path) for pattern in allowed):
            reasons.append(f"outside the item's declared files: {path}")
    return reasons


def glob_matches(pattern: str, path: str) -> bool:
    """Whether `path` (relative to the repository root) matches `pattern` as a whole.

    `*` and `?` stay within one directory level, `**` crosses levels, and `**/` also matches
    no directory at all (`**/*.py` matches `setup.py`). A pattern is anchored at the root: write
    `**/name` to match a name at any depth. Wildcards match dotfiles too, so a protected glob
    cannot be dodged with a leading dot. `[abc]` and `[!abc]` are character classes. A pattern
    ending in `/` is a folder and matches everything in it (`secrets/` is `secrets/**`).
    """
    pattern = _normalise(pattern)
    if pattern.endswith("/"):
        pattern += "**"
    return _compile(pattern).fullmatch(_normalise(path)) is not None


def _normalise(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


@lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            if j - i == 1:
                out.append("[^/]*")
            elif (i == 0 or pattern[i - 1] == "/") and j < n and pattern[j] == "/":
                out.append("(?:.*/)?")  # "**/": any number of whole directories, even none
                j += 1
            else:
                out.append(".*")
            i = j
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            # A "]" right after "[" or "[!" is a member of the class, not its end.
            start = i + 2 if pattern[i + 1 : i + 2] == "!" else i + 1
            start += 1 if pattern[start : start + 1] == "]" else 0
            end = pattern.find("]", start)
            if end == -1:
                out.append(re.escape(char))
                i += 1
                continue
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = (
                body.replace("\\", "\\\\")
                .replace("^", "\\^")
                .replace("[", "\\[")
                .replace("]", "\\]")
            )
            out.append(f"[^/{escaped}]" if negate else f"[{escaped}]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out), re.DOTALL)
