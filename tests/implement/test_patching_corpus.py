"""Every corpus case applied to a real git repository, compared byte for byte.

Corpus format (tests/implement/patching_corpus/<NN-name>/, data only):

    case.json   {"description": ...,
                 "expect": "applied" | "refused",
                 "rung": <first rung expected to take it>,          (applied only)
                 "already_applied_hunks": <int>,                    (applied only)
                 "reason_contains": [<substring>, ...]}             (refused only)
    before/     the worktree's files, committed before the edit is applied
    edit.txt    the model's edit, byte for byte as it would arrive
    after/      the worktree's files expected afterwards (applied only; a refused edit must
                leave `before/` byte-for-byte unchanged)
    base/       optional: older versions whose blobs are written into the object store, so a
                diff made against them can be merged three-way

The corpus's .gitattributes marks everything `-text`, so CRLF and missing newlines survive.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent_harness.implement.patching import RUNGS, apply_edit

CORPUS = Path(__file__).parent / "patching_corpus"
CASES = sorted(p.parent.name for p in CORPUS.glob("*/case.json"))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root except git's own, by relative path."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def make_worktree(case_dir: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "config", "user.email", "corpus@example.invalid")
    git(work, "config", "user.name", "corpus")
    git(work, "config", "core.autocrlf", "false")
    for rel, data in snapshot(case_dir / "before").items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "originals")
    if (case_dir / "base").is_dir():
        for rel in snapshot(case_dir / "base"):
            git(work, "hash-object", "-w", str(case_dir / "base" / rel))
    return work


@pytest.mark.unit
def test_corpus_is_big_enough() -> None:
    refused = [
        c
        for c in CASES
        if json.loads((CORPUS / c / "case.json").read_text())["expect"] == "refused"
    ]
    assert len(CASES) >= 30
    assert len(refused) >= 3


@pytest.mark.integration
@pytest.mark.parametrize("name", CASES)
def test_corpus_case(name: str, tmp_path: Path) -> None:
    case_dir = CORPUS / name
    meta = json.loads((case_dir / "case.json").read_text())
    work = make_worktree(case_dir, tmp_path)
    before = snapshot(work)
    edit = (case_dir / "edit.txt").read_bytes().decode("utf-8")

    result = apply_edit(work, edit)

    if meta["expect"] == "refused":
        assert not result.applied, result
        assert result.reason is not None
        for fragment in meta["reason_contains"]:
            assert fragment in result.reason, (fragment, result.reason)
        assert snapshot(work) == before
        assert not (tmp_path / "outside.txt").exists()
        return
    assert result.applied, result.reason
    assert snapshot(work) == snapshot(case_dir / "after")
    assert result.rung == meta["rung"], result.attempts
    assert result.rung in RUNGS
    assert result.already_applied_hunks == meta["already_applied_hunks"]
    changed = {
        p for p in snapshot(work).keys() | before.keys() if snapshot(work).get(p) != before.get(p)
    }
    assert changed <= set(result.files)
