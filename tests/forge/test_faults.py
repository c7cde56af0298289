"""Injected faults as a PyGithub user meets them: rate limits, 5xx, latency, dropped sockets."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
import requests
from github import BadCredentialsException, GithubException, RateLimitExceededException
from urllib3.util import Retry

from agent_harness.testing.clock import FakeClock
from agent_harness.testing.forge import TOKEN, RecordingSleep, RunningForge, make_client

pytestmark = pytest.mark.integration


def test_secondary_rate_limit_403_is_pygithubs_rate_limit_exception(
    hub: RunningForge, repo: Any
) -> None:
    hub.forge.faults.inject("secondary_rate_limit", "POST", "*/issues", retry_after=42)
    with pytest.raises(RateLimitExceededException) as caught:
        repo.create_issue("throttled")
    assert caught.value.status == 403
    assert caught.value.headers["retry-after"] == "42"
    assert caught.value.data["message"].startswith("You have exceeded a secondary rate limit")
    assert repo.create_issue("next one passes").number == 1


def test_secondary_rate_limit_429_variant(hub: RunningForge, repo: Any) -> None:
    hub.forge.faults.inject("secondary_rate_limit_429", "GET", "/repos/{owner}/{repo}/issues")
    with pytest.raises(GithubException) as caught:
        list(repo.get_issues())
    # PyGithub maps only 403 to RateLimitExceededException; a 429 arrives as its status.
    assert caught.value.status == 429
    assert caught.value.headers["retry-after"] == "60"
    assert "secondary rate limit" in caught.value.data["message"]


def test_primary_exhaustion_fault_carries_reset(
    hub: RunningForge, repo: Any, clock: FakeClock
) -> None:
    hub.forge.faults.inject("primary_rate_limit", path="/repos/*", reset_in_s=120)
    with pytest.raises(RateLimitExceededException) as caught:
        repo.get_issue(1)
    assert caught.value.headers["x-ratelimit-remaining"] == "0"
    assert int(caught.value.headers["x-ratelimit-reset"]) == int(clock()) + 120


@pytest.mark.parametrize("status", [502, 503])
def test_server_errors_then_recovery(hub: RunningForge, repo: Any, status: int) -> None:
    hub.forge.faults.inject("status", "POST", "*/issues", count=2, status=status)
    for _ in range(2):
        with pytest.raises(GithubException) as caught:
            repo.create_issue("flaky")
        assert caught.value.status == status
    assert repo.get_issues().totalCount == 0  # the GET was not hit by a POST fault
    assert repo.create_issue("third time").number == 1


def test_a_retrying_client_rides_out_a_503(hub: RunningForge, repo: Any) -> None:
    retry = Retry(total=3, status_forcelist=[503], backoff_factor=0, allowed_methods=None)
    client = make_client(hub.server.api_url, retry=retry)
    hub.forge.faults.inject("status", "GET", "/repos/{owner}/{repo}", count=2, status=503)
    mark = hub.forge.mark()
    assert client.get_repo("forge-user/demo").name == "demo"
    assert hub.forge.request_counts(mark) == {"GET /repos/{owner}/{repo}": 3}


def test_latency_is_injected_through_the_forges_sleep(
    hub: RunningForge, repo: Any, sleeps: RecordingSleep
) -> None:
    hub.forge.faults.inject("latency", "GET", "*", delay_s=2.5, count=None)
    assert repo.get_labels().totalCount > 0
    repo.get_issues().totalCount  # noqa: B018
    assert sleeps.calls == [2.5, 2.5]
    hub.forge.faults.clear()
    repo.get_labels().totalCount  # noqa: B018
    assert len(sleeps.calls) == 2


def test_dropped_connection_is_a_connection_error(hub: RunningForge, repo: Any) -> None:
    hub.forge.faults.inject("drop", "POST", "*/comments")
    issue = repo.create_issue("talk")
    with pytest.raises(requests.exceptions.ConnectionError):
        issue.create_comment("lost")
    issue.create_comment("arrives")
    assert [c.body for c in issue.get_comments()] == ["arrives"]


def test_faults_via_the_http_control_endpoint(hub: RunningForge, repo: Any) -> None:
    body = json.dumps({"kind": "status", "method": "GET", "path": "*/labels", "status": 502})
    req = urllib.request.Request(
        f"{hub.server.api_url}/_forge/faults",
        data=body.encode(),
        method="POST",
        headers={"Authorization": f"token {TOKEN}"},
    )
    with urllib.request.urlopen(req) as response:
        assert response.status == 201
        assert json.loads(response.read())["count"] == 1
    with pytest.raises(GithubException) as caught:
        repo.get_labels().totalCount  # noqa: B018
    assert caught.value.status == 502
    assert repo.get_labels().totalCount > 0


def test_bad_credentials_answers_401_until_cleared(hub: RunningForge, repo: Any) -> None:
    hub.forge.faults.inject("bad_credentials", count=None)
    for _ in range(2):
        with pytest.raises(BadCredentialsException) as caught:
            repo.get_issues().totalCount  # noqa: B018
        assert caught.value.status == 401
        assert caught.value.data["message"] == "Bad credentials"
    hub.forge.faults.clear()  # the token is fixed
    assert repo.create_issue("works again").number == 1
