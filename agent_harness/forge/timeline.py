"""REST handlers for what happened on an issue: its events and its timeline.

An issue's events (`/issues/{n}/events`, and every issue's at `/issues/events`) are what the
forge records in forge/issue_events.py: labeled, closed, merged, renamed and the rest. GitHub's
timeline of an issue or pull request lists those events and what people said, oldest first:
issue comments (`commented`), submitted reviews (`reviewed`) and line comments
(`line-commented`, one per comment). Commits, references and the rest are not recorded, so
they are not listed.
"""

from __future__ import annotations

from typing import Any

from agent_harness.forge import issue_events
from agent_harness.forge.issues import issue_owned_row, issue_row, render_issue
from agent_harness.forge.reviews import render_comment, render_review
from agent_harness.forge.routes import Call, Reply, Router
from agent_harness.forge.shapes import node_id


def register(router: Router) -> None:
    router.add("GET", "/repos/{owner}/{repo}/issues/{issue_number}/timeline", list_timeline)
    router.add("GET", "/repos/{owner}/{repo}/issues/{issue_number}/events", list_events)
    router.add("GET", "/repos/{owner}/{repo}/issues/events", list_repo_events)
    router.add("GET", "/repos/{owner}/{repo}/issues/events/{event_id}", get_event)


def list_events(call: Call) -> Reply:
    ctx = call.repo()
    issue = issue_row(call, ctx, call.int_param("issue_number"))
    rows = issue_events.of_issue(call.forge.db, issue["id"])
    return Reply(
        200,
        rows,
        paginate=True,
        render_item=lambda row: issue_events.render(call.render, row, ctx.url),
    )


def list_repo_events(call: Call) -> Reply:
    """Every issue's events in the repository, newest first, each with its issue."""
    ctx = call.repo()
    rows = call.forge.db.all(
        "SELECT issue_events.* FROM issue_events JOIN issues ON issues.id = issue_events.issue_id"
        " WHERE issues.repo_id = ? ORDER BY issue_events.id DESC",
        ctx.id,
    )

    def render(row: Any) -> dict[str, Any]:
        issue = call.forge.db.one("SELECT * FROM issues WHERE id = ?", row["issue_id"])
        assert issue is not None
        event = issue_events.render(call.render, row, ctx.url)
        return event | {"issue": render_issue(call, ctx, issue)}

    return Reply(200, rows, paginate=True, render_item=render)


def get_event(call: Call) -> Reply:
    ctx = call.repo()
    row = issue_owned_row(call, ctx, "issue_events", "event_id")
    issue = call.forge.db.one("SELECT * FROM issues WHERE id = ?", row["issue_id"])
    assert issue is not None
    event = issue_events.render(call.render, row, ctx.url)
    return Reply(200, event | {"issue": render_issue(call, ctx, issue)})


def list_timeline(call: Call) -> Reply:
    ctx = call.repo()
    number = call.int_param("issue_number")
    issue = issue_row(call, ctx, number)
    db = call.forge.db
    # (moment, rank, id): what happened in one second is listed events first, then comments,
    # reviews and line comments, each in the order it was recorded.
    dated: list[tuple[str, int, int, dict[str, Any]]] = []
    for row in issue_events.of_issue(db, issue["id"]):
        event = issue_events.render(call.render, row, ctx.url)
        dated.append((str(row["created_at"]), 0, row["id"], event))
    for row in db.all("SELECT * FROM comments WHERE issue_id = ? ORDER BY id", issue["id"]):
        said = call.render.comment(row, ctx.url, ctx.html, number)
        event = {"event": "commented", "actor": said["user"], **said}
        dated.append((str(row["created_at"]), 1, row["id"], event))
    pull = db.one("SELECT id FROM pulls WHERE issue_id = ?", issue["id"])
    if pull is not None:
        reviews = db.all(
            "SELECT * FROM reviews WHERE pull_id = ? AND state <> 'PENDING' ORDER BY id", pull["id"]
        )
        for row in reviews:
            review = render_review(call, ctx, number, row)
            dated.append((str(row["submitted_at"]), 2, row["id"], {"event": "reviewed", **review}))
        for row in db.all(
            "SELECT * FROM review_comments WHERE pull_id = ? ORDER BY id", pull["id"]
        ):
            comment = render_comment(call, ctx, number, row)
            line = {
                "event": "line-commented",
                "node_id": node_id("PullRequestReviewThread", row["id"]),
                "comments": [comment],
            }
            dated.append((str(row["created_at"]), 3, row["id"], line))
    dated.sort(key=lambda entry: entry[:3])
    return Reply(200, [event for *_, event in dated], paginate=True)
