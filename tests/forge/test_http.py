"""GitHub's HTTP conventions: auth, ETags, the primary rate limit, permissions, accounting."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from github import BadCredentialsException, GithubException, RateLimitExceededException

from agent_harness.testing.clock import FakeClock
from agent_harness.testing.forge import (
    READ_ONLY_TOKEN,
    TOKEN,
    RunningForge,
    make_client,
    running_forge,
)

pytestmark = pytest.mark.integration


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def request(
    url: str, method: str = "GET", token: str | None = TOKEN, body: Any = None, **headers: str
) -> tuple[int, dict[str, str], Any]:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req) as response:
            raw = response.read()
            status, out_headers = response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        raw, status, out_headers = exc.read(), exc.code, dict(exc.headers)
    return status, {k.lower(): v for k, v in out_headers.items()}, json.loads(raw) if raw else None


def test_etag_and_if_none_match_answer_304_without_spending_rate_limit(
    hub: RunningForge, repo: Any
) -> None:
    url = f"{hub.server.api_url}/repos/forge-user/demo/issues"
    status, headers, _ = request(url)
    assert status == 200 and headers["etag"].startswith('W/"')
    remaining = int(headers["x-ratelimit-remaining"])

    status, again, body = request(url, **{"If-None-Match": headers["etag"]})
    assert status == 304 and body is None
    assert int(again["x-ratelimit-remaining"]) == remaining  # a 304 is free

    repo.create_issue("changes the listing")
    status, changed, _ = request(url, **{"If-None-Match": headers["etag"]})
    assert status == 200 and changed["etag"] != headers["etag"]
    assert int(changed["x-ratelimit-remaining"]) == remaining - 2  # the POST and this GET


def test_rate_limit_headers_exhaustion_and_reset(tmp_path: Path) -> None:
    clock = FakeClock()
    with running_forge(tmp_path, rate_limit=3, clock=clock) as hub:
        url = f"{hub.server.api_url}/user"
        status, headers, _ = request(url)
        assert status == 200
        assert headers["x-ratelimit-limit"] == "3"
        assert (headers["x-ratelimit-remaining"], headers["x-ratelimit-used"]) == ("2", "1")
        assert headers["x-ratelimit-resource"] == "core"
        reset = int(headers["x-ratelimit-reset"])
        assert reset == int(clock()) + 3600

        hub.github.get_user().login  # noqa: B018 - spends the second request
        assert hub.github.get_rate_limit().resources.core.remaining == 1  # /rate_limit is free
        request(url)
        with pytest.raises(RateLimitExceededException) as caught:
            hub.github.get_user().login  # noqa: B018
        assert caught.value.status == 403
        assert caught.value.headers["x-ratelimit-remaining"] == "0"
        assert caught.value.data["message"].startswith("API rate limit exceeded for user ID")

        clock.advance(3600)  # the window resets at x-ratelimit-reset
        status, headers, _ = request(url)
        assert status == 200 and headers["x-ratelimit-remaining"] == "2"


def test_bad_and_missing_credentials_are_401(hub: RunningForge) -> None:
    with pytest.raises(BadCredentialsException) as caught:
        make_client(hub.server.api_url, token="wrong").get_user().login  # noqa: B018
    assert caught.value.status == 401
    assert caught.value.data["message"] == "Bad credentials"
    assert caught.value.data["documentation_url"].startswith("https://docs.github.com/")
    status, _, body = request(f"{hub.server.api_url}/user", token=None)
    assert (status, body["message"]) == (401, "Requires authentication")


def test_the_base_url_the_forge_prints_answers_as_githubs_root_does(hub: RunningForge) -> None:
    status, _, body = request(f"{hub.server.api_url}/", token=None)
    assert status == 200
    assert body["current_user_url"] == f"{hub.server.api_url}/user"
    with urllib.request.urlopen(body["html_url"]) as page:  # the pages, for a browser
        assert page.status == 200 and "text/html" in page.headers["Content-Type"]


def test_read_only_token_reads_but_cannot_write(hub: RunningForge, repo: Any) -> None:
    reader = make_client(hub.server.api_url, token=READ_ONLY_TOKEN)
    readable = reader.get_repo("forge-user/demo")
    assert readable.full_name == "forge-user/demo"
    with pytest.raises(GithubException) as caught:
        readable.create_issue("nope")
    assert caught.value.status == 403
    assert repo.get_issues(state="all").totalCount == 0


def test_archived_repository_refuses_writes_with_403(hub: RunningForge, repo: Any) -> None:
    repo.create_issue("before")
    repo.edit(archived=True)
    assert hub.github.get_repo("forge-user/demo").archived is True
    with pytest.raises(GithubException) as caught:
        repo.create_issue("after")
    assert caught.value.status == 403
    assert caught.value.data["message"] == "Repository was archived so is read-only."
    assert [i.title for i in repo.get_issues()] == ["before"]  # reads still work


def test_repository_creation_for_user_and_org_and_duplicates(hub: RunningForge) -> None:
    org_repo = hub.github.get_organization("acme").create_repo("tool", description="d")
    assert (org_repo.full_name, org_repo.owner.login, org_repo.description) == (
        "acme/tool",
        "acme",
        "d",
    )
    empty = hub.github.get_user().create_repo("empty")
    assert empty.default_branch == "main"
    assert empty.get_branches().totalCount == 0  # no auto_init, no commits, as on GitHub
    with pytest.raises(GithubException) as caught:
        hub.github.get_user().create_repo("empty")
    assert caught.value.status == 422


def test_the_first_branch_pushed_to_an_empty_repository_becomes_its_default(
    hub: RunningForge, tmp_path: Path
) -> None:
    # As on GitHub. The forge kept `main`, unborn, after a user pushed their `master`: every
    # item then failed "git rev-parse main ... unknown revision".
    empty = hub.github.get_user().create_repo("trunkless")
    clone = tmp_path / "clone"
    git(tmp_path, "init", "-q", "-b", "master", str(clone))
    git(clone, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty",
        "-m", "first")  # fmt: skip
    git(clone, "push", "-q", hub.forge.clone_url("forge-user", "trunkless"), "master")
    again = hub.github.get_repo(empty.full_name)
    assert again.default_branch == "master"
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", hub.forge.clone_url("forge-user", "trunkless"), str(fresh))
    assert git(fresh, "rev-parse", "--abbrev-ref", "HEAD") == "master"


def test_a_new_default_branch_is_the_bare_repositorys_head_and_must_exist(
    hub: RunningForge, repo: Any, tmp_path: Path
) -> None:
    repo.create_git_ref("refs/heads/trunk", repo.get_branch("main").commit.sha)
    repo.edit(default_branch="trunk")
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", hub.forge.clone_url("forge-user", "demo"), str(fresh))
    assert git(fresh, "rev-parse", "--abbrev-ref", "HEAD") == "trunk"  # was: HEAD to nowhere
    with pytest.raises(GithubException) as caught:
        repo.edit(default_branch="no-such-branch")
    assert caught.value.status == 422


def test_request_accounting_by_route_template(hub: RunningForge, repo: Any) -> None:
    mark = hub.forge.mark()
    repo.create_issue("one")
    repo.create_issue("two")
    list(repo.get_issues())
    repo.get_issue(1)
    assert hub.forge.request_counts(mark) == {
        "POST /repos/{owner}/{repo}/issues": 2,
        "GET /repos/{owner}/{repo}/issues": 1,
        "GET /repos/{owner}/{repo}/issues/{issue_number}": 1,
    }

    base = hub.server.api_url
    status, _, body = request(f"{base}/_forge/mark", method="POST")
    assert status == 200
    repo.get_labels().totalCount  # noqa: B018
    status, _, counts = request(f"{base}/_forge/requests?since={body['mark']}")
    assert counts["counts"] == {"GET /repos/{owner}/{repo}/labels": 1}
    status, _, _ = request(f"{base}/_forge/requests", token=READ_ONLY_TOKEN)
    assert status == 401  # control endpoints want the forge's own token


@pytest.mark.parametrize(
    "body",
    [
        b'{"title": ' + b"[" * 5000,
        b'{"title": "x", "n": ' + b"9" * 5000 + b"}",
        # NaN, which JSON has not, came back in the forge's answer, which no strict reader can
        # then read.
        b'{"title": "x", "milestone": NaN}',
        b'{"title": "x", "n": -Infinity}',
        b'{"title": "x", "n": 1e400}',
    ],
    ids=["deep", "long number", "NaN", "Infinity", "infinite"],
)
def test_a_body_json_cannot_hold_is_a_400(hub: RunningForge, repo: Any, body: bytes) -> None:
    req = urllib.request.Request(
        f"{hub.server.api_url}/repos/{repo.full_name}/issues",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["message"] == "Problems parsing JSON"


def test_half_a_surrogate_pair_is_stored_as_the_replacement_character(
    hub: RunningForge, repo: Any
) -> None:
    # Read as it came, it failed the forge when it stored the issue: a 500.
    req = urllib.request.Request(
        f"{hub.server.api_url}/repos/{repo.full_name}/issues",
        data=b'{"title": "cut \\ud83d", "body": "\\udfff"}',
        method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as answer:
        assert answer.status == 201
        number = json.loads(answer.read())["number"]
    issue = repo.get_issue(number)
    assert (issue.title, issue.body) == ("cut \ufffd", "\ufffd")


def test_a_client_hanging_up_is_quiet_but_a_forge_bug_is_still_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A killed client used to leave a ConnectionResetError traceback per half-open connection.
    from agent_harness.forge.server import _Handler, _Server

    server = _Server(("127.0.0.1", 0), _Handler)
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            server.handle_error(None, ("127.0.0.1", 9))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a bug in a route")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 9))
        assert "ValueError: a bug in a route" in capsys.readouterr().err
    finally:
        server.server_close()


def _post(hub: RunningForge, path: str, body: dict[str, object]) -> tuple[int, dict[str, str]]:
    req = urllib.request.Request(
        f"{hub.server.api_url}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req) as answer:
            return answer.status, dict(answer.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/orgs/%2Ftmp%2Fescaped/repos", "evil"),  # an absolute path as the organization
        ("/orgs/..%2F..%2Fescaped/repos", "evil"),  # and a relative one
        ("/orgs/zz%0D%0AX-Injected:%20yes/repos", "r"),  # CR LF into the Location header
        ("/user/repos", "nl\n"),  # `$` let a trailing newline through
        ("/user/repos", ".."),
    ],
    ids=["absolute", "relative", "crlf", "newline", "dotdot"],
)
def test_a_name_that_leads_out_of_the_data_or_into_a_header_makes_no_repository(
    hub: RunningForge, tmp_path: Path, path: str, name: str
) -> None:
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    status, headers = _post(hub, path, {"name": name})
    assert status in (404, 422)
    assert "X-Injected" not in headers
    made = sorted(str(p) for p in tmp_path.rglob("*.git"))
    assert made == sorted(p for p in before if p.endswith(".git"))
    assert not Path("/tmp/escaped").exists()


@pytest.mark.parametrize(
    ("length", "status"), [("abc", 400), ("1e20", 400), ("-1", 400), (str(10**9), 413)]
)
def test_a_content_length_that_is_no_size_or_too_big_is_refused_before_reading(
    hub: RunningForge, length: str, status: int
) -> None:
    # Before: `abc` and `1e20` were 500s, `-1` read until the client hung up, and a body of
    # any size was read into memory.
    import http.client

    host, port = hub.server.api_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port.split("/")[0]), timeout=10)
    conn.putrequest("POST", "/user/repos")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", length)
    conn.endheaders()
    answer = conn.getresponse()
    assert answer.status == status
    conn.close()


@pytest.mark.parametrize(
    "path",
    [
        "/issues/99999999999999999999999",
        "/pulls/9223372036854775808",
        "/issues/" + "9" * 5000,
    ],
)
def test_a_number_past_any_stored_id_is_a_404_not_a_500(
    hub: RunningForge, repo: Any, path: str
) -> None:
    req = urllib.request.Request(
        f"{hub.server.api_url}/repos/{repo.full_name}{path}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req)
    assert refused.value.code == 404


def test_a_rename_with_a_bad_field_changes_nothing(hub: RunningForge, repo: Any) -> None:
    # Before: the bare repository moved to the new name, then the row's update failed (500),
    # and every later read of the repository's git was a 500.
    req = urllib.request.Request(
        f"{hub.server.api_url}/repos/{repo.full_name}",
        data=json.dumps({"name": "renamed", "description": 10**30}).encode(),
        method="PATCH",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req)
    assert refused.value.code == 422
    again = hub.github.get_repo(repo.full_name)
    assert again.name == "demo" and [b.name for b in again.get_branches()] == ["main"]
