"""Issue search (`GET /search/issues`): the qualifiers a client watching its work needs.

Understood: `repo:`, `is:`/`type:` (issue, pr, open, closed, locked), `state:`, `label:`,
`updated:`/`created:` with `>`, `>=`, `<`, `<=`, `status:` (success, failure, pending: the
combined word of a pull request head's statuses and check runs) and `head:`; other words match
the title or body. A qualifier the forge does not know is refused with 422 rather than
ignored, so a client never mistakes a wider answer for the one it asked for.
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from typing import Any

from agent_harness.forge.checks import commit_state
from agent_harness.forge.errors import ApiError
from agent_harness.forge.pulls import refresh_heads
from agent_harness.forge.routes import Call, Reply, RepoContext, Router

_KNOWN = {"repo", "is", "type", "state", "label", "updated", "created", "status", "head"}
_COMPARE = re.compile(r"^(>=|<=|>|<)?(.+)$")


def register(router: Router) -> None:
    router.add("GET", "/search/issues", search_issues)


def _invalid(message: str) -> ApiError:
    error = {"message": message, "resource": "Search", "field": "q", "code": "invalid"}
    return ApiError(422, "Validation Failed", [error])


def _terms(query: str) -> tuple[list[tuple[str, str]], list[str]]:
    try:
        words = shlex.split(query)
    except ValueError as exc:
        raise _invalid(f"The search query could not be read: {exc}") from exc
    qualifiers, text = [], []
    for word in words:
        key, sep, value = word.partition(":")
        if sep and key.isalpha():
            if key.lower() not in _KNOWN:
                raise _invalid(f"The qualifier `{key}` is not supported by this forge.")
            qualifiers.append((key.lower(), value))
        else:
            text.append(word.lower())
    return qualifiers, text


def _compare(column: str, value: str) -> tuple[str, str]:
    found = _COMPARE.match(value)
    assert found is not None
    op = found.group(1) or ">="
    moment = found.group(2)
    if len(moment) == 10:  # a date: the whole day
        moment += "T00:00:00Z" if op in (">=", "<") else "T23:59:59Z"
    return f"issues.{column} {op} ?", moment


def _sql(qualifiers: list[tuple[str, str]], call: Call) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    args: list[Any] = []
    for key, value in qualifiers:
        low = value.lower()
        if key == "repo":
            owner, _, name = value.partition("/")
            row = call.forge.repo_row(owner, name)
            if row is None:
                raise _invalid(f"The repository `{value}` does not exist or cannot be seen.")
            where.append("issues.repo_id = ?")
            args.append(row["id"])
        elif (key in ("is", "type")) and low in ("pr", "issue"):
            where.append("issues.is_pull = ?")
            args.append(int(low == "pr"))
        elif (key in ("is", "state")) and low in ("open", "closed"):
            where.append("issues.state = ?")
            args.append(low)
        elif key == "is" and low == "locked":
            where.append("issues.locked = 1")
        elif key == "label":
            where.append(
                "EXISTS (SELECT 1 FROM issue_labels JOIN labels ON labels.id ="
                " issue_labels.label_id WHERE issue_labels.issue_id = issues.id"
                " AND labels.name = ?)"
            )
            args.append(value)
        elif key in ("updated", "created"):
            clause, moment = _compare(f"{key}_at", value)
            where.append(clause)
            args.append(moment)
        elif key == "head":
            where.append(
                "EXISTS (SELECT 1 FROM pulls WHERE pulls.issue_id = issues.id"
                " AND pulls.head_ref = ?)"
            )
            args.append(value)
        elif key != "status":
            raise _invalid(f"`{key}:{value}` is not understood by this forge.")
    return where, args


def search_issues(call: Call) -> Reply:
    query = call.query.get("q", "")
    if not query.strip():
        raise ApiError(
            422,
            "Validation Failed",
            [{"resource": "Search", "field": "q", "code": "missing"}],
        )
    qualifiers, text = _terms(query)
    for key, value in qualifiers:
        if key == "repo" and (
            ctx := call.forge.repo_context(*value.partition("/")[::2], call.render)
        ):
            refresh_heads(call, ctx)
    where, args = _sql(qualifiers, call)
    sort = {"updated": "updated_at", "created": "created_at"}.get(call.query.get("sort", ""))
    order = "ASC" if call.query.get("order") == "asc" else "DESC"
    rows = call.forge.db.all(
        "SELECT issues.* FROM issues"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + f" ORDER BY issues.{sort or 'updated_at'} {order}, issues.id {order}",
        *args,
    )
    rows = [r for r in rows if all(w in f"{r['title']} {r['body'] or ''}".lower() for w in text)]
    wanted = [v.lower() for k, v in qualifiers if k == "status"]
    if wanted:
        rows = [r for r in rows if _head_state(call, r) in wanted]
    items = [_item(call, r) for r in rows]
    body = {
        "total_count": len(items),
        "incomplete_results": False,
        "items": items[: _per_page(call)],
        "search_type": "lexical",
    }
    return Reply(200, body)


def _per_page(call: Call) -> int:
    try:
        return min(max(int(call.query.get("per_page", 30)), 1), 100)
    except ValueError:
        return 30


def _context(call: Call, issue: sqlite3.Row) -> RepoContext:
    repo = call.forge.db.one("SELECT * FROM repos WHERE id = ?", issue["repo_id"])
    assert repo is not None
    owner = call.forge.db.one("SELECT login FROM users WHERE id = ?", repo["owner_id"])
    assert owner is not None
    ctx = call.forge.repo_context(owner["login"], repo["name"], call.render)
    assert ctx is not None
    return ctx


def _head_state(call: Call, issue: sqlite3.Row) -> str | None:
    pull = call.forge.db.one("SELECT * FROM pulls WHERE issue_id = ?", issue["id"])
    if pull is None:
        return None
    ctx = _context(call, issue)
    head = ctx.git.resolve(f"refs/heads/{pull['head_ref']}") or pull["head_sha"]
    return commit_state(call, ctx, head)


def _item(call: Call, issue: sqlite3.Row) -> dict[str, Any]:
    ctx = _context(call, issue)
    pull = call.forge.db.one("SELECT * FROM pulls WHERE issue_id = ?", issue["id"])
    return call.render.issue(issue, ctx.url, ctx.html, pull) | {"score": 1.0}
