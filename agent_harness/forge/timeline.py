"""REST handler for an issue's timeline, as far as the forge keeps one.

GitHub's timeline of an issue or pull request lists what happened on it, oldest first. The forge
keeps the events a client watching for people's word reads there: issue comments (`commented`),
submitted reviews (`reviewed`) and line comments (`line-commented`, one per comment). Labels,
commits, references and the rest are not recorded as events, so they are not listed.
"""

from __future__ import annotations

from typing import Any

from agent_harness.forge.issues import issue_row
from agent_harness.forge.reviews import render_comment, render_review
from agent_harness.forge.routes import Call, Reply, Router
from agent_harness.forge.shapes import node_id


def register(router: Router) -> None:
    router.add("GET", "/repos/{owner}/{repo}/issues/{issue_number}/timeline", list_timeline)


def list_timeline(call: Call) -> Reply:
    ctx = call.repo()
    number = call.int_param("issue_number")
    issue = issue_row(call, ctx, number)
    db = call.forge.db
    dated: list[tuple[str, int, dict[str, Any]]] = []
    for row in db.all("SELECT * FROM comments WHERE issue_id = ? ORDER BY id", issue["id"]):
        said = call.render.comment(row, ctx.url, ctx.html, number)
        event = {"event": "commented", "actor": said["user"], **said}
        dated.append((str(row["created_at"]), 0, event))
    pull = db.one("SELECT id FROM pulls WHERE issue_id = ?", issue["id"])
    if pull is not None:
        reviews = db.all(
            "SELECT * FROM reviews WHERE pull_id = ? AND state <> 'PENDING' ORDER BY id", pull["id"]
        )
        for row in reviews:
            review = render_review(call, ctx, number, row)
            dated.append((str(row["submitted_at"]), 1, {"event": "reviewed", **review}))
        for row in db.all(
            "SELECT * FROM review_comments WHERE pull_id = ? ORDER BY id", pull["id"]
        ):
            comment = render_comment(call, ctx, number, row)
            line = {
                "event": "line-commented",
                "node_id": node_id("PullRequestReviewThread", row["id"]),
                "comments": [comment],
            }
            dated.append((str(row["created_at"]), 2, line))
    dated.sort(key=lambda entry: (entry[0], entry[1]))
    return Reply(200, [event for _, _, event in dated], paginate=True)
