"""Issues, comments, labels and milestones through PyGithub, and the errors GitHub would give."""

from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime
from typing import Any

import pytest
from github import GithubException, UnknownObjectException

from agent_harness.testing.clock import FakeClock
from agent_harness.testing.forge import TOKEN, RunningForge

pytestmark = pytest.mark.integration


def raw_get(url: str, **headers: str) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}", **headers})
    try:
        with urllib.request.urlopen(request) as response:
            body = response.read()
            return response.status, dict(response.headers), json.loads(body) if body else None
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return exc.code, dict(exc.headers), json.loads(body) if body else None


def test_issue_round_trip_with_labels_milestone_and_comments(repo: Any) -> None:
    milestone = repo.create_milestone("v1")
    issue = repo.create_issue(
        "Fix it", body="details", labels=["bug", "area/cli"], milestone=milestone
    )
    assert issue.number == 1
    assert {label.name for label in issue.labels} == {"bug", "area/cli"}
    assert issue.milestone.title == "v1"
    assert issue.user.login == "forge-user"

    issue.create_comment("first")
    issue.create_comment("second")
    issue.edit(
        title="Fix it now", labels=["enhancement"], state="closed", state_reason="not_planned"
    )

    again = repo.get_issue(1)
    assert again.title == "Fix it now"
    assert [label.name for label in again.labels] == ["enhancement"]
    assert again.state == "closed" and again.state_reason == "not_planned"
    assert again.closed_at is not None and again.closed_by.login == "forge-user"
    assert [c.body for c in again.get_comments()] == ["first", "second"]
    assert again.comments == 2
    assert repo.get_milestone(milestone.number).closed_issues == 1

    again.edit(state="open", milestone=None)
    reopened = repo.get_issue(1)
    assert reopened.state == "open" and reopened.state_reason == "reopened"
    assert reopened.closed_at is None and reopened.milestone is None


def test_new_repository_has_githubs_default_labels_and_new_ones_can_be_added(repo: Any) -> None:
    names = {label.name for label in repo.get_labels()}
    assert {"bug", "enhancement", "good first issue"} <= names
    created = repo.create_label("priority:high", "ff0000", "Do it first")
    assert (created.color, created.description) == ("ff0000", "Do it first")
    assert repo.get_label("PRIORITY:HIGH").name == "priority:high"  # names are case-insensitive
    # A label's url answers, as GitHub's does: its name percent-encoded (spaces, colons).
    for label in (repo.get_label("good first issue"), created):
        status, _, body = raw_get(label.url)
        assert (status, body["name"]) == (200, label.name)
        assert " " not in label.url


def test_pagination_links_across_250_issues(hub: RunningForge, repo: Any) -> None:
    for n in range(250):
        repo.create_issue(f"issue {n}")
    issues = repo.get_issues(state="all", direction="asc")
    assert issues.totalCount == 250
    assert [i.number for i in issues] == list(range(1, 251))

    url = f"{hub.server.api_url}/repos/forge-user/demo/issues?state=all&per_page=100&page=2"
    status, headers, body = raw_get(url)
    assert status == 200 and len(body) == 100
    links = {part.split('rel="')[1].rstrip('"'): part for part in headers["link"].split(", ")}
    assert set(links) == {"prev", "next", "last", "first"}
    assert (
        "page=3" in links["next"] and "page=3" in links["last"] and "per_page=100" in links["last"]
    )

    status, headers, body = raw_get(url.replace("page=2", "page=3"))
    assert len(body) == 50 and 'rel="next"' not in headers["link"]

    status, headers, body = raw_get(url.replace("per_page=100", "per_page=1000"))
    assert len(body) == 100  # GitHub caps per_page at 100

    status, headers, body = raw_get(f"{hub.server.api_url}/repos/forge-user/demo/issues")
    assert len(body) == 30  # and defaults to 30


