"""The submodules of an item's worktree: checked out as the user's clone has them.

`git worktree add` leaves every submodule of the new worktree empty, so a build or a check that
needs one failed for no fault of the agent. Each submodule the user's clone has checked out is
checked out in the worktree too, cloned from the clone's own copy of it: no network, and the
clone's settings (the URLs its `.git/config` keeps) stay as they were. One the clone has not
checked out stays empty here too, as it is there.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent_harness.git import runner
from agent_harness.git.errors import WorktreeError


def check_out_submodules(clone: Path, worktree: Path, pins: tuple[str, ...]) -> None:
    """Check out in `worktree` the submodules `clone` has checked out (git run with `pins`)."""
    if not (worktree / ".gitmodules").is_file():
        return
    status = _git(clone, *pins, "submodule", "status")
    ready = {_path_of(line) for line in status.splitlines() if line[:1] in (" ", "+")}
    if not ready:
        return
    # The worktree's .gitmodules is the branch's, which an agent may have written: a name is
    # taken only when the user's clone knows it already, and only when it is a plain name (one
    # holding `=` would set another setting through `-c`, a command among them).
    urls = _git(clone, *pins, "config", "--get-regexp", r"^submodule\..*\.url$", check=False)
    known = {
        line.partition(" ")[0].removeprefix("submodule.").removesuffix(".url")
        for line in urls.splitlines()
    }
    listed = _git(
        worktree, "config", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.path$",
        check=False,
    )  # fmt: skip
    paths: list[str] = []
    sources: list[str] = []
    for line in listed.splitlines():
        key, _, path = line.partition(" ")
        name = key.removeprefix("submodule.").removesuffix(".path")
        if path in ready and name in known and _PLAIN.fullmatch(name):
            sources += ["-c", f"submodule.{name}.url={(clone / path).resolve()}"]
            paths.append(path)
    if paths:
        _git(
            worktree, *pins, "-c", "protocol.file.allow=always", *sources,
            "submodule", "update", "--init", "--quiet", "--", *paths,
        )  # fmt: skip


_PLAIN = re.compile(r"[A-Za-z0-9._/-]{1,200}")


def _path_of(line: str) -> str:
    """The path of one line of `git submodule status` (` <sha> <path> (<describe>)`)."""
    rest = line[1:].partition(" ")[2]
    return rest.rsplit(" (", 1)[0] if rest.endswith(")") else rest


def _git(cwd: Path, *args: str, check: bool = True) -> str:
    try:
        return runner.run_git(cwd, *args, check=check, errors="surrogateescape").stdout
    except runner.GitError as exc:
        raise WorktreeError(exc.message) from exc
