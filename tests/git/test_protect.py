"""Protected paths: which files a change touched (real git), and which of them it may not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_harness.errors import HarnessError
from agent_harness.git.change import read_change
from agent_harness.git.protect import (
    ChangedPathsUnknown,
    changed_paths,
    glob_matches,
    protection_violations,
)

PROTECTED = (".github/**", "agent-harness.toml")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    files = {
        "README.md": "hello\n",
        "src/app.py": "print('app')\n",
        "src/old_name.py": "x = 1\n" * 20,
        ".github/workflows/ci.yml": "on: push\n",
        ".gitignore": "*.log\nbuild/\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


@pytest.mark.integration
def test_no_change_means_no_paths(repo: Path) -> None:
    assert changed_paths(repo, "HEAD") == []


@pytest.mark.integration
def test_committed_staged_unstaged_and_untracked_changes_all_count(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("committed\n")
    git(repo, "commit", "-q", "-am", "agent commit")
    (repo / "src/app.py").write_text("staged\n")
    git(repo, "add", "src/app.py")
    (repo / ".github/workflows/ci.yml").write_text("unstaged\n")
    (repo / "src/new dir").mkdir()
    (repo / "src/new dir/fresh.py").write_text("untracked\n")
    (repo / "debug.log").write_text("ignored\n")
    (repo / "build").mkdir()
    (repo / "build/out.bin").write_text("ignored\n")
    assert changed_paths(repo, base) == [
        ".github/workflows/ci.yml",
        "README.md",
        "src/app.py",
        "src/new dir/fresh.py",
    ]
    # Of one commit, only what it changes: what the worktree holds besides is not in it.
    head = git(repo, "rev-parse", "HEAD")
    assert read_change(repo, base, head).paths == ["README.md"]


@pytest.mark.integration
def test_a_deleted_file_counts_as_touched(repo: Path) -> None:
    (repo / ".github/workflows/ci.yml").unlink()
    assert changed_paths(repo, "HEAD") == [".github/workflows/ci.yml"]


@pytest.mark.integration
def test_a_rename_gives_both_paths_committed_or_not(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "mv", "src/old_name.py", "src/new_name.py")
    assert changed_paths(repo, base) == ["src/new_name.py", "src/old_name.py"]
    git(repo, "commit", "-q", "-m", "rename")
    assert changed_paths(repo, base) == ["src/new_name.py", "src/old_name.py"]
    # Moving a protected file out of its directory touches it.
    (repo / ".github/workflows/ci.yml").rename(repo / "ci.yml")
    assert ".github/workflows/ci.yml" in changed_paths(repo, base)


@pytest.mark.integration
def test_unusual_file_names_come_back_verbatim(repo: Path) -> None:
    (repo / "naïve résumé.txt").write_text("x\n")
    (repo / 'quote"tab\there.txt').write_text("x\n")
    assert changed_paths(repo, "HEAD") == ["naïve résumé.txt", 'quote"tab\there.txt']


@pytest.mark.integration
def test_an_unknown_base_is_a_harness_error_naming_it(repo: Path) -> None:
    with pytest.raises(ChangedPathsUnknown) as caught:
        changed_paths(repo, "no-such-branch")
    assert isinstance(caught.value, HarnessError)
    assert "no-such-branch" in str(caught.value)
    assert caught.value.base == "no-such-branch"


@pytest.mark.integration
def test_a_directory_that_is_not_a_repository_is_a_harness_error(tmp_path: Path) -> None:
    with pytest.raises(ChangedPathsUnknown, match="not a git repository"):
        changed_paths(tmp_path, "HEAD")


@pytest.mark.integration
def test_a_worktree_that_is_gone_is_a_harness_error_saying_so(tmp_path: Path) -> None:
    with pytest.raises(ChangedPathsUnknown) as caught:
        changed_paths(tmp_path / "gone", "HEAD")
    assert caught.value.detail == f"cannot run git in {tmp_path / 'gone'}: no such directory"


# ------------------------------------------------------------------------------ violations


@pytest.mark.unit
def test_protected_paths_are_reported_one_reason_each() -> None:
    paths = ["src/app.py", ".github/workflows/ci.yml", "agent-harness.toml"]
    assert protection_violations(paths, PROTECTED) == [
        "touches protected path .github/workflows/ci.yml",
        "touches protected path agent-harness.toml",
    ]


@pytest.mark.unit
def test_paths_outside_the_declared_files_are_violations() -> None:
    paths = ["src/app.py", "src/util/helpers.py", "docs/notes.md"]
    assert protection_violations(paths, PROTECTED, allowed=["src/**"]) == [
        "outside the item's declared files: docs/notes.md"
    ]


@pytest.mark.unit
def test_declaring_a_protected_path_does_not_unprotect_it() -> None:
    assert protection_violations(
        [".github/workflows/ci.yml"], PROTECTED, allowed=[".github/**"]
    ) == ["touches protected path .github/workflows/ci.yml"]


@pytest.mark.unit
def test_no_declared_files_means_anything_unprotected_is_fine() -> None:
    assert protection_violations(["anything/at/all.py", "x"], PROTECTED) == []


@pytest.mark.unit
def test_each_path_is_reported_once_and_leading_dot_slash_is_ignored() -> None:
    paths = ["./agent-harness.toml", "agent-harness.toml"]
    assert protection_violations(paths, PROTECTED) == ["touches protected path agent-harness.toml"]


@pytest.mark.integration
def test_violations_from_a_real_change(repo: Path) -> None:
    (repo / ".github/workflows/ci.yml").write_text("on: never\n")
    (repo / "src/app.py").write_text("changed\n")
    (repo / "notes.txt").write_text("stray\n")
    reasons = protection_violations(changed_paths(repo, "HEAD"), PROTECTED, allowed=["src/*.py"])
    assert reasons == [
        "touches protected path .github/workflows/ci.yml",
        "outside the item's declared files: notes.txt",
    ]


# ------------------------------------------------------------------------------------ globs


@pytest.mark.unit
@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        # root files: a pattern is anchored at the repository root
        ("agent-harness.toml", "agent-harness.toml", True),
        ("agent-harness.toml", "sub/agent-harness.toml", False),
        ("**/agent-harness.toml", "sub/agent-harness.toml", True),
        ("**/agent-harness.toml", "agent-harness.toml", True),
        ("*.toml", "pyproject.toml", True),
        ("*.toml", "sub/pyproject.toml", False),
        # nested: ** crosses directories, * does not
        (".github/**", ".github/workflows/ci.yml", True),
        (".github/**", ".github/CODEOWNERS", True),
        (".github/**", ".github", False),
        (".github/**", ".githubx/a", False),
        ("src/*", "src/a.py", True),
        ("src/*", "src/pkg/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/pkg/deep/a.py", True),
        ("src/**/*.py", "src/pkg/a.txt", False),
        ("src/**/test_*.py", "src/test_x.py", True),
        ("**", "any/thing/at/all", True),
        ("docs/**.md", "docs/a/b.md", True),
        # dotfiles are not hidden from wildcards
        ("*", ".env", True),
        ("src/*", "src/.secret", True),
        ("**/*.yml", ".github/workflows/.hidden.yml", True),
        # ? and classes stay within one segment
        ("src/?.py", "src/a.py", True),
        ("src/?.py", "src/ab.py", False),
        ("a?b", "a/b", False),
        ("[!.]*", ".env", False),
        ("[!.]*", "env", True),
        ("file[0-9].txt", "file7.txt", True),
        ("file[0-9].txt", "filex.txt", False),
        ("[]]x", "]x", True),
        # regex characters in a pattern are literal
        ("a+b(1).txt", "a+b(1).txt", True),
        ("a.b", "axb", False),
        ("[unclosed", "[unclosed", True),
        # the example, and a folder written with a trailing slash: all that is in it
        ("secrets/**", "secrets/key.txt", True),
        ("secrets/", "secrets/key.txt", True),
        ("secrets/", "secrets/deep/key.txt", True),
        ("secrets/", "secretsx/key.txt", False),
        # a leading ./ or / in either is ignored
        ("./.github/**", ".github/x", True),
        ("/agent-harness.toml", "agent-harness.toml", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, matches: bool) -> None:
    assert glob_matches(pattern, path) is matches
