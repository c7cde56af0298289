"""The conflict gate takes the repository's word on which files may hold markers.

A guide to git that shows a conflict, or a test fixture of one, holds `<<<<<<<` lines on
purpose. Git's own way to say so is the `conflict-marker-size` attribute (git then writes
longer markers into that file), or `-merge` / `merge=binary` (it writes none). The gate judges
such a file by that; attributes an agent's own change writes are not taken.
"""

from __future__ import annotations

import shlex

import pytest

from agent_harness.pipeline.settings import RunSettings
from tests.shared.git import git

from .conftest import Harness

pytestmark = pytest.mark.integration

GUIDE = "\n".join(
    ["# Merging", "A conflict looks like this:", "", "<<<<<<< HEAD", "ours", "=======",
     "theirs", ">>>>>>> main", ""]
)  # fmt: skip


def agent_writing(h: Harness, files: dict[str, str]) -> str:
    steps = [{"write_file": {"path": p, "content": c}} for p, c in files.items()]
    from agent_harness.testing.agents import write_scripted_agent

    return shlex.join(write_scripted_agent(h.tmp / "agents", {"steps": steps, "exit": 0}))


def on_main(h: Harness, path: str, text: str) -> None:
    (h.work / path).write_text(text)
    git(h.work, "add", path)
    git(h.work, "commit", "-q", "-m", f"{path} on main")
    git(h.work, "push", "-q", "origin", "HEAD:main")


def run_one(h: Harness, files: dict[str, str], item: str = "T1") -> tuple[str, str | None]:
    """One item (a new id for each case: a failed one is not run again) whose agent writes
    `files`; its state and reason after the run."""
    settings = RunSettings(checks=[], lease_s=60.0, idle_poll_s=0.02, max_attempts=1)
    plan = f"### {item}: Write the merging guide\n"
    pipeline = h.pipeline(plan, agent=agent_writing(h, files) + " {prompt_file}", settings=settings)
    [found] = [each for each in pipeline.run().items if each.id == item]
    return found.state, found.reason


def test_a_file_the_repository_gives_longer_markers_may_show_a_conflict(harness: Harness) -> None:
    on_main(harness, ".gitattributes", "*.md conflict-marker-size=32\n")
    state, reason = run_one(harness, {"docs/merging.md": GUIDE})
    assert state == "pr_open", reason
    # A conflict git left there has markers of that size: those still count.
    left = GUIDE.replace("<" * 7, "<" * 32).replace(">" * 7, ">" * 32)
    state, reason = run_one(harness, {"docs/merging.md": left.replace("=" * 7, "=" * 32)}, "T2")
    assert state == "failed" and "merge conflict markers in docs/merging.md" in str(reason)


def test_a_file_the_repository_never_merges_as_text_may_show_a_conflict(harness: Harness) -> None:
    on_main(harness, ".gitattributes", "*.conflict -merge\n")
    state, reason = run_one(harness, {"fixtures/left.conflict": GUIDE})
    assert state == "pr_open", reason


def test_markers_are_still_refused_elsewhere_and_where_the_change_writes_the_attributes(
    harness: Harness,
) -> None:
    state, reason = run_one(harness, {"docs/merging.md": GUIDE})
    assert state == "failed" and "merge conflict markers in docs/merging.md" in str(reason)
    state, reason = run_one(
        harness,
        {".gitattributes": "*.md conflict-marker-size=32\n", "docs/merging.md": GUIDE + "\n"},
        "T2",
    )
    assert state == "failed" and "merge conflict markers in docs/merging.md" in str(reason)
    # Nor attributes it writes and keeps out of the commit (git reads them from the worktree).
    state, reason = run_one(
        harness,
        {
            "docs/.gitignore": ".gitattributes\n",
            "docs/.gitattributes": "*.md -merge\n",
            "docs/merging.md": GUIDE + "\n\n",
        },
        "T3",
    )
    assert state == "failed" and "merge conflict markers in docs/merging.md" in str(reason)
