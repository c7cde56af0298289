"""Plain git for tests that set up repositories, with an identity so commits need no config."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


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


def noted_git(where: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `git` first on PATH that notes each call (`<working directory> <arguments>`, a
    line each) and runs the real one; the file it notes them in (made at the first call).
    For a test that counts the git processes some code starts."""
    real = shutil.which("git")
    assert real is not None
    shim, calls = where / "noted-git", where / "git-calls"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$PWD $*" >> {calls}\nexec {real} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    return calls
