"""Plain git for tests that set up repositories, with an identity so commits need no config."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` (failing the test if it fails); its output, stripped."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def seeded_clone(root: Path) -> Path:
    """A clone (`root/work`) of a bare origin (`root/origin.git`) whose main has one commit."""
    bare = root / "origin.git"
    git(root, "init", "-q", "--bare", "--initial-branch=main", str(bare))
    seed = root / "seed"
    git(root, "init", "-q", "--initial-branch=main", str(seed))
    (seed / "README.md").write_text("hello\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "first")
    git(seed, "push", "-q", str(bare), "main")
    work = root / "work"
    git(root, "clone", "-q", str(bare), str(work))
    return work
