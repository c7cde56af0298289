"""REST handlers for what CI says about a commit: commit statuses and check runs.

Statuses are kept per context (the newest of a context counts, as on GitHub); check runs are
kept per name (the newest run of a name counts with `filter=latest`). `commit_state` folds both
into the one word the search qualifier `status:` and a pull request's `mergeable_state` use.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent_harness.forge.errors import ApiError, not_found, validation_failed
from agent_harness.forge.routes import Call, Reply, RepoContext, Router
from agent_harness.forge.shapes import node_id

STATUS_STATES = ("error", "failure", "pending", "success")
CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)
FAILING_CONCLUSIONS = frozenset({"action_required", "cancelled", "failure", "timed_out"})


def register(router: Router) -> None:
    # Before `/commits/{ref}`: a greedy ref must not swallow `.../statuses` (see routes.py).
    router.add("POST", "/repos/{owner}/{repo}/statuses/{sha}", create_status)
    router.add("GET", "/repos/{owner}/{repo}/commits/{ref}/statuses", list_statuses)
    # The older address of the same list, which GitHub still answers (and PyGithub calls).
    router.add("GET", "/repos/{owner}/{repo}/statuses/{ref}", list_statuses)
    router.add("GET", "/repos/{owner}/{repo}/commits/{ref}/status", combined_status)
    router.add("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs", list_check_runs)
    router.add("POST", "/repos/{owner}/{repo}/check-runs", create_check_run)
    router.add("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}", get_check_run)
    router.add("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", update_check_run)


def _sha(ctx: RepoContext, ref: str) -> str:
    sha = ctx.git.resolve(ref)
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {ref}")
    return sha


# -- statuses ---------------------------------------------------------------------------------
def render_status(call: Call, ctx: RepoContext, row: sqlite3.Row) -> dict[str, Any]:
    creator = call.render.user_by_id(row["creator_id"])
    return {
        "url": f"{ctx.url}/statuses/{row['sha']}",
        "avatar_url": creator["avatar_url"] if creator else None,
        "id": row["id"],
        "node_id": node_id("StatusContext", row["id"]),
        "state": row["state"],
        "description": row["description"],
        "target_url": row["target_url"],
        "context": row["context"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "creator": creator,
    }


def create_status(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    state = data.get("state")
    if state not in STATUS_STATES:
        raise validation_failed("Status", "state", "custom", message="state is not included")
    sha = _sha(ctx, call.params["sha"])
    now = call.forge.now()
    new = call.forge.db.run(
        "INSERT INTO statuses (repo_id, sha, state, context, description, target_url,"
        " creator_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ctx.id,
        sha,
        state,
        str(data.get("context") or "default"),
        data.get("description"),
        data.get("target_url"),
        call.user["id"],
        now,
        now,
    )
    row = call.forge.db.one("SELECT * FROM statuses WHERE id = ?", new)
    assert row is not None
    headers = {"location": f"{ctx.url}/statuses/{sha}"}
    return Reply(201, render_status(call, ctx, row), headers=headers)


def _statuses(call: Call, ctx: RepoContext, sha: str) -> list[sqlite3.Row]:
    return call.forge.db.all(
        "SELECT * FROM statuses WHERE repo_id = ? AND sha = ? ORDER BY id DESC", ctx.id, sha
    )


def list_statuses(call: Call) -> Reply:
    ctx = call.repo()
    sha = ctx.git.resolve(call.params["ref"])
    if sha is None:
        raise not_found()
    rows = _statuses(call, ctx, sha)
    return Reply(200, rows, paginate=True, render_item=lambda r: render_status(call, ctx, r))


def _latest_per(rows: list[sqlite3.Row], key: str) -> list[sqlite3.Row]:
    """The newest row of each `key` (rows come newest first)."""
    seen: dict[str, sqlite3.Row] = {}
    for row in rows:
        seen.setdefault(row[key], row)
    return list(seen.values())


def _combined(states: list[str]) -> str:
    """GitHub's combined state: failure if any failed or errored, pending if any is pending or
    there are none, success otherwise."""
    if any(s in ("error", "failure") for s in states):
        return "failure"
    if not states or "pending" in states:
        return "pending"
    return "success"


def combined_status(call: Call) -> Reply:
    ctx = call.repo()
    sha = ctx.git.resolve(call.params["ref"])
    if sha is None:
        raise not_found()
    latest = _latest_per(_statuses(call, ctx, sha), "context")
    body = {
        "state": _combined([row["state"] for row in latest]),
        "statuses": [_simple_status(call, ctx, row) for row in latest],
        "sha": sha,
        "total_count": len(latest),
        "repository": _minimal_repo(call, ctx),
        "commit_url": f"{ctx.url}/commits/{sha}",
        "url": f"{ctx.url}/commits/{sha}/status",
    }
    return Reply(200, body)


def _simple_status(call: Call, ctx: RepoContext, row: sqlite3.Row) -> dict[str, Any]:
    out = render_status(call, ctx, row)
    out.pop("creator")
    out["required"] = None
    return out


def _minimal_repo(call: Call, ctx: RepoContext) -> dict[str, Any]:
    return call.forge.render_repo(ctx.row, call.render)


# -- check runs -------------------------------------------------------------------------------
def render_check_run(call: Call, ctx: RepoContext, row: sqlite3.Row) -> dict[str, Any]:
    url = f"{ctx.url}/check-runs/{row['id']}"
    html = f"{ctx.html}/runs/{row['id']}"
    return {
        "id": row["id"],
        "head_sha": row["head_sha"],
        "node_id": node_id("CheckRun", row["id"]),
        "external_id": row["external_id"],
        "url": url,
        "html_url": html,
        "details_url": row["details_url"] or html,
        "status": row["status"],
        "conclusion": row["conclusion"],
        "started_at": row["started_at"],
        "completed_at": row["completed_at"],
        "output": {
            "title": row["title"],
            "summary": row["summary"],
            "text": row["text"],
            "annotations_count": 0,
            "annotations_url": f"{url}/annotations",
        },
        "name": row["name"],
        "check_suite": {"id": row["id"]},
        "app": None,
        "pull_requests": [],
    }


def _check_fields(data: dict[str, Any], now: str) -> dict[str, Any]:
    """The columns a create or update sets, checked as GitHub checks them."""
    fields: dict[str, Any] = {}
    if "status" in data:
        if data["status"] not in CHECK_STATUSES:
            raise validation_failed("CheckRun", "status", "invalid")
        fields["status"] = data["status"]
    if data.get("conclusion") is not None:
        if data["conclusion"] not in CONCLUSIONS:
            raise validation_failed("CheckRun", "conclusion", "invalid")
        # Giving a conclusion completes the run, as on GitHub.
        fields |= {"conclusion": data["conclusion"], "status": "completed"}
        fields["completed_at"] = data.get("completed_at") or now
    elif fields.get("status") == "completed":
        raise ApiError(422, "Invalid request.\n\nNo conclusion provided for a completed run.")
    for key in ("external_id", "details_url", "started_at", "name"):
        if key in data:
            fields[key] = data[key]
    output = data.get("output")
    if isinstance(output, dict):
        if not output.get("title") or not output.get("summary"):
            raise validation_failed("CheckRun", "output", "missing_field")
        fields |= {k: output.get(k) for k in ("title", "summary", "text")}
    return fields


def create_check_run(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    for key in ("name", "head_sha"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise validation_failed("CheckRun", key, "missing_field")
    sha = _sha(ctx, data["head_sha"])
    now = call.forge.now()
    fields = {"status": "queued", "started_at": now} | _check_fields(data, now)
    fields |= {"repo_id": ctx.id, "head_sha": sha, "name": data["name"]}
    columns = ", ".join(fields)
    new = call.forge.db.run(
        f"INSERT INTO check_runs ({columns}) VALUES ({', '.join('?' for _ in fields)})",
        *fields.values(),
    )
    row = call.forge.db.one("SELECT * FROM check_runs WHERE id = ?", new)
    assert row is not None
    body = render_check_run(call, ctx, row)
    return Reply(201, body, headers={"location": body["url"]})


def _check_run_row(call: Call, ctx: RepoContext) -> sqlite3.Row:
    row = call.forge.db.one(
        "SELECT * FROM check_runs WHERE id = ? AND repo_id = ?",
        call.int_param("check_run_id"),
        ctx.id,
    )
    if row is None:
        raise not_found()
    return row


def get_check_run(call: Call) -> Reply:
    ctx = call.repo()
    return Reply(200, render_check_run(call, ctx, _check_run_row(call, ctx)))


def update_check_run(call: Call) -> Reply:
    ctx = call.writable_repo()
    row = _check_run_row(call, ctx)
    fields = _check_fields(call.json(), call.forge.now())
    for column, value in fields.items():
        call.forge.db.run(f"UPDATE check_runs SET {column} = ? WHERE id = ?", value, row["id"])
    fresh = call.forge.db.one("SELECT * FROM check_runs WHERE id = ?", row["id"])
    assert fresh is not None
    return Reply(200, render_check_run(call, ctx, fresh))


def _check_runs(call: Call, ctx: RepoContext, sha: str) -> list[sqlite3.Row]:
    return call.forge.db.all(
        "SELECT * FROM check_runs WHERE repo_id = ? AND head_sha = ? ORDER BY id DESC",
        ctx.id,
        sha,
    )


def list_check_runs(call: Call) -> Reply:
    ctx = call.repo()
    sha = ctx.git.resolve(call.params["ref"])
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {call.params['ref']}")
    rows = _check_runs(call, ctx, sha)
    q = call.query
    if q.get("filter", "latest") == "latest":
        rows = _latest_per(rows, "name")
    if q.get("check_name"):
        rows = [r for r in rows if r["name"] == q["check_name"]]
    if q.get("status"):
        rows = [r for r in rows if r["status"] == q["status"]]
    try:
        per_page = min(max(int(q.get("per_page", 30)), 1), 100)
        page = max(int(q.get("page", 1)), 1)
    except ValueError:
        per_page, page = 30, 1
    shown = rows[(page - 1) * per_page : page * per_page]
    body = {
        "total_count": len(rows),
        "check_runs": [render_check_run(call, ctx, r) for r in shown],
    }
    return Reply(200, body)


# -- what the rest of the forge asks ----------------------------------------------------------
def commit_state(call: Call, ctx: RepoContext, sha: str) -> str | None:
    """failure, pending or success for a commit from its statuses and check runs; None when
    nothing reported on it."""
    statuses = [r["state"] for r in _latest_per(_statuses(call, ctx, sha), "context")]
    runs = _latest_per(_check_runs(call, ctx, sha), "name")
    if not statuses and not runs:
        return None
    if any(s in ("error", "failure") for s in statuses) or any(
        r["conclusion"] in FAILING_CONCLUSIONS for r in runs
    ):
        return "failure"
    if "pending" in statuses or any(r["status"] != "completed" for r in runs):
        return "pending"
    return "success"


def passing_contexts(call: Call, ctx: RepoContext, sha: str) -> set[str]:
    """The status contexts and check-run names whose latest word on `sha` is success."""
    statuses = _latest_per(_statuses(call, ctx, sha), "context")
    runs = _latest_per(_check_runs(call, ctx, sha), "name")
    return {r["context"] for r in statuses if r["state"] == "success"} | {
        r["name"] for r in runs if r["conclusion"] in ("success", "neutral", "skipped")
    }
