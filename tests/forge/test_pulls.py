"""Pull requests over real git: push a branch, open a PR, merge it for real, compare, list."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from github import GithubException

from agent_harness.testing.forge import RunningForge

pytestmark = pytest.mark.integration


def git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def clone(tmp_path: Path, repo: Any) -> Path:
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", repo.clone_url, str(work)], check=True)
    return work


def push_branch(clone: Path, branch: str, filename: str, content: str, base: str = "main") -> str:
    git(clone, "checkout", "-q", "-B", branch, f"origin/{base}")
    (clone / filename).write_text(content)
    git(clone, "add", filename)
    git(clone, "commit", "-q", "-m", f"change {filename} on {branch}")
    git(clone, "push", "-q", "origin", branch)
    return git(clone, "rev-parse", "HEAD")


def test_pushed_branch_pr_and_real_merge_commit(repo: Any, clone: Path) -> None:
    head_sha = push_branch(clone, "feature/x", "x.txt", "x\n")
    assert repo.get_branch("feature/x").commit.sha == head_sha
    issue = repo.create_issue("unrelated issue first")

    pull = repo.create_pull(title="Add x", body="adds x", head="feature/x", base="main")
    assert pull.number == issue.number + 1  # one number sequence for issues and PRs
    assert (pull.head.ref, pull.head.sha, pull.base.ref) == ("feature/x", head_sha, "main")
    assert pull.mergeable is True and pull.merged is False and pull.commits == 1
    listed = {i.number: i for i in repo.get_issues(state="all")}
    assert listed[pull.number].pull_request is not None
    assert listed[issue.number].pull_request is None

    status = pull.merge(merge_method="merge", commit_message="merging x")
    assert status.merged is True
    merged = repo.get_pull(pull.number)
    assert merged.merged and merged.state == "closed" and merged.merged_at is not None
    assert merged.merge_commit_sha == status.sha
    assert merged.merged_by.login == "forge-user"

    git(clone, "fetch", "-q", "origin")
    parents = git(clone, "log", "-1", "--format=%P", "origin/main").split()
    assert git(clone, "rev-parse", "origin/main") == status.sha
    assert len(parents) == 2 and parents[1] == head_sha  # a true merge commit
    message = git(clone, "log", "-1", "--format=%B", "origin/main")
    assert message.startswith(f"Merge pull request #{pull.number} from forge-user/feature/x")
    assert "merging x" in message
    assert [p.number for p in repo.get_pulls(state="closed")] == [pull.number]


def test_squash_and_rebase_merges(repo: Any, clone: Path) -> None:
    push_branch(clone, "squash-me", "a.txt", "a\n")
    git(clone, "commit", "-q", "--allow-empty", "-m", "second commit")
    git(clone, "push", "-q", "origin", "squash-me")
    squash = repo.create_pull(title="Squash", body="", head="squash-me", base="main")
    result = squash.merge(merge_method="squash")
    git(clone, "fetch", "-q", "origin")
    assert git(clone, "log", "-1", "--format=%P", result.sha).count(" ") == 0  # one parent
    assert git(clone, "log", "-1", "--format=%s", result.sha) == f"Squash (#{squash.number})"
    assert git(clone, "show", f"{result.sha}:a.txt") == "a"

    push_branch(clone, "rebase-me", "b.txt", "b\n")
    rebase = repo.create_pull(title="Rebase", body="", head="rebase-me", base="main")
    result = rebase.merge(merge_method="rebase")
    git(clone, "fetch", "-q", "origin")
    assert git(clone, "log", "-1", "--format=%s", "origin/main") == "change b.txt on rebase-me"
    assert git(clone, "log", "-1", "--format=%cn", "origin/main") == "GitHub"
    assert git(clone, "rev-parse", "origin/main") == result.sha


def test_conflicting_pull_is_not_mergeable(repo: Any, clone: Path) -> None:
    push_branch(clone, "one", "same.txt", "one\n")
    push_branch(clone, "two", "same.txt", "two\n")
    repo.create_pull(title="one", body="", head="one", base="main").merge()
    two = repo.create_pull(title="two", body="", head="two", base="main")
    assert repo.get_pull(two.number).mergeable is False
    with pytest.raises(GithubException) as caught:
        two.merge()
    assert caught.value.status == 405
    assert caught.value.data["message"] == "Pull Request is not mergeable"


def test_pull_validation_errors(repo: Any, clone: Path) -> None:
    push_branch(clone, "dup", "d.txt", "d\n")
    repo.create_pull(title="first", body="", head="forge-user:dup", base="main")
    with pytest.raises(GithubException) as caught:
        repo.create_pull(title="again", body="", head="dup", base="main")
    assert caught.value.status == 422
    assert "A pull request already exists for forge-user:dup." in str(caught.value.data)
    with pytest.raises(GithubException) as caught:
        repo.create_pull(title="no branch", body="", head="missing", base="main")
    assert caught.value.data["errors"][0] == {
        "resource": "PullRequest",
        "field": "head",
        "code": "invalid",
    }


def test_pull_listing_filters_and_edit(repo: Any, clone: Path) -> None:
    push_branch(clone, "a", "a.txt", "a\n")
    push_branch(clone, "b", "b.txt", "b\n")
    first = repo.create_pull(title="A", body="", head="a", base="main")
    second = repo.create_pull(title="B", body="", head="b", base="main")
    assert [p.number for p in repo.get_pulls()] == [second.number, first.number]
    assert [p.number for p in repo.get_pulls(head="forge-user:a")] == [first.number]
    assert [p.number for p in repo.get_pulls(base="main", sort="created", direction="asc")] == [
        first.number,
        second.number,
    ]
    first.edit(title="A2", state="closed")
    assert repo.get_pull(first.number).title == "A2"
    assert [p.number for p in repo.get_pulls(state="open")] == [second.number]


def test_compare_commits_and_refs(hub: RunningForge, repo: Any, clone: Path) -> None:
    main_sha = repo.get_git_ref("heads/main").object.sha
    head_sha = push_branch(clone, "topic", "t.txt", "t\nu\n")
    comparison = repo.compare("main", "topic")
    assert (comparison.status, comparison.ahead_by, comparison.behind_by) == ("ahead", 1, 0)
    assert [c.sha for c in comparison.commits] == [head_sha]
    assert comparison.merge_base_commit.sha == main_sha
    assert [(f.filename, f.status, f.additions) for f in comparison.files] == [
        ("t.txt", "added", 2)
    ]
    assert repo.compare("topic", "main").status == "behind"

    commits = list(repo.get_commits(sha="topic"))
    assert [c.sha for c in commits] == [head_sha, main_sha]
    assert commits[0].commit.author.name == "Dev"

    ref = repo.create_git_ref("refs/heads/copy", head_sha)
    assert repo.get_branch("copy").commit.sha == head_sha
    ref.delete()
    with pytest.raises(GithubException) as caught:
        repo.get_branch("copy")
    assert caught.value.status == 404


def test_merging_into_the_default_branch_closes_the_issues_it_says_it_closes(
    repo: Any, clone: Path
) -> None:
    one, two, three, four = (repo.create_issue(f"issue {n}") for n in range(1, 5))
    push_branch(clone, "feature", "f.txt", "f\n")
    body = (
        f"Closes #{one.number}\nfixes: #{two.number}, see #{three.number}\n"
        f"Resolves forge-user/demo#{four.number}"
    )
    pull = repo.create_pull(title="Feature", body=body, head="feature", base="main")
    pull.merge(merge_method="squash")

    states = {i.number: (i.state, i.state_reason) for i in repo.get_issues(state="all")}
    assert states[one.number] == ("closed", "completed")
    assert states[two.number] == ("closed", "completed")
    assert states[three.number] == ("open", None)  # mentioned, not closed
    assert states[four.number] == ("closed", "completed")
    assert repo.get_issue(one.number).closed_by.login == "forge-user"


def test_merging_into_another_branch_closes_nothing(repo: Any, clone: Path) -> None:
    issue = repo.create_issue("later")
    push_branch(clone, "release", "r.txt", "r\n")
    push_branch(clone, "fix", "g.txt", "g\n", base="release")
    pull = repo.create_pull(title="Fix", body=f"Fixes #{issue.number}", head="fix", base="release")
    pull.merge()
    assert repo.get_issue(issue.number).state == "open"  # as on GitHub: only the default branch


def test_a_pulls_size_and_mergeability_follow_its_head_and_base_as_they_move(
    repo: Any, clone: Path
) -> None:
    # What git says about two commits is remembered; a branch that moves names new commits.
    push_branch(clone, "grow", "a.txt", "a\n")
    pull = repo.create_pull(title="Grow", body="", head="grow", base="main")
    first = repo.get_pull(pull.number)
    assert (first.commits, first.changed_files, first.mergeable) == (1, 1, True)
    (clone / "b.txt").write_text("b\n")
    git(clone, "add", "b.txt")
    git(clone, "commit", "-q", "-m", "b")
    git(clone, "push", "-q", "origin", "grow")
    grown = repo.get_pull(pull.number)
    assert (grown.commits, grown.changed_files, grown.mergeable) == (2, 2, True)
    push_branch(clone, "main", "a.txt", "conflicting\n")
    assert repo.get_pull(pull.number).mergeable is False
