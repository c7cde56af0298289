"""What CI and reviewers say about a pull request, through PyGithub on loopback: statuses,
check runs, reviews with line comments, mergeable_state from real git, branch protection,
issue search, lock, rename; and the headers of write answers."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from github import GithubException

from agent_harness.testing.forge import COLLABORATOR, TOKEN, RunningForge, collaborator_pull
from tests.forge.test_pulls import git, push_branch

pytestmark = pytest.mark.integration


@pytest.fixture
def clone(tmp_path: Path, repo: Any) -> Path:
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", repo.clone_url, str(work)], check=True)
    return work


def test_statuses_and_check_runs_fold_into_the_combined_state(
    hub: RunningForge, repo: Any, clone: Path
) -> None:
    sha = push_branch(clone, "feature", "a.txt", "one\n")
    commit = repo.get_commit(sha)
    commit.create_status("pending", context="lint")
    commit.create_status("success", context="lint", description="clean")
    commit.create_status("failure", context="tests", target_url="http://ci/1")
    combined = commit.get_combined_status()
    assert combined.state == "failure"
    assert sorted(s.context for s in combined.statuses) == ["lint", "tests"]
    # The routing bug: `.../commits/{sha}/statuses` is the list, not a commit named so.
    _, listed = repo._requester.requestJsonAndCheck("GET", f"{repo.url}/commits/{sha}/statuses")
    assert [s["state"] for s in listed] == ["failure", "success", "pending"]
    assert [s.state for s in commit.get_statuses()] == ["failure", "success", "pending"]

    run = repo.create_check_run("ci", sha, status="in_progress")
    assert run.status == "in_progress" and run.conclusion is None
    run.edit(conclusion="failure", output={"title": "ci", "summary": "2 failed", "text": "tail"})
    runs = list(commit.get_check_runs())
    assert [(r.name, r.status, r.conclusion) for r in runs] == [("ci", "completed", "failure")]
    assert runs[0].output.summary == "2 failed" and runs[0].output.text == "tail"
    with pytest.raises(GithubException) as bad:
        repo.create_check_run("ci", "0" * 40)
    assert bad.value.status == 422


def test_reviews_line_comments_and_mergeable_state(
    hub: RunningForge, repo: Any, clone: Path
) -> None:
    push_branch(clone, "feature", "a.txt", "one\ntwo\n")
    pull = repo.create_pull(title="f", body="", head="feature", base="main")
    assert repo.get_pull(pull.number).mergeable_state == "clean"
    before = repo.get_pull(pull.number).updated_at
    hub.forge.clock.advance(5)  # type: ignore[attr-defined]
    (clone / "a.txt").write_text("one\ntwo\n\n")
    git(clone, "commit", "-q", "-am", "a push to the head")
    git(clone, "push", "-q", "origin", "feature")
    pushed = repo.get_pull(pull.number)  # a push moves the pull, as GitHub's synchronize
    assert pushed.updated_at > before and pushed.head.sha == git(clone, "rev-parse", "HEAD")
    before = pushed.updated_at
    hub.forge.clock.advance(5)  # type: ignore[attr-defined]
    for event, words in (
        ("APPROVE", "Can not approve your own pull request"),
        ("REQUEST_CHANGES", "Can not request changes on your own pull request"),
    ):  # as on GitHub, its author may comment on a pull request but not judge it
        with pytest.raises(GithubException) as own:
            pull.create_review(body="mine", event=event)
        assert own.value.status == 422 and own.value.data["errors"] == [words]
    assert list(pull.get_reviews()) == []
    review = collaborator_pull(hub, pull).create_review(
        body="Please fix",
        event="REQUEST_CHANGES",
        comments=[
            {"path": "a.txt", "line": 1, "body": "say uno"},
            {"path": "a.txt", "line": 2, "body": "say dos"},
        ],
    )
    assert review.state == "CHANGES_REQUESTED"
    assert (review.user.login, review.raw_data["author_association"]) == (
        COLLABORATOR,
        "COLLABORATOR",
    )
    assert repo.get_pull(pull.number).updated_at > before  # a review moves updated_at
    comments = [(c.path, c.line, c.body) for c in pull.get_review_comments()]
    assert comments == [("a.txt", 1, "say uno"), ("a.txt", 2, "say dos")]
    # `since` in any zone is the same moment; a time that is no time is refused, not compared
    # as text (which matched everything or nothing).
    stamp = pull.get_review_comments()[0].updated_at.replace(tzinfo=dt.UTC)
    ahead = stamp.astimezone(dt.timezone(dt.timedelta(hours=2))).isoformat()  # the same moment
    url = f"{hub.server.api_url}/repos/{repo.full_name}/pulls/{pull.number}/comments"
    auth = {"Authorization": f"token {TOKEN}"}
    assert len(httpx.get(url, params={"since": ahead}, headers=auth).json()) == 2
    assert httpx.get(url, params={"since": "yesterday"}, headers=auth).status_code == 422
    assert [r.state for r in pull.get_reviews()] == ["CHANGES_REQUESTED"]
    with pytest.raises(GithubException) as bad:
        pull.create_review(body="x", event="COMMENT", comments=[{"path": "nope", "body": "b"}])
    assert bad.value.status == 422

    # The base moves on without touching a.txt: still clean, unless protection requires an
    # up-to-date branch (then behind); then it changes a.txt too: dirty.
    push_branch(clone, "main", "b.txt", "other\n", base="main")
    assert repo.get_pull(pull.number).mergeable_state == "clean"
    repo.get_branch("main").edit_protection(strict=True, contexts=[])
    assert repo.get_pull(pull.number).mergeable_state == "behind"
    push_branch(clone, "main", "a.txt", "uno\n", base="main")
    fresh = repo.get_pull(pull.number)
    assert (fresh.mergeable, fresh.mergeable_state) == (False, "dirty")


def test_branch_protection_is_met_by_a_merge_or_refused_with_405(
    hub: RunningForge, repo: Any, clone: Path
) -> None:
    sha = push_branch(clone, "feature", "a.txt", "one\n")
    pull = repo.create_pull(title="f", body="", head="feature", base="main")
    main = repo.get_branch("main")
    main.edit_protection(strict=True, contexts=["ci"], required_approving_review_count=1)
    assert repo.get_branch("main").protected
    assert main.get_protection().required_status_checks.contexts == ["ci"]
    with pytest.raises(GithubException) as refused:
        pull.merge()
    assert refused.value.status == 405 and "ci" in refused.value.data["message"]
    repo.create_check_run("ci", sha, conclusion="success")
    with pytest.raises(GithubException) as unreviewed:
        pull.merge()
    assert "approving review" in unreviewed.value.data["message"]
    collaborator_pull(hub, pull).create_review(event="APPROVE")
    assert pull.merge().merged
    main.remove_protection()
    with pytest.raises(GithubException) as gone:
        main.get_protection()
    assert gone.value.status == 404


def test_search_lock_rename_and_write_headers(hub: RunningForge, repo: Any, clone: Path) -> None:
    sha = push_branch(clone, "feature", "a.txt", "one\n")
    pull = repo.create_pull(title="failing thing", body="", head="feature", base="main")
    repo.create_issue("plain issue")
    repo.create_check_run("ci", sha, conclusion="failure")
    found = hub.github.search_issues("repo:forge-user/demo is:pr is:open status:failure")
    assert [i.number for i in found] == [pull.number]
    assert [i.title for i in hub.github.search_issues("repo:forge-user/demo plain")] == [
        "plain issue"
    ]
    with pytest.raises(GithubException) as unknown:
        list(hub.github.search_issues("repo:forge-user/demo reactions:>5"))
    assert unknown.value.status == 422

    issue = repo.get_issue(pull.number)
    issue.lock("resolved")
    assert repo.get_issue(pull.number).locked
    issue.unlock()
    assert not repo.get_issue(pull.number).locked

    status, headers, _ = repo._requester.requestJson(
        "POST", f"{repo.url}/issues", input={"title": "t"}
    )
    assert status == 201
    assert headers["location"].endswith("/repos/forge-user/demo/issues/3")
    assert headers["etag"].startswith('W/"')

    repo_id = repo.id
    repo.edit(name="renamed")
    assert hub.github.get_repo("forge-user/renamed").id == repo_id
    assert hub.github.get_repo(repo_id).full_name == "forge-user/renamed"
    git(clone, "remote", "set-url", "origin", hub.forge.clone_url("forge-user", "renamed"))
    git(clone, "fetch", "-q", "origin")


def test_faults_reach_the_new_endpoints(hub: RunningForge, repo: Any, clone: Path) -> None:
    sha = push_branch(clone, "feature", "a.txt", "one\n")
    hub.forge.faults.inject("status", "GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs")
    hub.forge.faults.inject("status", "POST", "*/pulls/*/reviews", status=502)
    pull = repo.create_pull(title="f", body="", head="feature", base="main")
    with pytest.raises(GithubException) as down:
        list(repo.get_commit(sha).get_check_runs())
    assert down.value.status == 503
    with pytest.raises(GithubException) as bad_gateway:
        pull.create_review(event="APPROVE")
    assert bad_gateway.value.status == 502
    assert list(repo.get_commit(sha).get_check_runs()) == []  # each rule was used up


def test_local_ci_runs_on_each_new_head_once_and_posts_a_check_run(
    hub: RunningForge, repo: Any, clone: Path
) -> None:
    from agent_harness.forge.ci import LocalCI

    sha = push_branch(clone, "feature", "a.txt", "broken\n")
    pull = repo.create_pull(title="f", body="", head="feature", base="main")
    command = "grep -q fixed a.txt || { echo 'a.txt is not fixed'; exit 1; }"
    ci = LocalCI(hub.forge, command)
    [failed] = ci.scan_once()
    assert (failed.pull, failed.sha, failed.conclusion) == (pull.number, sha, "failure")
    assert ci.scan_once() == []  # a head is run once
    [run] = list(repo.get_commit(sha).get_check_runs())
    assert (run.name, run.conclusion) == ("local-ci", "failure")
    assert "a.txt is not fixed" in run.output.text
    (clone / "a.txt").write_text("fixed\n")
    git(clone, "commit", "-q", "-am", "fix")
    git(clone, "push", "-q", "origin", "feature")
    fixed = git(clone, "rev-parse", "HEAD")
    [passed] = ci.scan_once()
    assert (passed.sha, passed.conclusion) == (fixed, "success")


def test_a_collaborator_is_a_user_of_its_own_whatever_the_case_it_is_given_in(
    hub: RunningForge, tmp_path: Path
) -> None:
    from agent_harness.forge import Forge
    from agent_harness.forge.errors import ForgeError

    hub.github.get_organization("acme")  # an organization springs into being on first use
    with pytest.raises(ForgeError, match="acme is an organization on this forge, not a user"):
        Forge(tmp_path / "forge", token="t1", collaborators={"acme": "t2"})
    again = Forge(tmp_path / "forge", token="t1", collaborators={"Forge-Reviewer": "t2"})
    try:
        row = again.db.one("SELECT id FROM users WHERE login = ?", "forge-reviewer")
        assert row is not None and again.renderer().association(row["id"]) == "COLLABORATOR"
    finally:
        again.close()


def running(pid: str) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped by whoever adopted it,
    does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def blocked_ci(hub: RunningForge, repo: Any, clone: Path, pids: Path, **options: Any) -> Any:
    """A pull request, and local CI whose command starts a child, writes both pids to `pids`,
    and blocks until it is ended; (the head's sha, the CI)."""
    from agent_harness.forge.ci import LocalCI

    sha = push_branch(clone, "feature", "a.txt", "one\n")
    repo.create_pull(title="f", body="", head="feature", base="main")
    return sha, LocalCI(hub.forge, f"sleep 600 & echo $$ $! > {pids}; wait", **options)


def test_stopping_local_ci_ends_a_command_still_running_and_posts_nothing(
    hub: RunningForge, repo: Any, clone: Path, tmp_path: Path
) -> None:
    import time

    pids = tmp_path / "pids"
    sha, ci = blocked_ci(hub, repo, clone, pids)
    ci.start(interval_s=0.01)
    deadline = time.monotonic() + 60  # a fail-safe, not a measurement
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.01)
    shell, child = pids.read_text().split()
    ci.stop()
    assert ci._thread is not None and not ci._thread.is_alive()
    assert not running(shell) and not running(child)
    assert list(repo.get_commit(sha).get_check_runs()) == []  # no result was made up


def test_a_local_ci_command_past_its_time_is_ended_with_its_children(
    hub: RunningForge, repo: Any, clone: Path, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    sha, ci = blocked_ci(hub, repo, clone, pids, timeout_s=0.5)
    [ran] = ci.scan_once()
    assert (ran.sha, ran.conclusion) == (sha, "timed_out")
    assert not any(running(pid) for pid in pids.read_text().split())
