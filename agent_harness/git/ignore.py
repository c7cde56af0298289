"""Keeping the harness's own files out of the user's `git status`.

The state folder (`.agent-harness/`: the database, the local forge with its token and bare
repositories, the worktrees) lands inside the user's clone when a command runs there. Listed
in the clone's `info/exclude` (never its `.gitignore`, which is the user's and shared), it is
never offered to a `git add -A`.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path


def exclude_from(top: Path, folder: Path, exclude: Path) -> None:
    """List `folder` (inside the work tree at `top`) in `exclude`, the clone's own list of
    ignored paths, once. Read and written as bytes, as git does: the file may hold any, and a
    folder's name need not be UTF-8; a `*`, `?`, `[` or `\\` in the name is escaped."""
    try:
        relative = folder.resolve().relative_to(top.resolve())
    except ValueError:
        return
    if not relative.parts:
        return  # the work tree itself: nothing to list
    name = re.sub(rb"([*?\[\\])", rb"\\\1", os.fsencode(relative.as_posix()))
    line = b"/" + name + b"/"
    existing = exclude.read_bytes() if exclude.exists() else b""
    if line not in existing.splitlines():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with exclude.open("ab") as handle:
            handle.write(
                (b"" if existing.endswith(b"\n") or not existing else b"\n") + line + b"\n"
            )


def keep_out_of_git(folder: Path) -> None:
    """When `folder` lies inside a git work tree, list it in that clone's `info/exclude`.
    Outside one, or when its git folder cannot be read, nothing is done. Found by looking for
    `.git` upwards, as git does, so no git process is started."""
    found = _clone_of(folder.resolve())
    if found is None:
        return
    top, exclude = found
    try:
        exclude_from(top, folder, exclude)
    except OSError:
        return  # a read-only clone: the state is kept all the same


def _clone_of(folder: Path) -> tuple[Path, Path] | None:
    """(the work tree's top, its `info/exclude`) for the clone holding `folder`."""
    for top in (folder, *folder.parents):
        dot_git = top / ".git"
        if dot_git.is_dir():
            return top, dot_git / "info" / "exclude"
        if dot_git.is_file():  # a linked worktree or a submodule: `gitdir: <path>`
            try:
                said = dot_git.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not said.startswith("gitdir:"):
                return None
            git_dir = (top / said.removeprefix("gitdir:").strip()).resolve()
            common = git_dir
            with contextlib.suppress(OSError, UnicodeDecodeError):
                named = (git_dir / "commondir").read_text(encoding="utf-8").strip()
                common = (git_dir / named).resolve()
            return top, common / "info" / "exclude"
    return None
