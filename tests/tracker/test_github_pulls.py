"""GitHubTracker's reads of an open pull request over the forge: what `pull_feedback` asks for."""

from __future__ import annotations

import pytest

from .conftest import Scene

pytestmark = pytest.mark.integration


def test_feedback_skips_the_comment_listings_the_pull_counts_as_empty(
    scene: Scene,
) -> None:
    number = scene.open_pr("T1")
    tracker = scene.tracker()
    quiet = tracker.pull_feedback(number)
    assert quiet.comments == () and quiet.line_comments == ()
    asked = dict(tracker.tally.by_kind)
    assert "list_comments" not in asked and "list_review_comments" not in asked, asked
    assert asked.get("list_reviews") == 1

    pull = scene.repo.get_pull(number)
    pull.create_issue_comment("/agent-harness stop")
    pull.create_review(
        commit=scene.repo.get_commit(pull.head.sha),
        body="two things",
        event="REQUEST_CHANGES",
        comments=[{"path": "T1.txt", "line": 1, "body": "say more"}],
    )
    said = tracker.pull_feedback(number)
    assert said.comments == ("/agent-harness stop",)
    assert [(c[1], c[3]) for c in said.line_comments] == [("T1.txt", "say more")]
    assert [r[1] for r in said.reviews] == ["CHANGES_REQUESTED"]
    tracker.close()
