"""The forge's read-only web pages: the `html_url` of a repository, an issue and a pull request
answers a browser (no token) with plain server-rendered HTML, everything in it escaped."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent_harness.testing.forge import RunningForge

pytestmark = pytest.mark.integration

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Dee",
    "GIT_AUTHOR_EMAIL": "dee@example.com",
    "GIT_COMMITTER_NAME": "Dee",
    "GIT_COMMITTER_EMAIL": "dee@example.com",
}


def browse(url: str) -> tuple[int, dict[str, str], str]:
    """What a browser gets: no Authorization header."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, env=GIT_ENV, capture_output=True)


def push_branch(repo: Any, tmp_path: Path, branch: str, name: str, text: str) -> None:
    work = tmp_path / f"clone-{branch}"
    git(tmp_path, "clone", "-q", repo.clone_url, str(work))
    git(work, "checkout", "-q", "-b", branch)
    (work / name).write_text(text)
    git(work, "add", name)
    git(work, "commit", "-q", "-m", f"Add {name}")
    git(work, "push", "-q", "origin", branch)


def test_a_pull_requests_page_shows_its_change_escaped_and_without_scripts(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    push_branch(repo, tmp_path, "feature", "words.py", "def count():\n    return '<b>'\n")
    pull = repo.create_pull(
        title="Count <words>", body="Closes #1\n<script>alert(1)</script>", head="feature",
        base="main",
    )  # fmt: skip
    pull.create_issue_comment("looks <i>fine</i>")

    status, headers, page = browse(pull.html_url)

    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "script-src 'none'" in headers["Content-Security-Policy"]
    assert "<script" not in page
    assert "Count &lt;words&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "looks &lt;i&gt;fine&lt;/i&gt;" in page
    assert "feature" in page and "main" in page
    assert "words.py" in page
    assert "+    return &#x27;&lt;b&gt;&#x27;" in page  # the diff, line by line
    assert "agent-harness forge merge forge-user/demo 1" in page
    assert 'href="/_html/forge-user/demo"' in page


def test_a_merged_pull_request_still_shows_what_it_changed(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    push_branch(repo, tmp_path, "feature", "lines.py", "LINES = 1\n")
    pull = repo.create_pull(title="Count lines", body="", head="feature", base="main")
    pull.merge(merge_method="merge")

    status, _, page = browse(pull.html_url)

    assert status == 200
    assert "Merged" in page
    assert "+LINES = 1" in page


def test_an_issue_page_and_the_repository_page(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    marker = '<!-- agent-harness {"id": "T1"} -->'  # hidden on GitHub's page, as here
    issue = repo.create_issue("Count words", body=f"Words are runs of non-space & such.\n{marker}")
    issue.create_comment(f"on it\n\n{marker}")
    issue.edit(state="closed")

    status, _, page = browse(issue.html_url)
    assert status == 200
    assert "Count words" in page and "#1" in page
    assert "Words are runs of non-space &amp; such." in page
    assert "on it" in page
    assert "agent-harness {" not in page and "&lt;!--" not in page
    assert "Closed" in page

    status, _, page = browse(repo.html_url)
    assert status == 200
    assert "forge-user/demo" in page
    assert 'href="/_html/forge-user/demo/issues/1"' in page
    assert repo.clone_url in page
    assert "Initial commit" in page  # the default branch's history


def test_an_empty_repository_page_says_how_to_push_into_it(hub: RunningForge) -> None:
    empty = hub.github.get_user().create_repo("empty", auto_init=False)
    status, _, page = browse(empty.html_url)
    assert status == 200
    assert f"git remote add origin {empty.clone_url}" in page
    assert "git push -u origin HEAD" in page


def test_what_is_not_there_is_a_404_page(hub: RunningForge, repo: Any) -> None:
    private = hub.github.get_user().create_repo("secret", private=True)
    for url in (
        f"{hub.server.api_url}/_html/forge-user/nope",
        f"{repo.html_url}/issues/99",
        f"{repo.html_url}/pull/abc",
        private.html_url,  # a visitor without a token sees no private repository
    ):
        status, headers, page = browse(url)
        assert status == 404, url
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert "Not found" in page


def test_an_issue_link_to_a_pull_request_leads_to_the_pull_requests_page(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    push_branch(repo, tmp_path, "feature", "a.txt", "a\n")
    pull = repo.create_pull(title="A", body="", head="feature", base="main")
    status, _, page = browse(f"{repo.html_url}/issues/{pull.number}")
    assert status == 200
    assert "agent-harness forge merge" in page


def test_pages_cost_no_rate_limit_and_are_not_api_requests(hub: RunningForge, repo: Any) -> None:
    mark = hub.forge.mark()
    before = hub.forge.limiter.peek("forge-token").remaining
    assert browse(repo.html_url)[0] == 200
    assert hub.forge.request_counts(mark) == {}
    assert hub.forge.limiter.peek("forge-token").remaining == before


def test_a_pulls_diff_patch_commit_file_and_author_pages(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    push_branch(repo, tmp_path, "feature", "page.py", "x = '<b>'\n")
    pull = repo.create_pull(title="Page", body="", head="feature", base="main")
    commit = pull.get_commits()[0]
    file = pull.get_files()[0]

    diff = browse(pull.diff_url)
    patch = browse(pull.patch_url)
    shown = browse(commit.html_url)
    blob = browse(file.blob_url)
    author = browse(repo.owner.html_url)

    assert diff[0] == 200 and diff[1]["Content-Type"] == "text/plain; charset=utf-8"
    assert "+x = '<b>'" in diff[2] and "diff --git a/page.py b/page.py" in diff[2]
    assert patch[0] == 200 and "Subject: [PATCH] Add page.py" in patch[2]
    assert shown[0] == 200 and "Add page.py" in shown[2] and "+x = &#x27;&lt;b&gt;" in shown[2]
    assert blob[0] == 200 and "x = &#x27;&lt;b&gt;&#x27;" in blob[2] and "<b>" not in blob[2]
    assert author[0] == 200 and 'href="/_html/forge-user/demo"' in author[2]
    assert browse(pull.diff_url.replace(f"/{pull.number}.diff", "/99.diff"))[0] == 404
