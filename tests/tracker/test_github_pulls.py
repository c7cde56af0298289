"""GitHubTracker's reads of an open pull request over the forge: what `pull_feedback` and
`pull_untouched` ask for, and the labels a listing carries."""

from __future__ import annotations

import json

import pytest

from agent_harness.testing.forge import collaborator_pull
from agent_harness.tracker.reconcile import PullFacts

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
    collaborator_pull(scene.rf, pull).create_review(  # its author may not request changes
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


def test_untouched_until_a_person_comments_and_the_listing_carries_labels(scene: Scene) -> None:
    number = scene.open_pr("T1")
    tracker = scene.tracker()
    assert tracker.pull_untouched(number)
    assert dict(tracker.tally.by_kind) == {"list_timeline": 1}  # one request, not three
    scene.repo.get_issue(number).create_comment("looks odd")
    assert not tracker.pull_untouched(number)
    scene.repo.get_issue(number).add_to_labels("agent-harness:hold")
    [pull] = [p for p in tracker.pulls_by_update().items if p.number == number]
    assert pull.labels == ("agent-harness:hold",)
    # Remembered between runs with its labels; a memory from before labels were kept says
    # it does not know them (None), never that there are none.
    facts = PullFacts.of(pull)
    assert PullFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts
    old = {k: v for k, v in facts.to_json().items() if k != "labels"}
    assert PullFacts.from_json(old).labels is None
    tracker.close()


@pytest.mark.parametrize("word", ["approval", "line comment", "review with comments"])
def test_any_review_or_line_comment_alone_makes_a_pull_request_touched(
    scene: Scene, word: str
) -> None:
    number = scene.open_pr("T1")
    tracker = scene.tracker()
    pull = scene.repo.get_pull(number)
    commit = scene.repo.get_commit(pull.head.sha)
    if word == "approval":  # no body, no comment: only the reviews say it
        collaborator_pull(scene.rf, pull).create_review(commit=commit, event="APPROVE")
    elif word == "line comment":
        pull.create_review_comment("why this?", commit, "T1.txt", line=1)
    else:
        comments = [{"path": "T1.txt", "line": 1, "body": "x"}]
        pull.create_review(commit=commit, event="COMMENT", comments=comments)
    assert not tracker.pull_untouched(number)
    tracker.close()
