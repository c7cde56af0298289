"""Git attributes of paths, as a commit gives them (`git check-attr`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from agent_harness.git.runner import run_git


def attributes_at(
    cwd: Path, sha: str, names: list[str], paths: list[str], pins: tuple[str, ...] = ()
) -> dict[str, dict[str, str]]:
    """The attributes `names` of `paths` as commit `sha`'s `.gitattributes` files give them
    (and the clone's `info/attributes`), read through an index of their own: never the
    worktree's files or the user's global file, which an agent can write, ignored or not.
    `pins` are the options every git command of ours in that clone runs with."""
    pins = (*pins, "-c", "core.attributesFile=/dev/null")
    with tempfile.TemporaryDirectory() as scratch:
        own = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        run_git(cwd, *pins, "read-tree", sha, env=own)
        ask = ("check-attr", "--cached", "-z", *names, "--", *paths)
        out = run_git(cwd, *pins, *ask, env=own, errors="surrogateescape").stdout
    return read_check_attr(out)


def read_check_attr(out: str) -> dict[str, dict[str, str]]:
    """`git check-attr -z`'s answer (path, name, value, each ended by NUL) by path and name:
    `set`, `unset` or a value; an `unspecified` attribute left out."""
    fields = out.split("\0")
    found: dict[str, dict[str, str]] = {}
    for at in range(0, len(fields) - 2, 3):
        path, name, value = fields[at : at + 3]
        if value != "unspecified":
            found.setdefault(path, {})[name] = value
    return found
