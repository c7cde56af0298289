"""The submodules of an item's worktree: checked out as the user's clone has them.

`git worktree add` leaves every submodule of the new worktree empty, so a build or a check that
needs one failed for no fault of the agent. Each submodule the user's clone has checked out is
checked out in the worktree too, cloned from the clone's own copy of it: no network, and the
clone's settings (the URLs its `.git/config` keeps) stay as they were. One the clone has not
checked out stays empty here too, as it is there.
"""

from __future__ import annotations

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
    listed = _git(
        worktree, "config", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.path$",
        check=False,
    )  # fmt: skip
    paths: list[str] = []
    sources: list[str] = []
    for line in listed.splitlines():
        key, _, path = line.partition(" ")
        if path in ready:  # in the worktree's commit, and checked out in the user's clone
            name = key.removeprefix("submodule.").removesuffix(".path")
            sources += ["-c", f"submodule.{name}.url={(clone / path).resolve()}"]
            paths.append(path)
    if paths:
        _git(
            worktree, *pins, "-c", "protocol.file.allow=always", *sources,
            "submodule", "update", "--init", "--quiet", "--", *paths,
        )  # fmt: skip


def _path_of(line: str) -> str:
    """The path of one line of `git submodule status` (` <sha> <path> (<describe>)`)."""
    rest = line[1:].partition(" ")[2]
    return rest.rsplit(" (", 1)[0] if rest.endswith(")") else rest


def _git(cwd: Path, *args: str, check: bool = True) -> str:
    try:
        return runner.run_git(cwd, *args, check=check, errors="surrogateescape").stdout
    except runner.GitError as exc:
        raise WorktreeError(exc.message) from exc
