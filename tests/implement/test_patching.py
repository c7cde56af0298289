"""Ladder behaviour the corpus cannot show: symlinks, dirty worktrees, the order of rungs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_harness.implement.edits import parse_unified_diff
from agent_harness.implement.patching import (
    RUNG_FUZZY,
    RUNG_GIT_STRICT,
    RUNG_GIT_TOLERANT,
    RUNGS,
    apply_edit,
)

TWICE = (
    "def first():\n    value = load()\n    return value\n\n\n"
    "def second():\n    value = load()\n    return value\n"
)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q")
    git(work, "config", "user.email", "t@example.invalid")
    git(work, "config", "user.name", "t")
    (work / "twice.py").write_text(TWICE)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "init")
    return work


@pytest.mark.integration
def test_a_symlink_out_of_the_worktree_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "shared").symlink_to(outside, target_is_directory=True)
    edit = "shared/evil.txt\n```\nowned\n```\n"

    result = apply_edit(repo, edit)

    assert not result.applied
    assert result.reason is not None and "symlink" in result.reason
    assert list(outside.iterdir()) == []


@pytest.mark.integration
def test_stated_line_settles_repeated_context_for_git(repo: Path) -> None:
    # Both functions share the hunk's lines; the header points at the second one, and git is
    # allowed to take it because the stated line is one of the matches.
    edit = (
        "--- a/twice.py\n+++ b/twice.py\n@@ -6,3 +6,4 @@\n def second():\n"
        "     value = load()\n+    value = clean(value)\n     return value\n"
    )

    result = apply_edit(repo, edit)

    assert result.applied and result.rung == RUNG_GIT_STRICT
    assert (repo / "twice.py").read_text() == TWICE.replace(
        "def second():\n    value = load()\n",
        "def second():\n    value = load()\n    value = clean(value)\n",
    )


@pytest.mark.integration
def test_uncommitted_work_is_the_base_of_the_edit(repo: Path) -> None:
    # An agent's worktree is dirty mid-task: the edit is made against what is on disk.
    (repo / "twice.py").write_text(TWICE.replace("load()", "fetch()", 1))
    edit = (
        "--- a/twice.py\n+++ b/twice.py\n@@ -1,3 +1,3 @@\n def first():\n"
        "-    value = fetch()\n+    value = fetch(fresh=True)\n     return value\n"
    )

    result = apply_edit(repo, edit)

    assert result.applied and result.rung == RUNG_GIT_STRICT
    assert "value = fetch(fresh=True)\n" in (repo / "twice.py").read_text()


@pytest.mark.integration
def test_attempts_record_each_rung_tried_up_to_the_one_that_took_it(repo: Path) -> None:
    edit = (
        "--- a/twice.py\n+++ b/twice.py\n@@ -90,2 +90,2 @@\ndef second():\n"
        "-  value = load()\n+  value = load(strict=True)\n"
    )

    result = apply_edit(repo, edit)

    assert result.applied and result.rung == RUNG_FUZZY
    assert [a.rung for a in result.attempts] == list(RUNGS[: RUNGS.index(RUNG_FUZZY) + 1])
    assert [a.succeeded for a in result.attempts] == [False, False, False, True]
    assert result.files == ["twice.py"]
    assert "    value = load(strict=True)\n" in (repo / "twice.py").read_text()


@pytest.mark.integration
def test_refusal_reports_nearest_line_and_similarity(repo: Path) -> None:
    edit = (
        "--- a/twice.py\n+++ b/twice.py\n@@ -1,2 +1,2 @@\n def second_one():\n"
        "-    value = loads()\n+    value = loads(x)\n"
    )

    result = apply_edit(repo, edit)

    assert not result.applied
    assert result.reason is not None
    assert result.reason.startswith("twice.py: hunk 1 of 1 (@@ -1,2 +1,2 @@) does not match")
    assert "nearest is line 6 with similarity 0." in result.reason
    assert (repo / "twice.py").read_text() == TWICE


@pytest.mark.unit
def test_a_plain_directory_without_git_still_gets_the_tolerant_rungs(tmp_path: Path) -> None:
    (tmp_path / "twice.py").write_text(TWICE)
    edit = "twice.py\n<<<<<<< SEARCH\ndef first():\n=======\ndef first_one():\n>>>>>>> REPLACE\n"

    result = apply_edit(tmp_path, edit)

    assert result.applied
    assert (tmp_path / "twice.py").read_text().startswith("def first_one():\n")


@pytest.mark.integration
def test_text_that_is_no_edit_at_all_is_refused_with_a_reason(repo: Path) -> None:
    result = apply_edit(repo, "I could not find the bug, sorry.\n")

    assert not result.applied
    assert result.reason is not None and "no unified diff" in result.reason


@pytest.mark.unit
def test_parser_drops_a_b_prefixes_only_when_they_are_prefixes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("1\n")
    edits = parse_unified_diff(
        "--- a/x.txt\n+++ a/x.txt\n@@ -1 +1 @@\n-1\n+2\n", lambda p: (tmp_path / p).exists()
    )
    assert [(e.old_path, e.new_path) for e in edits] == [("a/x.txt", "a/x.txt")]


@pytest.mark.integration
def test_a_failed_diff_after_a_path_line_never_becomes_the_files_content(repo: Path) -> None:
    edit = (
        "twice.py\n```diff\n--- a/twice.py\n+++ b/twice.py\n@@ -1,2 +1,2 @@\n"
        " def third():\n-    value = nothing()\n+    value = something()\n```\n"
    )

    result = apply_edit(repo, edit)

    assert not result.applied
    assert result.reason is not None and "twice.py: hunk 1 of 1" in result.reason
    assert (repo / "twice.py").read_text() == TWICE


@pytest.mark.integration
def test_blank_context_line_written_with_its_space_is_kept(repo: Path) -> None:
    # The trailing " " line is real context: without it git pins the hunk to the file's end.
    # CRLF endings send the edit to the rung that re-renders the parsed diff.
    edit = (
        "--- a/twice.py\n+++ b/twice.py\n@@ -1,4 +1,5 @@\n def first():\n"
        "     value = load()\n+    value = clean(value)\n     return value\n \n"
    ).replace("\n", "\r\n")

    result = apply_edit(repo, edit)

    assert result.applied and result.rung == RUNG_GIT_TOLERANT


@pytest.mark.integration
def test_a_nested_dot_git_is_refused_too(repo: Path) -> None:
    edit = "*** Begin Patch\n*** Add File: vendor/lib/.git/hooks/post-checkout\n+#!/bin/sh\n"

    result = apply_edit(repo, edit)

    assert not result.applied
    assert result.reason == "refused: path 'vendor/lib/.git/hooks/post-checkout' is inside .git"
    assert not (repo / "vendor").exists()


@pytest.mark.integration
def test_git_quoted_non_ascii_path_is_read_and_reported(repo: Path) -> None:
    edit = (
        'diff --git "a/caf\\303\\251.txt" "b/caf\\303\\251.txt"\nnew file mode 100644\n'
        '--- /dev/null\n+++ "b/caf\\303\\251.txt"\n@@ -0,0 +1 @@\n+espresso\n'
    )

    result = apply_edit(repo, edit)

    assert result.applied and result.files == ["café.txt"]
    assert (repo / "café.txt").read_text() == "espresso\n"


@pytest.mark.unit
def test_a_bare_word_names_a_file_only_when_usual_or_in_the_worktree() -> None:
    from agent_harness.implement.edits import EditRefused, parse_search_replace

    block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"
    with pytest.raises(EditRefused, match="names no file"):
        parse_search_replace("python\n" + block)  # a language, not a file
    with pytest.raises(EditRefused, match="names no file"):
        parse_search_replace("...\n" + block)  # elision, not a file
    assert parse_search_replace("Makefile\n" + block)[0].path == "Makefile"
    assert parse_search_replace("tmpq8\n" + block, known={"tmpq8"}.__contains__)[0].path == "tmpq8"
