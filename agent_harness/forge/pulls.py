"""REST handlers for pull requests, including real merges in the bare repository.

A pull request is an issue row plus a `pulls` row naming its head and base branches; the head
sha is read from git on demand and frozen when the PR is merged. Merging writes a true merge
commit (two parents), a squash commit (one parent) or rebased commits, then moves the base ref;
into the default branch, it also closes the issues the pull's text names ("Closes #3").
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from agent_harness.forge import issue_events
from agent_harness.forge.checks import commit_state
from agent_harness.forge.errors import ApiError, not_found, validation_failed
from agent_harness.forge.gitrepo import Identity
from agent_harness.forge.issues import check_title, issue_row, update_issue_fields
from agent_harness.forge.protection import refuse_merge, rules_of
from agent_harness.forge.routes import Call, Reply, RepoContext, Router
from agent_harness.forge.shapes import node_id, noreply_email

NOT_MERGEABLE = "Pull Request is not mergeable"
MAX_COMMITS = 250
MAX_FILES = 3000
# GitHub's closing keywords: "Closes #3", "fixes: #4", "Resolves owner/repo#5".
_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+(?:([\w.-]+/[\w.-]+))?#(\d+)\b",
    re.IGNORECASE,
)


def register(router: Router) -> None:
    router.add("GET", "/repos/{owner}/{repo}/pulls", list_pulls)
    router.add("POST", "/repos/{owner}/{repo}/pulls", create_pull)
    router.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", get_pull)
    router.add("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}", update_pull)
    router.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/commits", list_pull_commits)
    router.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files", list_pull_files)
    router.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", check_merged)
    router.add("PUT", "/repos/{owner}/{repo}/pulls/{pull_number}/merge", merge_pull)


def _head_sha(ctx: RepoContext, pull: sqlite3.Row) -> str:
    if pull["merged_at"]:
        return str(pull["head_sha"])
    return ctx.git.resolve(f"refs/heads/{pull['head_ref']}") or str(pull["head_sha"])


def pull_span(ctx: RepoContext, pull: sqlite3.Row) -> tuple[str, str]:
    """(fork point, head) of a pull: what it changes is what lies between, and stays so once
    merged (then its base is read from the merge's first parent, as the base was then)."""
    head = _head_sha(ctx, pull)
    if pull["merged_at"] and pull["merge_commit_sha"]:
        parents = ctx.git.commit(pull["merge_commit_sha"]).parents
        base = parents[0] if parents else str(pull["merge_commit_sha"])
    else:
        base = ctx.git.resolve(f"refs/heads/{pull['base_ref']}") or head
    return ctx.git.merge_base(base, head) or base, head


def render_pull(
    call: Call, ctx: RepoContext, issue: sqlite3.Row, pull: sqlite3.Row, full: bool
) -> dict[str, Any]:
    """A pull request as the list shows it, or with `full` as a single pull's page does (whether
    it merged or can, and the size of its change)."""
    as_issue = call.render.issue(issue, ctx.url, ctx.html, pull)
    n = issue["number"]
    head_sha = _head_sha(ctx, pull)
    base_sha = ctx.git.resolve(f"refs/heads/{pull['base_ref']}") or head_sha
    links = _pull_links(ctx, n, head_sha)
    out: dict[str, Any] = {
        "url": links["self"],
        "id": pull["id"],
        "node_id": node_id("PullRequest", pull["id"]),
        "html_url": links["html"],
        "diff_url": f"{ctx.html}/pull/{n}.diff",
        "patch_url": f"{ctx.html}/pull/{n}.patch",
        "issue_url": links["issue"],
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "comments_url": links["comments"],
        "statuses_url": links["statuses"],
        "number": n,
        "state": issue["state"],
        "locked": bool(issue["locked"]),
        "title": issue["title"],
        "user": as_issue["user"],
        "body": issue["body"],
        "labels": as_issue["labels"],
        "milestone": as_issue["milestone"],
        "active_lock_reason": None,
        "created_at": issue["created_at"],
        "updated_at": issue["updated_at"],
        "closed_at": issue["closed_at"],
        "merged_at": pull["merged_at"],
        "merge_commit_sha": pull["merge_commit_sha"],
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        **_head_and_base(call, ctx, pull, head_sha, base_sha),
        "_links": {name: {"href": href} for name, href in links.items()},
        "author_association": as_issue["author_association"],
        "auto_merge": None,
        "draft": bool(pull["draft"]),
    }
    if full:
        out["comments"] = as_issue["comments"]
        out |= _merge_facts(call, ctx, issue, pull, base_sha, head_sha)
    return out


def _pull_links(ctx: RepoContext, n: int, head_sha: str) -> dict[str, str]:
    """The `_links` of pull `n`; the same addresses appear again as its `*_url` fields."""
    url = f"{ctx.url}/pulls/{n}"
    return {
        "self": url,
        "html": f"{ctx.html}/pull/{n}",
        "issue": f"{ctx.url}/issues/{n}",
        "comments": f"{ctx.url}/issues/{n}/comments",
        "review_comments": f"{url}/comments",
        "review_comment": f"{ctx.url}/pulls/comments{{/number}}",
        "commits": f"{url}/commits",
        "statuses": f"{ctx.url}/statuses/{head_sha}",
    }


def _head_and_base(
    call: Call, ctx: RepoContext, pull: sqlite3.Row, head_sha: str, base_sha: str
) -> dict[str, Any]:
    """The `head` and `base` objects; both branches live in the pull's own repository."""
    owner = call.render.user(ctx.owner)
    repo_json = call.forge.render_repo(ctx.row, call.render)
    login = ctx.owner["login"]
    return {
        end: {
            "label": f"{login}:{pull[f'{end}_ref']}",
            "ref": pull[f"{end}_ref"],
            "sha": sha,
            "user": owner,
            "repo": repo_json,
        }
        for end, sha in (("head", head_sha), ("base", base_sha))
    }


def mergeable_state(
    call: Call,
    ctx: RepoContext,
    pull: sqlite3.Row,
    mergeable: bool | None,
    base_sha: str,
    head_sha: str,
) -> str:
    """GitHub's word for whether a pull can merge: `dirty` (it conflicts), `behind` (the base
    moved on since the head branched), `unstable` (a check or status failed), `clean`."""
    if mergeable is None:
        return "unknown"
    if not mergeable:
        return "dirty"
    rules = rules_of(call, ctx, pull["base_ref"])
    strict = bool(((rules or {}).get("required_status_checks") or {}).get("strict"))
    # As on GitHub, `behind` is only said where the base's protection requires an up to
    # date branch; elsewhere a branch behind its base merges cleanly.
    if strict and ctx.git.merge_base(base_sha, head_sha) != base_sha:
        return "behind"
    if commit_state(call, ctx, head_sha) in ("failure", "pending"):
        return "unstable"
    return "clean"


def _merge_facts(
    call: Call,
    ctx: RepoContext,
    issue: sqlite3.Row,
    pull: sqlite3.Row,
    base_sha: str,
    head_sha: str,
) -> dict[str, Any]:
    merged = bool(pull["merged_at"])
    # As on GitHub, mergeability is only worked out for an open pull that has not merged.
    mergeable: bool | None = None
    if not merged and issue["state"] == "open":
        mergeable = ctx.git.merges_cleanly(base_sha, head_sha)
    # What it changes, counted from where it forked: once merged, from the base as it was
    # then (the base holds the change now, so counting from its tip would find none).
    fork, head = pull_span(ctx, pull)
    files = ctx.git.changes(fork, head)
    return {
        "merged": merged,
        "mergeable": mergeable,
        "rebaseable": mergeable,
        "mergeable_state": mergeable_state(call, ctx, pull, mergeable, base_sha, head_sha),
        "merged_by": call.render.user_by_id(pull["merged_by_id"]),
        "review_comments": _count(call, "review_comments", pull["id"]),
        "maintainer_can_modify": bool(pull["maintainer_can_modify"]),
        "commits": ctx.git.count(fork, head),
        "additions": sum(f.additions for f in files),
        "deletions": sum(f.deletions for f in files),
        "changed_files": len(files),
    }


def _count(call: Call, table: str, pull_id: int) -> int:
    row = call.forge.db.one(f"SELECT COUNT(*) AS n FROM {table} WHERE pull_id = ?", pull_id)
    return int(row["n"]) if row else 0


def _pull_rows(call: Call, ctx: RepoContext) -> tuple[sqlite3.Row, sqlite3.Row]:
    issue = issue_row(call, ctx, call.int_param("pull_number"))
    pull = call.forge.db.one("SELECT * FROM pulls WHERE issue_id = ?", issue["id"])
    if pull is None:
        raise not_found()
    return issue, pull


def _branch_name(ctx: RepoContext, spec: str, field: str) -> str:
    owner, sep, name = spec.partition(":")
    if sep:
        if owner.lower() != ctx.owner["login"].lower():
            raise validation_failed("PullRequest", field, "invalid")
        return name
    return spec


def refresh_heads(call: Call, ctx: RepoContext) -> None:
    """A push to an open pull's head branch updates the pull, as GitHub's `synchronize` does.

    Pushes reach the bare repository without the forge hearing of them, so a moved head is
    noticed when pull requests are next read: the pull takes the new head and `updated_at`."""
    rows = call.forge.db.all(
        "SELECT pulls.id, pulls.head_ref, pulls.head_sha, issues.id AS issue_id FROM pulls"
        " JOIN issues ON issues.id = pulls.issue_id WHERE issues.repo_id = ?"
        " AND issues.state = 'open'",
        ctx.id,
    )
    if not rows:
        return
    # One listing of every branch, rather than a git call per open pull: a read of one pull
    # must not cost a process per pull request in the repository. (A branch always points at
    # a commit: git refuses anything else under refs/heads/.)
    heads = ctx.git.refs("refs/heads/")
    for row in rows:
        head = heads.get(f"refs/heads/{row['head_ref']}")
        if head is not None and head != row["head_sha"]:
            call.forge.db.run("UPDATE pulls SET head_sha = ? WHERE id = ?", head, row["id"])
            call.forge.db.run(
                "UPDATE issues SET updated_at = ? WHERE id = ?", call.forge.now(), row["issue_id"]
            )


def list_pulls(call: Call) -> Reply:
    ctx = call.repo()
    refresh_heads(call, ctx)
    q = call.query
    where: list[str] = ["issues.repo_id = ?"]
    args: list[Any] = [ctx.id]
    state = q.get("state", "open")
    if state in ("open", "closed"):
        where.append("issues.state = ?")
        args.append(state)
    if q.get("head"):
        owner, sep, name = q["head"].partition(":")
        if sep and owner.lower() != ctx.owner["login"].lower():
            return Reply(200, [], paginate=True)
        where.append("pulls.head_ref = ?")
        args.append(name if sep else q["head"])
    if q.get("base"):
        where.append("pulls.base_ref = ?")
        args.append(q["base"])
    sort = q.get("sort", "created")
    key = {
        "created": "issues.created_at",
        "updated": "issues.updated_at",
        "popularity": "(SELECT COUNT(*) FROM comments WHERE comments.issue_id = issues.id)",
        "long-running": "issues.created_at",
    }.get(sort, "issues.created_at")
    default = "desc" if sort == "created" else "asc"
    direction = "ASC" if q.get("direction", default) == "asc" else "DESC"
    rows = call.forge.db.all(
        "SELECT issues.id AS issue_id, pulls.id AS pull_id FROM issues"
        " JOIN pulls ON pulls.issue_id = issues.id"
        f" WHERE {' AND '.join(where)} ORDER BY {key} {direction}, issues.number {direction}",
        *args,
    )

    def render(row: sqlite3.Row) -> dict[str, Any]:
        issue = call.forge.db.one("SELECT * FROM issues WHERE id = ?", row["issue_id"])
        pull = call.forge.db.one("SELECT * FROM pulls WHERE id = ?", row["pull_id"])
        assert issue is not None and pull is not None
        return render_pull(call, ctx, issue, pull, full=False)

    return Reply(200, rows, paginate=True, render_item=render)


def create_pull(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    head, base, branches = _requested_branches(ctx, data)
    _refuse_duplicate_or_empty(call, ctx, head, base, branches)
    body = data.get("body")
    if isinstance(body, str) and len(body) > 65536:
        raise validation_failed(
            "PullRequest",
            "body",
            "custom",
            message="body is too long (maximum is 65536 characters)",
        )
    issue_id = _insert_pull(call, ctx, data, head, base, branches[head])
    issue = call.forge.db.one("SELECT * FROM issues WHERE id = ?", issue_id)
    pull = call.forge.db.one("SELECT * FROM pulls WHERE issue_id = ?", issue_id)
    assert issue is not None and pull is not None
    return Reply(201, render_pull(call, ctx, issue, pull, full=True))


def _requested_branches(ctx: RepoContext, data: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """The head and base a new pull names, both existing branches, and every branch's sha."""
    for field in ("head", "base"):
        if not isinstance(data.get(field), str) or not data[field]:
            raise validation_failed("PullRequest", field, "missing_field")
    if not isinstance(data.get("title"), str):
        raise validation_failed("PullRequest", "title", "missing_field")
    check_title("PullRequest", data["title"])
    head = _branch_name(ctx, data["head"], "head")
    base = _branch_name(ctx, data["base"], "base")
    branches = ctx.git.branches()
    if head not in branches:
        raise validation_failed("PullRequest", "head", "invalid")
    if base not in branches:
        raise validation_failed("PullRequest", "base", "invalid")
    return head, base, branches


def _refuse_duplicate_or_empty(
    call: Call, ctx: RepoContext, head: str, base: str, branches: dict[str, str]
) -> None:
    """GitHub allows one open pull per head and base, and none without a commit to merge."""
    existing = call.forge.db.one(
        "SELECT 1 FROM pulls JOIN issues ON issues.id = pulls.issue_id WHERE issues.repo_id = ?"
        " AND issues.state = 'open' AND pulls.head_ref = ? AND pulls.base_ref = ?",
        ctx.id,
        head,
        base,
    )
    if existing:
        login = ctx.owner["login"]
        raise _refused(f"A pull request already exists for {login}:{head}.")
    if ctx.git.count(branches[base], branches[head]) == 0:
        raise _refused(f"No commits between {base} and {head}")


def _refused(message: str) -> ApiError:
    """GitHub's 422 for a pull request refused as a whole rather than for one field."""
    error = {"resource": "PullRequest", "code": "custom", "message": message}
    return ApiError(422, "Validation Failed", [error])


def _insert_pull(
    call: Call, ctx: RepoContext, data: dict[str, Any], head: str, base: str, head_sha: str
) -> int:
    """Store a new pull (its issue row, numbered with the issues, and its pull row)."""
    now = call.forge.now()
    issue_id = call.forge.db.run(
        "INSERT INTO issues (repo_id, number, title, body, user_id, is_pull, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
        ctx.id,
        call.forge.next_number(ctx.id),
        str(data["title"]),
        data.get("body"),
        call.user["id"],
        now,
        now,
    )
    call.forge.db.run(
        "INSERT INTO pulls (issue_id, head_ref, base_ref, head_sha, draft, maintainer_can_modify)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        issue_id,
        head,
        base,
        head_sha,
        int(bool(data.get("draft", False))),
        int(bool(data.get("maintainer_can_modify", False))),
    )
    return issue_id


def get_pull(call: Call) -> Reply:
    ctx = call.repo()
    refresh_heads(call, ctx)
    issue, pull = _pull_rows(call, ctx)
    return Reply(200, render_pull(call, ctx, issue, pull, full=True))


def update_pull(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue, pull = _pull_rows(call, ctx)
    data = call.json()
    if "base" in data:
        base = _branch_name(ctx, str(data["base"]), "base")
        if base not in ctx.git.branches():
            raise validation_failed("PullRequest", "base", "invalid")
        call.forge.db.run("UPDATE pulls SET base_ref = ? WHERE id = ?", base, pull["id"])
    if "maintainer_can_modify" in data:
        call.forge.db.run(
            "UPDATE pulls SET maintainer_can_modify = ? WHERE id = ?",
            int(bool(data["maintainer_can_modify"])),
            pull["id"],
        )
    fields: dict[str, Any] = {k: data[k] for k in ("title", "body", "state") if k in data}
    update_issue_fields(call, ctx, issue, fields)
    fresh_issue, fresh_pull = _pull_rows(call, ctx)
    return Reply(200, render_pull(call, ctx, fresh_issue, fresh_pull, full=True))


def list_pull_commits(call: Call) -> Reply:
    """The pull's commits, oldest first; as on GitHub, at most 250."""
    ctx = call.repo()
    _, pull = _pull_rows(call, ctx)
    fork, head = pull_span(ctx, pull)
    commits = list(reversed(ctx.git.log(head, exclude=fork)))[:MAX_COMMITS]
    return Reply(
        200, commits, paginate=True, render_item=lambda c: call.render.commit(c, ctx.url, ctx.html)
    )


def list_pull_files(call: Call) -> Reply:
    """The files the pull changes, as compare lists them; as on GitHub, at most 3,000."""
    ctx = call.repo()
    _, pull = _pull_rows(call, ctx)
    fork, head = pull_span(ctx, pull)
    files = ctx.git.changes(fork, head)[:MAX_FILES]
    return Reply(
        200,
        files,
        paginate=True,
        render_item=lambda f: call.render.file(f, ctx.url, ctx.html, head),
    )


def check_merged(call: Call) -> Reply:
    ctx = call.repo()
    _, pull = _pull_rows(call, ctx)
    if not pull["merged_at"]:
        raise not_found()
    return Reply(204)


def merge_pull(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue, pull = _pull_rows(call, ctx)
    data = call.json()
    method = data.get("merge_method", "merge")
    if method not in ("merge", "squash", "rebase"):
        raise validation_failed("PullRequest", "merge_method", "invalid")
    if pull["merged_at"] or issue["state"] != "open":
        raise ApiError(405, NOT_MERGEABLE)
    head_sha = ctx.git.resolve(f"refs/heads/{pull['head_ref']}")
    base_ref = f"refs/heads/{pull['base_ref']}"
    base_sha = ctx.git.resolve(base_ref)
    if head_sha is None or base_sha is None:
        raise ApiError(405, NOT_MERGEABLE)
    if data.get("sha") and data["sha"] != head_sha:
        raise ApiError(409, "Head branch was modified. Review and try the merge again.")
    refuse_merge(call, ctx, pull, base_sha, head_sha)
    now = call.forge.now()
    who = Identity(call.user["login"], noreply_email(call.user["id"], call.user["login"]), now)
    web = Identity("GitHub", "noreply@github.com", now)
    new_sha: str | None = None
    if method == "rebase":
        new_sha = ctx.git.rebase(base_sha, head_sha, web)
    elif (tree := ctx.git.merged_tree(base_sha, head_sha)) is not None:
        if method == "merge":
            text, parents = _merge_message(ctx, issue, pull, data), [base_sha, head_sha]
        else:
            text, parents = _squash_message(ctx, issue, data, base_sha, head_sha), [base_sha]
        new_sha = ctx.git.commit_tree(tree, parents, text, who, web)
    if new_sha is None:
        raise ApiError(405, NOT_MERGEABLE)
    ctx.git.update_ref(base_ref, new_sha, base_sha)
    _record_merge(call, issue, pull, new_sha, head_sha, now)
    if pull["base_ref"] == ctx.row["default_branch"]:
        _close_referenced(call, ctx, issue, new_sha, now)
    return Reply(
        200, {"sha": new_sha, "merged": True, "message": "Pull Request successfully merged"}
    )


def _merge_message(
    ctx: RepoContext, issue: sqlite3.Row, pull: sqlite3.Row, data: dict[str, Any]
) -> str:
    """A merge commit's message unless the request gives one: the pull's number and branch,
    then its title."""
    source = f"{ctx.owner['login']}/{pull['head_ref']}"
    title = data.get("commit_title") or f"Merge pull request #{issue['number']} from {source}"
    message = data.get("commit_message")
    return f"{title}\n\n{message if message is not None else issue['title']}"


def _squash_message(
    ctx: RepoContext, issue: sqlite3.Row, data: dict[str, Any], base_sha: str, head_sha: str
) -> str:
    """A squash commit's message unless the request gives one: the pull's title and number,
    then the message of every commit squashed, oldest first."""
    title = data.get("commit_title") or f"{issue['title']} (#{issue['number']})"
    message = data.get("commit_message")
    if message is None:
        commits = ctx.git.log(head_sha, exclude=base_sha)
        message = "\n\n".join(f"* {c.message}" for c in reversed(commits))
    return f"{title}\n\n{message}".rstrip()


def _record_merge(
    call: Call, issue: sqlite3.Row, pull: sqlite3.Row, new_sha: str, head_sha: str, now: str
) -> None:
    """Freeze the head the pull merged at and close its issue, as the merging user."""
    call.forge.db.run(
        "UPDATE pulls SET merged_at = ?, merge_commit_sha = ?, merged_by_id = ?, head_sha = ?"
        " WHERE id = ?",
        now,
        new_sha,
        call.user["id"],
        head_sha,
        pull["id"],
    )
    call.forge.db.run(
        "UPDATE issues SET state = 'closed', closed_at = ?, closed_by_id = ?, updated_at = ?"
        " WHERE id = ?",
        now,
        call.user["id"],
        now,
        issue["id"],
    )
    issue_events.record(call, issue["id"], "merged", commit_id=new_sha)
    issue_events.record(call, issue["id"], "closed")


def _close_referenced(
    call: Call, ctx: RepoContext, pull_issue: sqlite3.Row, merged: str, now: str
) -> None:
    """Close the open issues of this repository the pull's text names with a closing keyword,
    as GitHub does when a pull request merges into the default branch (each one's `closed`
    event names the commit that closed it)."""
    full = f"{ctx.owner['login']}/{ctx.row['name']}".lower()
    numbers = {
        int(number)
        for repo, number in _CLOSING.findall(pull_issue["body"] or "")
        if not repo or repo.lower() == full
    }
    for number in sorted(numbers):
        closing = call.forge.db.one(
            "SELECT id FROM issues WHERE repo_id = ? AND number = ? AND is_pull = 0"
            " AND state = 'open'",
            ctx.id,
            number,
        )
        if closing is None:
            continue
        issue_events.record(call, closing["id"], "closed", merged, state_reason="completed")
        call.forge.db.run(
            "UPDATE issues SET state = 'closed', state_reason = 'completed', closed_at = ?,"
            " closed_by_id = ?, updated_at = ? WHERE id = ?",
            now,
            call.user["id"],
            now,
            closing["id"],
        )
