"""Keeping the harness's own files out of the user's `git status`.

The state folder (`.agent-harness/`: the database, the local forge with its token and bare
repositories, the worktrees) lands inside the user's clone when a command runs there. Listed
in the clone's `info/exclude` (never its `.gitignore`, which is the user's and shared), it is
never offered to a `git add -A`.
"""

from __future__ import annotations

from pathlib import Path

from agent_harness.git.runner import run_git


def exclude_from(top: Path, folder: Path, exclude: Path) -> None:
    """List `folder` (inside the work tree at `top`) in `exclude`, the clone's own list of
    ignored paths, once."""
    try:
        relative = folder.resolve().relative_to(top.resolve())
    except ValueError:
        return
    if not relative.parts:
        return  # the work tree itself: nothing to list
    line = f"/{relative.as_posix()}/"
    existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if line not in existing.splitlines():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("a", encoding="utf-8") as handle:
            handle.write(("" if existing.endswith("\n") or not existing else "\n") + line + "\n")


def keep_out_of_git(folder: Path) -> None:
    """When `folder` lies inside a git work tree, list it in that clone's `info/exclude`.
    Outside one, or when git cannot say, nothing is done."""
    probe = folder if folder.is_dir() else folder.parent
    found = run_git(
        probe, "rev-parse", "--show-toplevel", "--git-path", "info/exclude", check=False
    )
    lines = found.stdout.splitlines()
    if not found.ok or len(lines) != 2:
        return
    top = Path(lines[0])
    exclude = Path(lines[1]) if Path(lines[1]).is_absolute() else probe / lines[1]
    try:
        exclude_from(top, folder, exclude)
    except OSError:
        return  # a read-only clone: the state is kept all the same
