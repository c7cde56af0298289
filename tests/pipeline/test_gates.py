"""The conflict gate reads a change's diff: a merge conflict's markers left in it, only those."""

from __future__ import annotations

import pytest

from agent_harness.pipeline.gates import conflicted_files

pytestmark = pytest.mark.unit


def _diff(path: str, *added: str) -> str:
    body = "".join(f"+{line}\n" for line in added)
    head = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
    return f"{head}@@ -1 +1,{len(added)} @@\n{body}"


def test_a_file_with_a_conflict_left_in_it_is_named() -> None:
    left = _diff("shared.txt", "<<<<<<< HEAD", "from the item", "=======", "from a person",
                 ">>>>>>> origin/main")  # fmt: skip
    resolved = _diff("other.txt", "from the item", "from a person")
    assert conflicted_files(left + resolved) == ["shared.txt"]
    # An added line that starts with "++ " is no file header: the markers stay shared.txt's.
    tricky = _diff("shared.txt", "<<<<<<< HEAD", "++ counter", "=======", ">>>>>>> main")
    assert conflicted_files(tricky) == ["shared.txt"]
    assert conflicted_files(_diff("bare.txt", "<<<<<<<", "a", "=======", "b", ">>>>>>>")) == [
        "bare.txt"
    ]
    # Blank lines between the markers are part of a conflict as much as any other line.
    spaced = _diff("spaced.txt", "<<<<<<< HEAD", "", "ours", "=======", "", ">>>>>>> main", "")
    assert conflicted_files(spaced) == ["spaced.txt"]


def test_a_heading_underline_or_one_marker_quoted_in_docs_is_no_conflict() -> None:
    underline = _diff("README.md", "Usage", "=======", "", "Run it.")
    quoted = _diff("docs/git.md", "A conflict starts with a line such as", "<<<<<<< HEAD")
    assert conflicted_files(underline + quoted) == []
    # Markers a diff removes (the agent resolved them) are no conflict either.
    removed = "--- a/x.txt\n+++ b/x.txt\n@@ -1,3 +1 @@\n-<<<<<<< HEAD\n-=======\n->>>>>>> main\n"
    assert conflicted_files(removed) == []


def test_a_file_with_longer_markers_is_judged_by_its_own_size() -> None:
    # Git writes 32-character markers into a file whose `conflict-marker-size` is 32: seven
    # there are an example in a guide, and thirty-two are a conflict.
    example = _diff("docs/merging.md", "<<<<<<< HEAD", "ours", "=======", "theirs", ">>>>>>> main")
    assert conflicted_files(example, {"docs/merging.md": 32}) == []
    real = _diff("docs/merging.md", "<" * 32 + " HEAD", "ours", "=" * 32, ">" * 32 + " main")
    assert conflicted_files(real, {"docs/merging.md": 32}) == ["docs/merging.md"]
    assert conflicted_files(real) == []  # seven of each would not have matched either
    assert conflicted_files(real, any_size=True) == ["docs/merging.md"]
