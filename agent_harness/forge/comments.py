"""REST handlers for a repository's comments across its issues and pull requests: every issue
comment (`/issues/comments`), every review comment (`/pulls/comments`) and one review comment.

As GitHub documents them, both listings are in ascending id unless `sort` (created or updated)
is given; `direction` (asc or desc) is ignored without `sort`; `since` keeps the comments
updated at or after a moment. GitHub does not say which way a sort runs without a direction:
the forge sorts newest first, as its other sorted listings do by default.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_harness.forge.errors import not_found, validation_failed
from agent_harness.forge.issues import iso_time
from agent_harness.forge.reviews import render_comment
from agent_harness.forge.routes import Call, Reply, RepoContext, Router


def register(router: Router) -> None:
    router.add("GET", "/repos/{owner}/{repo}/issues/comments", list_issue_comments)
    router.add("GET", "/repos/{owner}/{repo}/pulls/comments", list_review_comments)
    router.add("GET", "/repos/{owner}/{repo}/pulls/comments/{comment_id}", get_review_comment)


def _order(call: Call, resource: str, table: str, sorts: dict[str, str]) -> tuple[str, list[Any]]:
    """The WHERE (after the repository's own condition) and ORDER BY of a listing, from its
    `since`, `sort` and `direction`; a value outside GitHub's lists is 422."""
    q, where, args = call.query, "", []
    if q.get("since"):
        where = f" AND {table}.updated_at >= ?"
        args.append(iso_time(q["since"], "since"))
    sort = q.get("sort")
    if sort is None:
        return f"{where} ORDER BY {table}.id", args
    if sort not in sorts:
        raise validation_failed(resource, "sort", "invalid")
    direction = q.get("direction", "desc")
    if direction not in ("asc", "desc"):
        raise validation_failed(resource, "direction", "invalid")
    column = f"{table}.{sorts[sort]}"
    return f"{where} ORDER BY {column} {direction.upper()}, {table}.id {direction.upper()}", args


def list_issue_comments(call: Call) -> Reply:
    ctx = call.repo()
    tail, args = _order(
        call, "IssueComment", "comments", {"created": "created_at", "updated": "updated_at"}
    )
    rows = call.forge.db.all(
        "SELECT comments.*, issues.number AS number FROM comments"
        " JOIN issues ON issues.id = comments.issue_id WHERE issues.repo_id = ?" + tail,
        ctx.id,
        *args,
    )
    return Reply(
        200,
        rows,
        paginate=True,
        render_item=lambda row: call.render.comment(row, ctx.url, ctx.html, row["number"]),
    )


def _review_comments(call: Call, ctx: RepoContext, tail: str, *args: Any) -> list[sqlite3.Row]:
    return call.forge.db.all(
        "SELECT review_comments.*, issues.number AS number FROM review_comments"
        " JOIN pulls ON pulls.id = review_comments.pull_id"
        " JOIN issues ON issues.id = pulls.issue_id WHERE issues.repo_id = ?" + tail,
        ctx.id,
        *args,
    )


def list_review_comments(call: Call) -> Reply:
    ctx = call.repo()
    sorts = {"created": "created_at", "created_at": "created_at", "updated": "updated_at"}
    tail, args = _order(call, "PullRequestReviewComment", "review_comments", sorts)
    return Reply(
        200,
        _review_comments(call, ctx, tail, *args),
        paginate=True,
        render_item=lambda row: render_comment(call, ctx, row["number"], row),
    )


def get_review_comment(call: Call) -> Reply:
    ctx = call.repo()
    rows = _review_comments(call, ctx, " AND review_comments.id = ?", call.int_param("comment_id"))
    if not rows:
        raise not_found()
    return Reply(200, render_comment(call, ctx, rows[0]["number"], rows[0]))
