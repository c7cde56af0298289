"""Every JSON body the forge sends in a representative run validates against GitHub's OpenAPI.

GitHub's own description ships in the npm package `@octokit/openapi`; it is installed into a
cache dir (AGENT_HARNESS_NPM_CACHE, default ~/.cache/agent-harness/npm) on first use, and the
test skips, saying why, when npm or the registry is out of reach. OpenAPI 3.0's `nullable` is
rewritten to JSON Schema before validating with `jsonschema`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from github import GithubException

from agent_harness.testing.forge import (
    READ_ONLY_TOKEN,
    RunningForge,
    collaborator_pull,
    make_client,
)

pytestmark = [pytest.mark.npm, pytest.mark.integration]

SPEC_URN = "urn:github-openapi"


def spec_path() -> Path:
    cache = Path(
        os.environ.get("AGENT_HARNESS_NPM_CACHE", Path.home() / ".cache" / "agent-harness" / "npm")
    )
    target = cache / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.json"
    if target.exists():
        return target
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed, so @octokit/openapi cannot be fetched")
    cache.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache), "@octokit/openapi"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0 or not target.exists():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"npm could not install @octokit/openapi from the registry: {tail}")
    return target


def to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema: `nullable` becomes a null alternative, refs get a URN."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items() if k != "nullable"}
    if isinstance(out.get("$ref"), str) and out["$ref"].startswith("#/"):
        out["$ref"] = SPEC_URN + out["$ref"]
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    with spec_path().open() as handle:
        return json.load(handle)  # type: ignore[no-any-return]


def response_schema(spec: dict[str, Any], method: str, template: str, status: int) -> Any:
    operation = spec["paths"].get(template, {}).get(method.lower())
    assert operation is not None, f"{method} {template} is not a GitHub operation"
    response = operation["responses"].get(str(status))
    if response is None and status >= 400:
        return {"$ref": "#/components/schemas/basic-error"}  # undocumented error statuses
    assert response is not None, f"{method} {template} never answers {status} on GitHub"
    if "$ref" in response:
        response = spec["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    return response.get("content", {}).get("application/json", {}).get("schema")


def exercise(hub: RunningForge, tmp_path: Path) -> None:
    """The calls a tracker sync and a PR workflow make, including the usual failures."""
    gh = hub.github
    user = gh.get_user()
    user.login  # noqa: B018
    repo = user.create_repo("demo", auto_init=True, description="schema run")
    gh.get_organization("acme").create_repo("tool")
    gh.get_repo("forge-user/demo")
    milestone = repo.create_milestone("v1", description="first")
    repo.get_milestones(state="all").totalCount  # noqa: B018
    repo.get_milestone(milestone.number)
    label = repo.create_label("kind:task", "00ff00", "a task")
    label.edit("kind:chore", "0000ff", "a chore")
    repo.get_labels().totalCount  # noqa: B018
    issue = repo.create_issue("one", body="body", labels=["bug"], milestone=milestone)
    issue.edit(state="closed", state_reason="completed")
    issue.create_comment("c1").edit("c1 edited")
    list(issue.get_comments())
    issue.add_to_labels("question")
    issue.remove_from_labels("question")
    list(repo.get_issues(state="all", labels=["bug"]))
    work = tmp_path / "clone"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "D",
        "GIT_AUTHOR_EMAIL": "d@e",
        "GIT_COMMITTER_NAME": "D",
        "GIT_COMMITTER_EMAIL": "d@e",
    }
    subprocess.run(["git", "clone", "-q", repo.clone_url, str(work)], check=True, env=env)
    for branch in ("feature", "second"):
        subprocess.run(["git", "checkout", "-q", "-B", branch, "origin/main"], cwd=work, check=True)
        (work / f"{branch}.txt").write_text(branch)
        subprocess.run(["git", "add", "."], cwd=work, check=True)
        subprocess.run(["git", "commit", "-q", "-m", branch], cwd=work, check=True, env=env)
        subprocess.run(["git", "push", "-q", "origin", branch], cwd=work, check=True, env=env)
    subprocess.run(["git", "tag", "v1", "origin/main"], cwd=work, check=True)
    subprocess.run(["git", "push", "-q", "origin", "v1"], cwd=work, check=True, env=env)
    pull = repo.create_pull(title="feature", body="b", head="feature", base="main")
    exercise_ci_and_reviews(gh, repo, pull, collaborator_pull(hub, pull))
    exercise_git_data(gh, repo, pull)
    list(repo.get_pulls(state="all"))
    repo.get_pull(pull.number).edit(body="edited")
    repo.compare("main", "feature")
    pull.merge(merge_method="merge")
    pull.is_merged()
    list(repo.get_commits(sha="main"))
    repo.get_commit("main")
    list(repo.get_branches())
    repo.get_branch("main")
    repo.get_git_ref("heads/main")
    repo.create_git_ref("refs/heads/copy", repo.get_branch("second").commit.sha).delete()
    second = repo.create_pull(title="second", body="", head="second", base="main")
    second.merge(merge_method="squash")
    list(second.as_issue().get_timeline())  # merged, closed
    list(issue.get_timeline())  # labeled, closed, commented, unlabeled
    gh.get_rate_limit()
    failures = [
        lambda: repo.get_issue(404),
        lambda: repo.create_label("bad", "nothex"),
        lambda: repo.create_issue(""),
        lambda: repo.create_pull(title="dup", body="", head="feature", base="main"),
        lambda: make_client(hub.server.api_url, token="bad").get_user().login,
        lambda: (
            make_client(hub.server.api_url, token=READ_ONLY_TOKEN)
            .get_repo("forge-user/demo")
            .create_issue("x")
        ),
    ]
    for failing in failures:
        with pytest.raises(GithubException):
            failing()
    hub.forge.faults.inject("secondary_rate_limit", "GET", "*/labels")
    with pytest.raises(GithubException):
        repo.get_labels().totalCount  # noqa: B018


def exercise_ci_and_reviews(gh: Any, repo: Any, pull: Any, as_reviewer: Any) -> None:
    """Statuses, check runs, reviews (the author's own refused), line comments, protection,
    search, lock. `as_reviewer` is `pull` as a user other than its author sees it."""
    sha = pull.head.sha
    commit = repo.get_commit(sha)
    commit.create_status("failure", context="tests", description="2 failed")
    commit.get_combined_status()
    repo._requester.requestJsonAndCheck("GET", f"{repo.url}/commits/{sha}/statuses")
    run = repo.create_check_run("ci", sha, status="in_progress")
    run.edit(conclusion="success", output={"title": "ci", "summary": "green", "text": "ok"})
    list(commit.get_check_runs())
    repo.get_check_run(run.id)
    with contextlib.suppress(GithubException):
        pull.create_review(event="APPROVE")  # 422: its own author
    as_reviewer.create_review(
        body="fix",
        event="REQUEST_CHANGES",
        comments=[{"path": "feature.txt", "line": 1, "body": "x"}],
    )
    pull.create_review_comment("more", commit, "feature.txt", line=1)
    list(pull.get_reviews())
    list(pull.get_review_comments())
    pull.create_issue_comment("a word")
    list(pull.as_issue().get_timeline())  # commented, reviewed, line-commented
    repo.get_pull(pull.number).mergeable_state  # noqa: B018
    main = repo.get_branch("main")
    main.edit_protection(strict=False, contexts=["ci"])
    main.get_protection()
    main.remove_protection()
    list(gh.search_issues(f"repo:{repo.full_name} is:pr status:success"))
    issue = repo.get_issue(pull.number)
    issue.lock("resolved")
    issue.unlock()


def exercise_git_data(gh: Any, repo: Any, pull: Any) -> None:
    """A pull's commits and files, git objects, contents, tags, issue events and a
    repository's comments: what the links in the other answers lead to."""
    list(pull.get_commits())
    files = list(pull.get_files())
    commit = repo.get_git_commit(pull.head.sha)
    tree = repo.get_git_tree(commit.tree.sha, recursive=True)
    repo.get_git_blob(next(entry.sha for entry in tree.tree if entry.type == "blob"))
    repo.get_contents(files[0].filename, ref=pull.head.sha)
    repo.get_contents("")
    list(repo.get_tags())
    list(repo.get_issue(1).get_events())  # labeled, milestoned, closed, unlabeled
    events = list(repo.get_issues_events())
    repo.get_issues_event(events[0].id)
    list(repo.get_issues_comments(sort="updated", direction="asc"))
    comments = list(repo.get_pulls_review_comments())
    repo._requester.requestJsonAndCheck("GET", comments[0].url)
    list(gh.get_user("forge-user").get_repos())


def test_responses_validate_against_githubs_openapi(
    spec: dict[str, Any], hub: RunningForge, tmp_path: Path
) -> None:
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    document = to_json_schema(spec)
    registry: Registry[Any] = Registry().with_resource(
        SPEC_URN, Resource(contents=document, specification=DRAFT202012)
    )
    recorded: list[tuple[str, str, int, Any]] = []
    hub.forge.observers.append(
        lambda method, template, status, body: recorded.append(
            (method, template or "", status, body)
        )
    )
    exercise(hub, tmp_path)

    problems: list[str] = []
    validated: Counter[str] = Counter()
    for method, template, status, body in recorded:
        if body is None:
            continue
        schema = response_schema(spec, method, template, status)
        if schema is None:
            continue
        validator = jsonschema.Draft202012Validator(to_json_schema(schema), registry=registry)
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.absolute_path)
            problems.append(f"{method} {template} {status} at {where}: {first.message[:200]}")
        validated[f"{method} {template} {status}"] += 1
    print(f"validated {sum(validated.values())} responses of {len(validated)} kinds")
    assert not problems, "\n".join(problems)
    assert sum(validated.values()) >= 40


def test_the_schema_check_rejects_a_body_github_would_never_send(spec: dict[str, Any]) -> None:
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    registry: Registry[Any] = Registry().with_resource(
        SPEC_URN, Resource(contents=to_json_schema(spec), specification=DRAFT202012)
    )
    schema = response_schema(spec, "GET", "/repos/{owner}/{repo}/issues/{issue_number}", 200)
    validator = jsonschema.Draft202012Validator(to_json_schema(schema), registry=registry)
    messages = [e.message for e in validator.iter_errors({"id": "1", "number": 1})]
    assert "'1' is not of type 'integer'" in messages
    assert "'node_id' is a required property" in messages
