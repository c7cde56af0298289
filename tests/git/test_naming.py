"""The names the harness reads from git URLs (which repository a remote pushes to) and the
names it gives an item's session and folder."""

from __future__ import annotations

import hashlib

import pytest

from agent_harness.git.naming import item_dir_name, repo_named, session_name

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


def test_a_plain_short_session_name_reads_as_it_always_did() -> None:
    # A live agent of a run before this naming is found again after an upgrade.
    where = hashlib.sha256(b"/srv/state").hexdigest()[:6]
    assert session_name("octo/tally", "", "T1", "/srv/state") == f"ah-tally-T1-{where}"
    named = session_name("octo/my.app", "backend", "T12", "/srv/state")
    assert named == f"ah-my-app-backend-T12-{where}"


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("user-authentication-flow", "T1"), ("user-authentication-admin", "T1")),  # cut at 20
        (("v1.2", "T1"), ("v1-2", "T1")),  # cleaned alike
        (("", "T1.2"), ("", "T1-2")),
        (("", "T" + "1" * 50), ("", "T" + "1" * 51)),
    ],
)
def test_two_plans_or_items_never_share_a_session_or_a_folder(
    one: tuple[str, str], other: tuple[str, str]
) -> None:
    assert session_name("o/r", *one, "/s") != session_name("o/r", *other, "/s")
    assert item_dir_name(one[1], one[0]) != item_dir_name(other[1], other[0])
    assert item_dir_name("T1", "") != item_dir_name("T1", "backend")