def test_issue_filters_sort_since_and_labels(
    hub: RunningForge, repo: Any, clock: FakeClock
) -> None:
    first = repo.create_issue("old", labels=["bug"])
    clock.advance(3600)
    cutoff = datetime.fromtimestamp(clock(), UTC)
    repo.create_issue("new", labels=["bug", "enhancement"])
    clock.advance(60)
    closed = repo.create_issue("closed")
    closed.edit(state="closed")

    assert [i.title for i in repo.get_issues()] == ["new", "old"]  # open, newest first
    assert [i.title for i in repo.get_issues(state="all", since=cutoff)] == ["closed", "new"]
    bug = repo.get_label("bug")
    enhancement = repo.get_label("enhancement")
    assert [i.title for i in repo.get_issues(labels=[bug, enhancement])] == ["new"]
    clock.advance(60)
    first.create_comment("bump")
    updated = repo.get_issues(state="all", sort="updated", direction="desc")
    assert updated[0].title == "old"


def test_not_found_has_githubs_shape(hub: RunningForge, repo: Any) -> None:
    with pytest.raises(UnknownObjectException) as caught:
        repo.get_issue(999)
    assert caught.value.status == 404
    assert caught.value.data["message"] == "Not Found"
    assert caught.value.data["documentation_url"].startswith("https://docs.github.com/")
    with pytest.raises(UnknownObjectException):
        hub.github.get_repo("forge-user/nope")


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (
            lambda r: r.create_label("x", "red"),
            {"resource": "Label", "field": "color", "code": "invalid"},
        ),
        (
            lambda r: r.create_label("bug", "ff0000"),
            {"resource": "Label", "field": "name", "code": "already_exists"},
        ),
        (
            lambda r: r.create_issue(""),
            {"resource": "Issue", "field": "title", "code": "missing_field"},
        ),
        (
            lambda r: r.create_issue("t", body="x" * 65537),
            {"resource": "Issue", "field": "body", "code": "custom"},
        ),
        (
            lambda r: r.create_milestone("v1") and r.create_milestone("v1"),
            {"resource": "Milestone", "field": "title", "code": "already_exists"},
        ),
    ],
    ids=[
        "label-color",
        "label-duplicate",
        "issue-title",
        "issue-body-too-long",
        "milestone-duplicate",
    ],
)
def test_validation_failures_are_422_with_githubs_body(
    repo: Any, action: Any, error: dict[str, str]
) -> None:
    with pytest.raises(GithubException) as caught:
        action(repo)
    assert caught.value.status == 422
    assert caught.value.data["message"] == "Validation Failed"
    assert {k: caught.value.data["errors"][0][k] for k in error} == error
    assert "documentation_url" in caught.value.data


def test_issue_body_at_the_limit_is_accepted(repo: Any) -> None:
    assert len(repo.create_issue("t", body="x" * 65536).body) == 65536


def test_issue_labels_endpoints_add_and_remove(repo: Any) -> None:
    issue = repo.create_issue("labels")
    issue.add_to_labels("bug", "question")
    issue.remove_from_labels("bug")
    assert [label.name for label in repo.get_issue(issue.number).labels] == ["question"]
    issue.set_labels("wontfix")
    assert [label.name for label in repo.get_issue(issue.number).labels] == ["wontfix"]


def test_milestones_listing_by_state(repo: Any) -> None:
    repo.create_milestone("open one")
    repo.create_milestone("closed one", state="closed")
    assert [m.title for m in repo.get_milestones()] == ["open one"]
    assert {m.title for m in repo.get_milestones(state="all")} == {"open one", "closed one"}


def test_an_issue_carries_githubs_timeline_reactions_and_app_fields(
    hub: RunningForge, repo: Any
) -> None:
    issue = repo.create_issue("Count words")
    status, _, body = raw_get(f"{hub.server.api_url}/repos/forge-user/demo/issues/{issue.number}")
    assert status == 200
    url = f"{hub.server.api_url}/repos/forge-user/demo/issues/{issue.number}"
    assert body["timeline_url"] == f"{url}/timeline"
    assert body["performed_via_github_app"] is None
    assert body["reactions"] == {
        "url": f"{url}/reactions",
        "total_count": 0,
        "+1": 0,
        "-1": 0,
        "laugh": 0,
        "confused": 0,
        "heart": 0,
        "hooray": 0,
        "eyes": 0,
        "rocket": 0,
    }
    # PyGithub reads them too, as it does from GitHub.
    assert issue.reactions["total_count"] == 0
    listed = raw_get(f"{hub.server.api_url}/repos/forge-user/demo/issues")[2]
    assert all("timeline_url" in item and "reactions" in item for item in listed)
