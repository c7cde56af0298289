"""What happened to issues and pull requests (their events, also in the timeline) and a
repository's comments across its issues and pull requests, through PyGithub."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from github import GithubException

from agent_harness.testing.clock import FakeClock
from agent_harness.testing.forge import TOKEN, RunningForge, collaborator_pull

pytestmark = pytest.mark.integration


def fetch_json(url: str) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def pushed_pull(repo: Any, tmp_path: Path, body: str = "") -> Any:
    """A pull request from a pushed branch `feature` adding `feature.txt`."""
    work = tmp_path / "work"
    env = {"GIT_AUTHOR_NAME": "D", "GIT_AUTHOR_EMAIL": "d@e", "GIT_COMMITTER_NAME": "D"}
    env |= {"GIT_COMMITTER_EMAIL": "d@e", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    for args in (
        ["clone", "-q", repo.clone_url, str(work)],
        ["-C", str(work), "checkout", "-q", "-b", "feature"],
    ):
        subprocess.run(["git", *args], check=True, env=env, capture_output=True)
    (work / "feature.txt").write_text("one\ntwo\n")
    for args in (["add", "."], ["commit", "-q", "-m", "feature"], ["push", "-q", "origin", "HEAD"]):
        subprocess.run(["git", "-C", str(work), *args], check=True, env=env, capture_output=True)
    return repo.create_pull(title="Feature", body=body, head="feature", base="main")


def test_an_issues_events_say_what_happened_to_it_by_whom(repo: Any, clock: FakeClock) -> None:
    milestone = repo.create_milestone("v1")
    issue = repo.create_issue("Old title", labels=["bug"], milestone=milestone)
    clock.advance(60)
    issue.add_to_labels("question")
    issue.remove_from_labels("bug")
    issue.edit(title="New title", state="closed", state_reason="not_planned")
    issue.edit(state="open")
    issue.lock("resolved")
    issue.create_comment("people's word is not an event")

    events = list(issue.get_events())

    assert [e.event for e in events] == [
        "labeled",
        "milestoned",
        "labeled",
        "unlabeled",
        "renamed",
        "closed",
        "reopened",
        "locked",
    ]
    assert [e.label.name for e in events if e.event.endswith("labeled")] == [
        "bug",
        "question",
        "bug",
    ]
    assert events[1].milestone.title == "v1"
    assert events[4].rename == {"from": "Old title", "to": "New title"}
    assert events[5].raw_data["state_reason"] == "not_planned"
    assert events[7].lock_reason == "resolved"
    assert {e.actor.login for e in events} == {"forge-user"}
    assert events[0].created_at == datetime.fromtimestamp(clock() - 60, UTC)
    one = repo.get_issues_event(events[4].id)
    assert (one.event, one.issue.number) == ("renamed", issue.number)
    listed = list(repo.get_issues_events())
    assert [e.id for e in listed] == [e.id for e in reversed(events)]  # newest first


def test_a_merge_records_merged_and_closed_and_closes_what_it_names(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    issue = repo.create_issue("Bug to fix")
    pull = pushed_pull(repo, tmp_path, body=f"Fixes #{issue.number}")

    merged = pull.merge(merge_method="merge")

    assert [(e.event, e.commit_id) for e in pull.as_issue().get_events()] == [
        ("merged", merged.sha),
        ("closed", None),
    ]
    closing = list(repo.get_issue(issue.number).get_events())
    assert [(e.event, e.commit_id) for e in closing] == [("closed", merged.sha)]
    assert closing[0].commit_url == f"{repo.url}/commits/{merged.sha}"
    status, _ = fetch_json(closing[0].commit_url)
    assert status == 200


def test_the_timeline_lists_events_among_what_people_said(repo: Any, clock: FakeClock) -> None:
    issue = repo.create_issue("Talk", labels=["bug"])
    clock.advance(1)
    issue.create_comment("first")
    clock.advance(1)
    issue.edit(state="closed")

    kinds = [event.event for event in issue.get_timeline()]

    assert kinds == ["labeled", "commented", "closed"]


def test_a_repositorys_issue_comments_list_sorted_and_since(repo: Any, clock: FakeClock) -> None:
    one, two = repo.create_issue("one"), repo.create_issue("two")
    first = one.create_comment("first")
    clock.advance(60)
    second = two.create_comment("second")
    clock.advance(60)
    first.edit("first, edited")
    later = datetime.fromtimestamp(clock() - 30, UTC)

    by_id = [c.body for c in repo.get_issues_comments()]
    by_update = [c.body for c in repo.get_issues_comments(sort="updated", direction="desc")]
    oldest = [c.body for c in repo.get_issues_comments(sort="created", direction="asc")]
    since = [c.body for c in repo.get_issues_comments(since=later)]

    assert by_id == ["first, edited", "second"]
    assert by_update == ["first, edited", "second"]
    assert oldest == ["first, edited", "second"]
    assert [c.body for c in repo.get_issues_comments(sort="created")] == ["second", "first, edited"]
    assert since == ["first, edited"]
    assert [c.issue_url.rsplit("/", 1)[1] for c in repo.get_issues_comments()] == ["1", "2"]
    assert second.id > first.id
    with pytest.raises(GithubException) as bad:
        repo.get_issues_comments(sort="nonsense").totalCount  # noqa: B018
    assert bad.value.status == 422


def test_a_repositorys_review_comments_list_and_each_answers_at_its_url(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    pull = pushed_pull(repo, tmp_path)
    head = repo.get_commit(pull.head.sha)
    as_reviewer = collaborator_pull(hub, pull)
    as_reviewer.create_review(
        body="see", event="COMMENT", comments=[{"path": "feature.txt", "line": 1, "body": "a"}]
    )
    pull.create_review_comment("b", head, "feature.txt", line=2)

    listed = list(repo.get_pulls_review_comments())
    status, one = fetch_json(listed[1].url)

    assert [(c.body, c.path, c.line) for c in listed] == [
        ("a", "feature.txt", 1),
        ("b", "feature.txt", 2),
    ]
    assert [c.body for c in repo.get_pulls_review_comments(sort="created", direction="desc")] == [
        "b",
        "a",
    ]
    assert status == 200 and one["body"] == "b" and one["pull_request_url"] == pull.url
    assert fetch_json(f"{repo.url}/pulls/comments/999")[0] == 404
