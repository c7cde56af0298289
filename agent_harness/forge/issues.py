"""REST handlers for issues, their comments, labels and milestones.

Pull requests are issues too (one number sequence per repository, listed by the issues
endpoints with a `pull_request` key), so this module serves both kinds wherever GitHub does.
Validation failures are answered with GitHub's 422 shape: resource, field and code.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from typing import Any

from agent_harness.forge import issue_events
from agent_harness.forge.errors import ApiError, not_found, validation_failed
from agent_harness.forge.routes import Call, Reply, RepoContext, Router

MAX_BODY = 65536
MAX_TITLE = 256  # GitHub's answer past it: "title is too long (maximum is 256 characters)"
MAX_LABEL_NAME = 50
_COLOR = re.compile(r"^[0-9a-fA-F]{6}$")
_STATE_REASONS = {"completed", "not_planned", "reopened", "duplicate"}


def register(router: Router) -> None:
    router.add("GET", "/repos/{owner}/{repo}/issues", list_issues)
    router.add("POST", "/repos/{owner}/{repo}/issues", create_issue)
    router.add("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", get_comment)
    router.add("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", update_comment)
    router.add("GET", "/repos/{owner}/{repo}/issues/{issue_number}", get_issue)
    router.add("PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", update_issue)
    router.add("PUT", "/repos/{owner}/{repo}/issues/{issue_number}/lock", lock_issue)
    router.add("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/lock", unlock_issue)
    router.add("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", list_comments)
    router.add("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", create_comment)
    router.add("GET", "/repos/{owner}/{repo}/issues/{issue_number}/labels", list_issue_labels)
    router.add("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels", add_labels)
    router.add("PUT", "/repos/{owner}/{repo}/issues/{issue_number}/labels", set_labels)
    router.add("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", remove_label)
    router.add("GET", "/repos/{owner}/{repo}/labels", list_labels)
    router.add("POST", "/repos/{owner}/{repo}/labels", create_label)
    router.add("GET", "/repos/{owner}/{repo}/labels/{name}", get_label)
    router.add("PATCH", "/repos/{owner}/{repo}/labels/{name}", update_label)
    router.add("DELETE", "/repos/{owner}/{repo}/labels/{name}", delete_label)
    router.add("GET", "/repos/{owner}/{repo}/milestones", list_milestones)
    router.add("POST", "/repos/{owner}/{repo}/milestones", create_milestone)
    router.add("GET", "/repos/{owner}/{repo}/milestones/{milestone_number}", get_milestone)
    router.add("PATCH", "/repos/{owner}/{repo}/milestones/{milestone_number}", update_milestone)
    router.add("DELETE", "/repos/{owner}/{repo}/milestones/{milestone_number}", delete_milestone)


# -- helpers ----------------------------------------------------------------------------------
def render_issue(call: Call, ctx: RepoContext, row: sqlite3.Row) -> dict[str, Any]:
    pull = call.forge.db.one("SELECT * FROM pulls WHERE issue_id = ?", row["id"])
    return call.render.issue(row, ctx.url, ctx.html, pull)


def issue_row(call: Call, ctx: RepoContext, number: int) -> sqlite3.Row:
    row = call.forge.db.one("SELECT * FROM issues WHERE repo_id = ? AND number = ?", ctx.id, number)
    if row is None:
        raise not_found()
    return row


def check_title(resource: str, title: Any) -> None:
    """A title as GitHub takes it: text (a number is written as text) of at most MAX_TITLE."""
    if title is None or (isinstance(title, str) and not title.strip()):
        raise validation_failed(resource, "title", "missing_field")
    if not isinstance(title, (str, int)) or isinstance(title, bool):
        raise validation_failed(resource, "title", "invalid")
    if len(str(title)) > MAX_TITLE:
        raise validation_failed(
            resource,
            "title",
            "custom",
            message=f"title is too long (maximum is {MAX_TITLE} characters)",
        )


def _check_body(resource: str, body: Any) -> None:
    if body is not None and not isinstance(body, str):
        raise validation_failed(resource, "body", "invalid")
    if isinstance(body, str) and len(body) > MAX_BODY:
        raise validation_failed(
            resource,
            "body",
            "custom",
            message=f"body is too long (maximum is {MAX_BODY} characters)",
        )


def label_ids(call: Call, ctx: RepoContext, names: Any) -> list[int]:
    """Label ids for names (or label objects); GitHub creates labels it does not know yet."""
    if not isinstance(names, list):
        raise validation_failed("Issue", "labels", "invalid")
    ids: list[int] = []
    for item in names:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise validation_failed("Label", "name", "invalid")
        if len(name.strip()) > MAX_LABEL_NAME:
            # Naming an unknown long label on an issue is refused differently from creating one:
            # code "invalid" with the value (seen in semantic-release/github#518).
            raise validation_failed("Label", "name", "invalid", value=name)
        # The column is COLLATE NOCASE: GitHub matches label names without regard to case.
        row = call.forge.db.one(
            "SELECT id FROM labels WHERE repo_id = ? AND name = ?", ctx.id, name
        )
        if row is None:
            ids.append(
                call.forge.db.run(
                    "INSERT INTO labels (repo_id, name, color) VALUES (?, ?, 'ededed')",
                    ctx.id,
                    name,
                )
            )
        elif row["id"] not in ids:
            ids.append(row["id"])
    return ids


def _set_issue_labels(call: Call, issue_id: int, ids: list[int]) -> None:
    before = call.forge.db.all("SELECT label_id FROM issue_labels WHERE issue_id = ?", issue_id)
    call.forge.db.run("DELETE FROM issue_labels WHERE issue_id = ?", issue_id)
    for label_id in ids:
        call.forge.db.run("INSERT INTO issue_labels VALUES (?, ?)", issue_id, label_id)
    issue_events.labels_changed(call, issue_id, (r["label_id"] for r in before), ids)


def _milestone_id(call: Call, ctx: RepoContext, value: Any) -> int | None:
    if value is None or value == "":  # PyGithub clears a milestone by sending ""
        return None
    number = value if isinstance(value, int) else int(value) if str(value).isdigit() else None
    row = (
        call.forge.db.one(
            "SELECT id FROM milestones WHERE repo_id = ? AND number = ?", ctx.id, number
        )
        if number is not None
        else None
    )
    if row is None:
        raise validation_failed("Issue", "milestone", "invalid", value=value)
    return int(row["id"])


def iso_time(value: str, field: str) -> str:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise validation_failed("Issue", field, "invalid") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- issues -----------------------------------------------------------------------------------
def list_issues(call: Call) -> Reply:
    ctx = call.repo()
    q = call.query
    where: list[str] = ["issues.repo_id = ?"]
    args: list[Any] = [ctx.id]
    state = q.get("state", "open")
    if state in ("open", "closed"):
        where.append("issues.state = ?")
        args.append(state)
    elif state != "all":
        raise validation_failed("Issue", "state", "invalid")
    if q.get("since"):
        where.append("issues.updated_at >= ?")
        args.append(iso_time(q["since"], "since"))
    for name in filter(None, (n.strip() for n in q.get("labels", "").split(","))):
        where.append(
            "EXISTS (SELECT 1 FROM issue_labels JOIN labels ON labels.id = issue_labels.label_id"
            " WHERE issue_labels.issue_id = issues.id AND labels.name = ?)"
        )
        args.append(name)
    milestone = q.get("milestone")
    if milestone == "none":
        where.append("issues.milestone_id IS NULL")
    elif milestone == "*":
        where.append("issues.milestone_id IS NOT NULL")
    elif milestone is not None:
        where.append("issues.milestone_id IN (SELECT id FROM milestones WHERE number = ?)")
        args.append(int(milestone) if milestone.isdigit() else -1)
    if q.get("creator"):
        where.append("issues.user_id IN (SELECT id FROM users WHERE login = ?)")
        args.append(q["creator"])
    sort = q.get("sort", "created")
    key = {
        "created": "issues.created_at",
        "updated": "issues.updated_at",
        "comments": "(SELECT COUNT(*) FROM comments WHERE comments.issue_id = issues.id)",
    }.get(sort)
    if key is None:
        raise validation_failed("Issue", "sort", "invalid")
    direction = "ASC" if q.get("direction", "desc") == "asc" else "DESC"
    rows = call.forge.db.all(
        f"SELECT * FROM issues WHERE {' AND '.join(where)}"
        f" ORDER BY {key} {direction}, issues.number {direction}",
        *args,
    )
    return Reply(200, rows, paginate=True, render_item=lambda row: render_issue(call, ctx, row))


def create_issue(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    title = data.get("title")
    check_title("Issue", title)
    body = data.get("body")
    _check_body("Issue", body)
    milestone_id = _milestone_id(call, ctx, data.get("milestone"))
    ids = label_ids(call, ctx, data.get("labels", []))
    now = call.forge.now()
    issue_id = call.forge.db.run(
        "INSERT INTO issues (repo_id, number, title, body, user_id, milestone_id, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ctx.id,
        call.forge.next_number(ctx.id),
        str(title),
        body,
        call.user["id"],
        milestone_id,
        now,
        now,
    )
    _set_issue_labels(call, issue_id, ids)
    issue_events.milestone_changed(call, issue_id, None, milestone_id)
    row = call.forge.db.one("SELECT * FROM issues WHERE id = ?", issue_id)
    assert row is not None
    return Reply(201, render_issue(call, ctx, row))


def get_issue(call: Call) -> Reply:
    ctx = call.repo()
    return Reply(200, render_issue(call, ctx, issue_row(call, ctx, call.int_param("issue_number"))))


_LOCK_REASONS = ("off-topic", "too heated", "resolved", "spam")


def lock_issue(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = issue_row(call, ctx, call.int_param("issue_number"))
    reason = call.json().get("lock_reason")
    if reason is not None and reason not in _LOCK_REASONS:
        raise validation_failed("Issue", "lock_reason", "invalid")
    if not row["locked"]:
        issue_events.record(call, row["id"], "locked", lock_reason=reason)
    call.forge.db.run("UPDATE issues SET locked = 1 WHERE id = ?", row["id"])
    return Reply(204)


def unlock_issue(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = issue_row(call, ctx, call.int_param("issue_number"))
    if not row["locked"]:
        raise not_found()
    issue_events.record(call, row["id"], "unlocked")
    call.forge.db.run("UPDATE issues SET locked = 0 WHERE id = ?", row["id"])
    return Reply(204)


def update_issue(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = issue_row(call, ctx, call.int_param("issue_number"))
    update_issue_fields(call, ctx, row, call.json())
    fresh = call.forge.db.one("SELECT * FROM issues WHERE id = ?", row["id"])
    assert fresh is not None
    return Reply(200, render_issue(call, ctx, fresh))


def update_issue_fields(
    call: Call, ctx: RepoContext, row: sqlite3.Row, data: dict[str, Any]
) -> None:
    """Apply an issue PATCH (also used by the pulls endpoint for title/body/state)."""
    db, now = call.forge.db, call.forge.now()
    if "title" in data:
        if not isinstance(data["title"], str):
            raise validation_failed("Issue", "title", "missing_field")
        check_title("Issue", data["title"])
        if data["title"] != row["title"]:
            rename = {"rename_from": row["title"], "rename_to": data["title"]}
            issue_events.record(call, row["id"], "renamed", **rename)
        db.run("UPDATE issues SET title = ? WHERE id = ?", data["title"], row["id"])
    if "body" in data:
        _check_body("Issue", data["body"])
        db.run("UPDATE issues SET body = ? WHERE id = ?", data["body"], row["id"])
    if "milestone" in data:
        milestone_id = _milestone_id(call, ctx, data["milestone"])
        issue_events.milestone_changed(call, row["id"], row["milestone_id"], milestone_id)
        db.run("UPDATE issues SET milestone_id = ? WHERE id = ?", milestone_id, row["id"])
    if "labels" in data:
        _set_issue_labels(call, row["id"], label_ids(call, ctx, data["labels"]))
    reason = data.get("state_reason")
    if reason is not None and reason not in _STATE_REASONS:
        raise validation_failed("Issue", "state_reason", "invalid")
    state = data.get("state")
    if state is not None and state not in ("open", "closed"):
        raise validation_failed("Issue", "state", "invalid")
    if state == "closed" and row["state"] != "closed":
        db.run(
            "UPDATE issues SET state = 'closed', closed_at = ?, closed_by_id = ?,"
            " state_reason = ? WHERE id = ?",
            now,
            call.user["id"],
            reason or "completed",
            row["id"],
        )
        issue_events.record(call, row["id"], "closed", state_reason=reason or "completed")
    elif state == "open" and row["state"] != "open":
        if row["is_pull"]:
            pull = db.one("SELECT merged_at FROM pulls WHERE issue_id = ?", row["id"])
            if pull is not None and pull["merged_at"]:
                raise validation_failed(
                    "PullRequest", "state", "custom", message="cannot reopen a merged pull request"
                )
        db.run(
            "UPDATE issues SET state = 'open', closed_at = NULL, closed_by_id = NULL,"
            " state_reason = 'reopened' WHERE id = ?",
            row["id"],
        )
        issue_events.record(call, row["id"], "reopened", state_reason="reopened")
    elif reason is not None and state is None and row["state"] == "closed":
        db.run("UPDATE issues SET state_reason = ? WHERE id = ?", reason, row["id"])
    db.run("UPDATE issues SET updated_at = ? WHERE id = ?", now, row["id"])


# -- comments ---------------------------------------------------------------------------------
def _comment_number(call: Call, row: sqlite3.Row) -> int:
    issue = call.forge.db.one("SELECT number FROM issues WHERE id = ?", row["issue_id"])
    return int(issue["number"]) if issue else 0


def list_comments(call: Call) -> Reply:
    ctx = call.repo()
    issue = issue_row(call, ctx, call.int_param("issue_number"))
    args: list[Any] = [issue["id"]]
    extra = ""
    if call.query.get("since"):
        extra = " AND updated_at >= ?"
        args.append(iso_time(call.query["since"], "since"))
    rows = call.forge.db.all(f"SELECT * FROM comments WHERE issue_id = ?{extra} ORDER BY id", *args)
    body = [call.render.comment(r, ctx.url, ctx.html, issue["number"]) for r in rows]
    return Reply(200, body, paginate=True)


def create_comment(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue = issue_row(call, ctx, call.int_param("issue_number"))
    body = call.json().get("body")
    if body is None or body == "":
        raise validation_failed("IssueComment", "body", "missing_field")
    _check_body("IssueComment", body)
    now = call.forge.now()
    comment_id = call.forge.db.run(
        "INSERT INTO comments (issue_id, user_id, body, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?)",
        issue["id"],
        call.user["id"],
        body,
        now,
        now,
    )
    call.forge.db.run("UPDATE issues SET updated_at = ? WHERE id = ?", now, issue["id"])
    row = call.forge.db.one("SELECT * FROM comments WHERE id = ?", comment_id)
    assert row is not None
    return Reply(201, call.render.comment(row, ctx.url, ctx.html, issue["number"]))


def issue_owned_row(call: Call, ctx: RepoContext, table: str, param: str) -> sqlite3.Row:
    """The row of `table` (comments, issue_events: rows of an issue) whose id is the path's
    `param`, when its issue is in this repository; GitHub's 404 otherwise."""
    row = call.forge.db.one(
        f"SELECT {table}.* FROM {table} JOIN issues ON issues.id = {table}.issue_id"
        f" WHERE {table}.id = ? AND issues.repo_id = ?",
        call.int_param(param),
        ctx.id,
    )
    if row is None:
        raise not_found()
    return row


