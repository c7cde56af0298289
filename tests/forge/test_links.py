"""Every link the forge hands out answers: each `url`, `*_url` and `_links` `href` in the answers
for a repository, an issue with a comment and a label, and a pull request with a review (and
what those list: the comment, the events, the reviews, the line comments, the commits, the
files) is followed, and each must answer below 400.

A few point at what the forge does not keep; GitHub would answer them, the forge says 404.
They are named below, with why, and the test fails if one of them stops being handed out
(so the list cannot outlive its reason) or if a link not named fails. URI templates
(`{/number}`) are not links until filled in, and are left alone.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent_harness.testing.forge import TOKEN, RunningForge, collaborator_pull

pytestmark = pytest.mark.integration

# Links the forge hands out, as GitHub does, without serving what is behind them: each is
# named as `<kind of object>.<field>`, a user's fields as `user.*`, a repository's (wherever
# it is nested) as `repository.*`.
NOT_SERVED = {
    # Social features the forge has none of: no followers, watchers, organization membership
    # or activity feeds.
    "user.followers_url": "the forge keeps no followers",
    "user.subscriptions_url": "nobody watches anything on the forge",
    "user.organizations_url": "the forge keeps no organization membership",
    "user.received_events_url": "the forge keeps no activity feed",
    "user.avatar_url": "the forge keeps no pictures (its pages may show no image at all)",
    "repository.events_url": "the forge keeps no activity feed",
    "repository.stargazers_url": "the forge has no stars",
    "repository.subscribers_url": "nobody watches anything on the forge",
    "repository.subscription_url": "nobody watches anything on the forge",
    "repository.forks_url": "the forge has no forks",
    # Repository settings and features the forge does not have.
    "repository.hooks_url": "the forge sends no webhooks",
    "repository.deployments_url": "the forge has no deployments",
    "repository.teams_url": "the forge has no teams",
    "repository.downloads_url": "GitHub retired downloads; the forge never had them",
    "repository.contributors_url": "commits are by email; the forge links none to accounts",
    "repository.languages_url": "the forge does not classify code by language",
    "repository.merges_url": "GitHub itself serves only POST there (merge a branch)",
    # Clone addresses: file:// URLs for git, not HTTP (tests clone through them elsewhere).
    "repository.git_url": "a file:// address for git",
    "repository.ssh_url": "a file:// address for git",
    "repository.clone_url": "a file:// address for git",
    # Reactions and commit comments: the forge keeps neither (the answers say none exist).
    "issue.reactions.url": "the forge keeps no reactions",
    "commit.comments_url": "the forge keeps no commit comments",
}


def fetch(url: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def answer(url: str) -> Any:
    status, body = fetch(url)
    assert status == 200, (url, status, body[:300])
    return json.loads(body)


def links(kind: str, value: Any, found: dict[str, set[str]]) -> None:
    """Every link in `value` (an answer of `kind`, or a part of one) into `found`, as
    name -> URLs: a field of a user is named `user.<field>`, of a repository
    `repository.<field>`, of anything else nested in an answer of `kind` `<kind>.<field>`
    (a reaction summary's `<kind>.reactions.url`)."""
    if isinstance(value, list):
        for item in value:
            links(kind, item, found)
        return
    if not isinstance(value, dict):
        return
    if "login" in value:
        kind = "user"
    elif "full_name" in value:
        kind = "repository"
    for key, item in value.items():
        if isinstance(item, str) and (key in ("url", "href") or key.endswith("_url")):
            if "{" not in item:  # a URI template, not a link
                found.setdefault(f"{kind}.{key}", set()).add(item)
        else:
            links(f"{kind}.reactions" if key == "reactions" else kind, item, found)


def open_pull(hub: RunningForge, repo: Any, tmp_path: Path) -> Any:
    work = tmp_path / "work"
    env = {"GIT_AUTHOR_NAME": "D", "GIT_AUTHOR_EMAIL": "d@e", "GIT_COMMITTER_NAME": "D"}
    env |= {"GIT_COMMITTER_EMAIL": "d@e", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    subprocess.run(["git", "clone", "-q", repo.clone_url, str(work)], check=True, env=env)
    (work / "docs").mkdir()
    (work / "docs" / "notes on it.md").write_text("# Notes\n")
    for args in (["add", "."], ["commit", "-q", "-m", "Notes"], ["push", "-q", "origin", "HEAD:x"]):
        subprocess.run(["git", "-C", str(work), *args], check=True, env=env, capture_output=True)
    pull = repo.create_pull(title="Notes", body="", head="x", base="main")
    collaborator_pull(hub, pull).create_review(
        body="ok",
        event="COMMENT",
        comments=[{"path": "docs/notes on it.md", "line": 1, "body": "k"}],
    )
    return pull


def test_every_link_in_the_answers_answers(hub: RunningForge, repo: Any, tmp_path: Path) -> None:
    issue = repo.create_issue("An issue", labels=["bug"])
    issue.create_comment("a comment")
    pull = open_pull(hub, repo, tmp_path)
    base = repo.url
    answers = {
        "repository": answer(base),
        "issue": answer(f"{base}/issues/{issue.number}"),
        "comment": answer(f"{base}/issues/{issue.number}/comments"),
        "event": answer(f"{base}/issues/{issue.number}/events"),
        "pull": answer(f"{base}/pulls/{pull.number}"),
        "review": answer(f"{base}/pulls/{pull.number}/reviews"),
        "review_comment": answer(f"{base}/pulls/{pull.number}/comments"),
        "commit": answer(f"{base}/pulls/{pull.number}/commits"),
        "file": answer(f"{base}/pulls/{pull.number}/files"),
    }
    found: dict[str, set[str]] = {}
    for kind, body in answers.items():
        assert body, kind  # each listing holds something to follow
        links(kind, body, found)

    failed = []
    followed = 0
    for name, urls in sorted(found.items()):
        if name in NOT_SERVED:
            continue
        for url in sorted(urls):
            parts = urllib.parse.urlsplit(url)
            assert f"{parts.scheme}://{parts.netloc}" == hub.server.api_url, (name, url)
            status, _ = fetch(urllib.parse.urldefrag(url).url)
            followed += 1
            if status >= 400:
                failed.append(f"{name}: {url} -> {status}")

    assert failed == []
    assert followed > 40
    assert sorted(set(NOT_SERVED) - set(found)) == []  # each named link is still handed out
