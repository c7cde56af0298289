"""GitHub's label rules (50-character names, case-blind uniqueness) and the drop_after fault."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from github import GithubException

from agent_harness.testing.forge import RunningForge

pytestmark = pytest.mark.integration


def test_label_name_over_50_characters_is_refused_with_githubs_body(repo: Any) -> None:
    repo.create_label("x" * 50, "ededed")  # exactly at the limit is fine
    with pytest.raises(GithubException) as caught:
        repo.create_label("y" * 51, "ededed")
    assert caught.value.status == 422
    assert caught.value.data["errors"] == [
        {
            "resource": "Label",
            "field": "name",
            "code": "custom",
            "message": "name is too long (maximum is 50 characters)",
        }
    ]
    with pytest.raises(GithubException) as renamed:
        repo.get_label("bug").edit("z" * 51, "d73a4a")
    assert renamed.value.status == 422
    assert "y" * 51 not in [label.name for label in repo.get_labels()]


def test_label_names_are_unique_without_regard_to_case(repo: Any) -> None:
    with pytest.raises(GithubException) as caught:
        repo.create_label("Bug", "ededed")
    assert caught.value.status == 422
    assert caught.value.data["errors"][0]["code"] == "already_exists"
    assert repo.get_label("BUG").name == "bug"
    issue = repo.create_issue("case", labels=["BUG"])
    issue.add_to_labels("Documentation")
    assert [label.name for label in issue.get_labels()] == ["bug", "documentation"]
    names = [label.name.lower() for label in repo.get_labels()]
    assert len(names) == len(set(names))


def test_drop_after_applies_the_write_and_never_answers(hub: RunningForge, repo: Any) -> None:
    issue = repo.create_issue("talk")
    hub.forge.faults.inject("drop_after", "POST", "*/comments")
    with pytest.raises(requests.exceptions.ConnectionError):
        issue.create_comment("landed anyway")
    assert [c.body for c in issue.get_comments()] == ["landed anyway"]
    assert hub.forge.faults.pending() == []


def test_a_long_label_named_on_an_issue_is_refused_as_invalid(repo: Any) -> None:
    with pytest.raises(GithubException) as caught:
        repo.create_issue("long", labels=["w" * 51])
    assert caught.value.status == 422
    assert caught.value.data["errors"][0] == {
        "resource": "Label",
        "field": "name",
        "code": "invalid",
        "value": "w" * 51,
    }
    assert repo.get_issues(state="all").totalCount == 0