def _comment_row(call: Call, ctx: RepoContext) -> sqlite3.Row:
    return issue_owned_row(call, ctx, "comments", "comment_id")


def get_comment(call: Call) -> Reply:
    ctx = call.repo()
    row = _comment_row(call, ctx)
    return Reply(200, call.render.comment(row, ctx.url, ctx.html, _comment_number(call, row)))


def update_comment(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = _comment_row(call, ctx)
    body = call.json().get("body")
    if not body:
        raise validation_failed("IssueComment", "body", "missing_field")
    _check_body("IssueComment", body)
    call.forge.db.run(
        "UPDATE comments SET body = ?, updated_at = ? WHERE id = ?",
        body,
        call.forge.now(),
        row["id"],
    )
    fresh = call.forge.db.one("SELECT * FROM comments WHERE id = ?", row["id"])
    assert fresh is not None
    return Reply(200, call.render.comment(fresh, ctx.url, ctx.html, _comment_number(call, fresh)))


# -- labels -----------------------------------------------------------------------------------
def _label_row(call: Call, ctx: RepoContext) -> sqlite3.Row:
    row = call.forge.db.one(
        "SELECT * FROM labels WHERE repo_id = ? AND name = ?", ctx.id, call.params["name"]
    )
    if row is None:
        raise not_found()
    return row


def _check_label(data: dict[str, Any], creating: bool) -> None:
    if creating and not (isinstance(data.get("name"), str) and data["name"].strip()):
        raise validation_failed("Label", "name", "missing_field")
    for key in ("name", "new_name"):
        name = data.get(key)
        if isinstance(name, str) and len(name.strip()) > MAX_LABEL_NAME:
            raise validation_failed(
                "Label",
                "name",
                "custom",
                message=f"name is too long (maximum is {MAX_LABEL_NAME} characters)",
            )
    color = data.get("color")
    if color is not None and not (isinstance(color, str) and _COLOR.match(color.lstrip("#"))):
        raise validation_failed("Label", "color", "invalid")
    description = data.get("description")
    if isinstance(description, str) and len(description) > 100:
        raise validation_failed("Label", "description", "invalid")


def list_labels(call: Call) -> Reply:
    ctx = call.repo()
    rows = call.forge.db.all("SELECT * FROM labels WHERE repo_id = ? ORDER BY id", ctx.id)
    return Reply(200, [call.render.label(r, ctx.url) for r in rows], paginate=True)


def create_label(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    _check_label(data, creating=True)
    name = data["name"].strip()
    if call.forge.db.one("SELECT 1 FROM labels WHERE repo_id = ? AND name = ?", ctx.id, name):
        raise validation_failed("Label", "name", "already_exists")
    label_id = call.forge.db.run(
        "INSERT INTO labels (repo_id, name, color, description) VALUES (?, ?, ?, ?)",
        ctx.id,
        name,
        str(data.get("color") or "ededed").lstrip("#").lower(),
        data.get("description"),
    )
    row = call.forge.db.one("SELECT * FROM labels WHERE id = ?", label_id)
    assert row is not None
    return Reply(201, call.render.label(row, ctx.url))


def get_label(call: Call) -> Reply:
    ctx = call.repo()
    return Reply(200, call.render.label(_label_row(call, ctx), ctx.url))


def update_label(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = _label_row(call, ctx)
    data = call.json()
    _check_label(data, creating=False)
    new_name = data.get("new_name") or data.get("name") or row["name"]
    if new_name.lower() != row["name"].lower() and call.forge.db.one(
        "SELECT 1 FROM labels WHERE repo_id = ? AND name = ?", ctx.id, new_name
    ):
        raise validation_failed("Label", "name", "already_exists")
    call.forge.db.run(
        "UPDATE labels SET name = ?, color = ?, description = ? WHERE id = ?",
        new_name,
        str(data.get("color") or row["color"]).lstrip("#").lower(),
        data["description"] if "description" in data else row["description"],
        row["id"],
    )
    fresh = call.forge.db.one("SELECT * FROM labels WHERE id = ?", row["id"])
    assert fresh is not None
    return Reply(200, call.render.label(fresh, ctx.url))


def delete_label(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = _label_row(call, ctx)
    call.forge.db.run("DELETE FROM issue_labels WHERE label_id = ?", row["id"])
    call.forge.db.run("DELETE FROM labels WHERE id = ?", row["id"])
    return Reply(204)


def list_issue_labels(call: Call) -> Reply:
    ctx = call.repo()
    issue = issue_row(call, ctx, call.int_param("issue_number"))
    return Reply(200, call.render.issue_labels(issue["id"], ctx.url), paginate=True)


def _labels_input(data: Any) -> Any:
    # The endpoint takes either a bare list or {"labels": [...]}.
    return data.get("labels", []) if isinstance(data, dict) else data


def add_labels(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue = issue_row(call, ctx, call.int_param("issue_number"))
    current = [
        r["label_id"]
        for r in call.forge.db.all(
            "SELECT label_id FROM issue_labels WHERE issue_id = ?", issue["id"]
        )
    ]
    added = label_ids(call, ctx, _labels_input(call.body))
    _set_issue_labels(call, issue["id"], current + [i for i in added if i not in current])
    call.forge.db.run(
        "UPDATE issues SET updated_at = ? WHERE id = ?", call.forge.now(), issue["id"]
    )
    return Reply(200, call.render.issue_labels(issue["id"], ctx.url))


def set_labels(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue = issue_row(call, ctx, call.int_param("issue_number"))
    _set_issue_labels(call, issue["id"], label_ids(call, ctx, _labels_input(call.body)))
    call.forge.db.run(
        "UPDATE issues SET updated_at = ? WHERE id = ?", call.forge.now(), issue["id"]
    )
    return Reply(200, call.render.issue_labels(issue["id"], ctx.url))


def remove_label(call: Call) -> Reply:
    ctx = call.writable_repo()
    issue = issue_row(call, ctx, call.int_param("issue_number"))
    label = _label_row(call, ctx)
    if not call.forge.db.one(
        "SELECT 1 FROM issue_labels WHERE issue_id = ? AND label_id = ?", issue["id"], label["id"]
    ):
        raise ApiError(404, "Label does not exist")
    call.forge.db.run(
        "DELETE FROM issue_labels WHERE issue_id = ? AND label_id = ?", issue["id"], label["id"]
    )
    issue_events.labels_changed(call, issue["id"], [label["id"]], [])
    call.forge.db.run(
        "UPDATE issues SET updated_at = ? WHERE id = ?", call.forge.now(), issue["id"]
    )
    return Reply(200, call.render.issue_labels(issue["id"], ctx.url))


# -- milestones -------------------------------------------------------------------------------
def _milestone_row(call: Call, ctx: RepoContext) -> sqlite3.Row:
    row = call.forge.db.one(
        "SELECT * FROM milestones WHERE repo_id = ? AND number = ?",
        ctx.id,
        call.int_param("milestone_number"),
    )
    if row is None:
        raise not_found()
    return row


def _render_milestone(call: Call, ctx: RepoContext, row: sqlite3.Row) -> dict[str, Any]:
    out = call.render.milestone(row, ctx.url, ctx.html)
    assert out is not None
    return out


def list_milestones(call: Call) -> Reply:
    ctx = call.repo()
    state = call.query.get("state", "open")
    where = "repo_id = ?"
    args: list[Any] = [ctx.id]
    if state in ("open", "closed"):
        where += " AND state = ?"
        args.append(state)
    key = {"due_on": "due_on IS NULL, due_on", "completeness": "number"}.get(
        call.query.get("sort", "due_on"), "due_on IS NULL, due_on"
    )
    direction = "DESC" if call.query.get("direction") == "desc" else "ASC"
    rows = call.forge.db.all(
        f"SELECT * FROM milestones WHERE {where} ORDER BY {key} {direction}, number", *args
    )
    return Reply(200, [_render_milestone(call, ctx, r) for r in rows], paginate=True)


def _milestone_fields(data: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if "title" in data:
        if not isinstance(data["title"], str) or not data["title"].strip():
            raise validation_failed("Milestone", "title", "missing_field")
        fields["title"] = data["title"]
    if "state" in data:
        if data["state"] not in ("open", "closed"):
            raise validation_failed("Milestone", "state", "invalid")
        fields["state"] = data["state"]
    if "description" in data:
        fields["description"] = data["description"]
    if "due_on" in data:
        fields["due_on"] = iso_time(data["due_on"], "due_on") if data["due_on"] else None
    return fields


def create_milestone(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    if "title" not in data:
        raise validation_failed("Milestone", "title", "missing_field")
    fields = _milestone_fields(data)
    if call.forge.db.one(
        "SELECT 1 FROM milestones WHERE repo_id = ? AND title = ?", ctx.id, fields["title"]
    ):
        raise validation_failed("Milestone", "title", "already_exists")
    now = call.forge.now()
    number_row = call.forge.db.one(
        "SELECT COALESCE(MAX(number), 0) + 1 AS n FROM milestones WHERE repo_id = ?", ctx.id
    )
    assert number_row is not None
    state = fields.get("state", "open")
    milestone_id = call.forge.db.run(
        "INSERT INTO milestones (repo_id, number, title, description, state, due_on, creator_id,"
        " created_at, updated_at, closed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ctx.id,
        number_row["n"],
        fields["title"],
        fields.get("description"),
        state,
        fields.get("due_on"),
        call.user["id"],
        now,
        now,
        now if state == "closed" else None,
    )
    row = call.forge.db.one("SELECT * FROM milestones WHERE id = ?", milestone_id)
    assert row is not None
    return Reply(201, _render_milestone(call, ctx, row))


def get_milestone(call: Call) -> Reply:
    ctx = call.repo()
    return Reply(200, _render_milestone(call, ctx, _milestone_row(call, ctx)))


def update_milestone(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = _milestone_row(call, ctx)
    fields = _milestone_fields(call.json())
    now = call.forge.now()
    if fields.get("state") == "closed" and row["state"] != "closed":
        fields["closed_at"] = now
    elif fields.get("state") == "open":
        fields["closed_at"] = None
    fields["updated_at"] = now
    for column, value in fields.items():
        call.forge.db.run(f"UPDATE milestones SET {column} = ? WHERE id = ?", value, row["id"])
    fresh = call.forge.db.one("SELECT * FROM milestones WHERE id = ?", row["id"])
    assert fresh is not None
    return Reply(200, _render_milestone(call, ctx, fresh))


def delete_milestone(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = _milestone_row(call, ctx)
    call.forge.db.run("UPDATE issues SET milestone_id = NULL WHERE milestone_id = ?", row["id"])
    call.forge.db.run("DELETE FROM milestones WHERE id = ?", row["id"])
    return Reply(204)
