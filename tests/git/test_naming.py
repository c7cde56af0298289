"""The names the harness reads from git URLs: which repository a remote pushes to."""

from __future__ import annotations

import pytest

from agent_harness.git.naming import repo_named

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("https://github.com/Me/App.git", "me/app"),
        ("https://x-access-token:t0k@github.com/me/app", "me/app"),
        ("git@github.com:me/app.git", "me/app"),
        ("github-work:me/app.git", "me/app"),  # an ssh host alias
        ("ssh://git@ghe.example:2222/me/app/", "me/app"),
        ("/srv/forge/git/me/app.git", "me/app"),
        ("file:///srv/forge/git/me/app.git", "me/app"),
        ("../forge/git/me/app.git", "me/app"),
        ("/tmp/elsewhere/github.git", "elsewhere/github"),
    ],
)
def test_a_remote_url_names_the_repository_it_ends_in(url: str, named: str) -> None:
    assert repo_named(url) == named
