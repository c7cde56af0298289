"""REST handlers for pull request reviews and their line comments.

A review approves, requests changes or comments, on the head commit it was given (or the
pull's head); its line comments are review comments with a `path` and a `line` of the pull's
diff. The pull request's author may comment but not approve or request changes. Submitting
either moves the pull request's `updated_at`, as on GitHub, so a client listing pull requests
by update sees it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_harness.forge.errors import ApiError, not_found, validation_failed
from agent_harness.forge.issues import iso_time, issue_row
from agent_harness.forge.routes import Call, Reply, RepoContext, Router
from agent_harness.forge.shapes import node_id

EVENTS = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
# A pull request's author may comment on it but neither approve it nor ask it to change; GitHub
# answers 422 with these words.
_NOT_BY_THE_AUTHOR = {
    "APPROVE": "Can not approve your own pull request",
    "REQUEST_CHANGES": "Can not request changes on your own pull request",
}


def register(router: Router) -> None:
    router.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", list_reviews)
    router.add("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", create_review)
    router.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/comments", list_comments)
    router.add("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/comments", create_comment)


def _pull(call: Call, ctx: RepoContext) -> tuple[sqlite3.Row, sqlite3.Row]:
    issue = issue_row(call, ctx, call.int_param("pull_number"))
    pull = call.forge.db.one("SELECT * FROM pulls WHERE issue_id = ?", issue["id"])
    if pull is None:
        raise not_found()
    return issue, pull


def _head(ctx: RepoContext, pull: sqlite3.Row) -> str:
    return ctx.git.resolve(f"refs/heads/{pull['head_ref']}") or str(pull["head_sha"])


def render_review(call: Call, ctx: RepoContext, number: int, row: sqlite3.Row) -> dict[str, Any]:
    html = f"{ctx.html}/pull/{number}#pullrequestreview-{row['id']}"
    pull_url = f"{ctx.url}/pulls/{number}"
    return {
        "id": row["id"],
        "node_id": node_id("PullRequestReview", row["id"]),
        "user": call.render.user_by_id(row["user_id"]),
        "body": row["body"],
        "state": row["state"],
        "html_url": html,
        "pull_request_url": pull_url,
        "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
        "submitted_at": row["submitted_at"],
        "commit_id": row["commit_id"],
        "author_association": call.render.association(row["user_id"]),
    }


def render_comment(call: Call, ctx: RepoContext, number: int, row: sqlite3.Row) -> dict[str, Any]:
    url = f"{ctx.url}/pulls/comments/{row['id']}"
    html = f"{ctx.html}/pull/{number}#discussion_r{row['id']}"
    pull_url = f"{ctx.url}/pulls/{number}"
    return {
        "url": url,
        "pull_request_review_id": row["review_id"],
        "id": row["id"],
        "node_id": node_id("PullRequestReviewComment", row["id"]),
        "diff_hunk": "",
        "path": row["path"],
        "commit_id": row["commit_id"],
        "original_commit_id": row["commit_id"],
        "user": call.render.user_by_id(row["user_id"]),
        "body": row["body"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": call.render.association(row["user_id"]),
        "_links": {
            "self": {"href": url},
            "html": {"href": html},
            "pull_request": {"href": pull_url},
        },
        "line": row["line"],
        "original_line": row["line"],
        "side": row["side"],
        "subject_type": "line",
    }


def list_reviews(call: Call) -> Reply:
    ctx = call.repo()
    issue, pull = _pull(call, ctx)
    rows = call.forge.db.all("SELECT * FROM reviews WHERE pull_id = ? ORDER BY id", pull["id"])
    number = issue["number"]
    return Reply(
        200, rows, paginate=True, render_item=lambda r: render_review(call, ctx, number, r)
    )


def create_review(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue, pull = _pull(call, ctx)
    if issue["state"] != "open":
        raise ApiError(422, "Unprocessable Entity", [f"Can not review a {issue['state']} PR"])
    data = call.json()
    event = data.get("event")
    if event is not None and event not in EVENTS:
        raise validation_failed("PullRequestReview", "event", "invalid")
    if event in _NOT_BY_THE_AUTHOR and issue["user_id"] == call.user["id"]:
        raise ApiError(422, "Unprocessable Entity", [_NOT_BY_THE_AUTHOR[event]])
    body = data.get("body") or ""
    if event in ("REQUEST_CHANGES", "COMMENT") and not body and not data.get("comments"):
        raise ApiError(422, "Unprocessable Entity", ["Body is required for this event"])
    commit = str(data.get("commit_id") or _head(ctx, pull))
    now = call.forge.now()
    review_id = call.forge.db.run(
        "INSERT INTO reviews (pull_id, user_id, body, state, commit_id, submitted_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        pull["id"],
        call.user["id"],
        body,
        EVENTS[event] if event else "PENDING",
        commit,
        now if event else None,
    )
    for comment in data.get("comments") or []:
        if not isinstance(comment, dict):
            raise validation_failed("PullRequestReview", "comments", "invalid")
        _insert_comment(call, ctx, pull, comment, commit, review_id)
    if event:
        _touch(call, issue)
    row = call.forge.db.one("SELECT * FROM reviews WHERE id = ?", review_id)
    assert row is not None
    return Reply(200, render_review(call, ctx, issue["number"], row))


def _insert_comment(
    call: Call,
    ctx: RepoContext,
    pull: sqlite3.Row,
    data: dict[str, Any],
    commit: str,
    review_id: int | None,
) -> int:
    for key in ("path", "body"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise validation_failed("PullRequestReviewComment", key, "missing_field")
    line = data.get("line")
    if line is not None and (not isinstance(line, int) or line < 1):
        raise validation_failed("PullRequestReviewComment", "line", "invalid")
    base = ctx.git.resolve(f"refs/heads/{pull['base_ref']}") or commit
    changed = {
        f.filename for f in ctx.git.changes(ctx.git.merge_base(base, commit) or base, commit)
    }
    if data["path"] not in changed:
        raise ApiError(
            422,
            "Unprocessable Entity",
            ["pull_request_review_thread.path could not be resolved"],
        )
    now = call.forge.now()
    return call.forge.db.run(
        "INSERT INTO review_comments (pull_id, review_id, user_id, path, line, side, body,"
        " commit_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        pull["id"],
        review_id,
        call.user["id"],
        data["path"],
        line,
        str(data.get("side") or "RIGHT"),
        data["body"],
        commit,
        now,
        now,
    )


def _touch(call: Call, issue: sqlite3.Row) -> None:
    call.forge.db.run(
        "UPDATE issues SET updated_at = ? WHERE id = ?", call.forge.now(), issue["id"]
    )


def list_comments(call: Call) -> Reply:
    ctx = call.repo()
    issue, pull = _pull(call, ctx)
    q = call.query
    direction = "DESC" if q.get("direction") == "desc" else "ASC"
    where, args = "pull_id = ?", [pull["id"]]
    if q.get("since"):
        where += " AND updated_at >= ?"
        args.append(iso_time(q["since"], "since"))  # any zone, compared as stored (UTC)
    rows = call.forge.db.all(
        f"SELECT * FROM review_comments WHERE {where} ORDER BY id {direction}", *args
    )
    number = issue["number"]
    return Reply(
        200, rows, paginate=True, render_item=lambda r: render_comment(call, ctx, number, r)
    )


def create_comment(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue, pull = _pull(call, ctx)
    data = call.json()
    if not isinstance(data.get("commit_id"), str):
        raise validation_failed("PullRequestReviewComment", "commit_id", "missing_field")
    new = _insert_comment(call, ctx, pull, data, data["commit_id"], None)
    _touch(call, issue)
    row = call.forge.db.one("SELECT * FROM review_comments WHERE id = ?", new)
    assert row is not None
    body = render_comment(call, ctx, issue["number"], row)
    return Reply(201, body, headers={"location": body["url"]})
