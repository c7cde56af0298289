"""Branch protection: the rules a merge into a branch must meet, and the REST handlers for them.

Supported rules are the ones a merge can be refused for: required status checks (by context
or check-run name, `strict` meaning the head must contain the base), and a number of approving
reviews. Every other rule of GitHub's request body is stored and echoed, never enforced; a
merge that breaks a rule is answered 405 with GitHub's words, as GitHub does.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agent_harness.forge.checks import passing_contexts
from agent_harness.forge.errors import ApiError, validation_failed
from agent_harness.forge.routes import Call, Reply, RepoContext, Router

REQUIRED = (
    "required_status_checks",
    "enforce_admins",
    "required_pull_request_reviews",
    "restrictions",
)


def register(router: Router) -> None:
    path = "/repos/{owner}/{repo}/branches/{branch}/protection"
    router.add("GET", path, get_protection)
    router.add("PUT", path, put_protection)
    router.add("DELETE", path, delete_protection)


def required_contexts(checks: dict[str, Any]) -> list[str]:
    """The contexts a rule requires: GitHub takes `contexts` (older) or `checks` (newer)."""
    named = [c.get("context") for c in checks.get("checks") or [] if isinstance(c, dict)]
    return list(dict.fromkeys([*(checks.get("contexts") or []), *filter(None, named)]))


def rules_of(call: Call, ctx: RepoContext, branch: str) -> dict[str, Any] | None:
    row = call.forge.db.one(
        "SELECT rules FROM protections WHERE repo_id = ? AND branch = ?", ctx.id, branch
    )
    return None if row is None else dict(json.loads(row["rules"]))


def _branch(call: Call, ctx: RepoContext) -> str:
    name = call.params["branch"]
    if name not in ctx.git.branches():
        raise ApiError(404, "Branch not found")
    return name


def render(ctx: RepoContext, branch: str, rules: dict[str, Any]) -> dict[str, Any]:
    url = f"{ctx.url}/branches/{branch}/protection"
    out: dict[str, Any] = {"url": url, "enabled": True, "name": branch, "protection_url": url}
    checks = rules.get("required_status_checks")
    if checks is not None:
        contexts = required_contexts(checks)
        out["required_status_checks"] = {
            "url": f"{url}/required_status_checks",
            "contexts_url": f"{url}/required_status_checks/contexts",
            "strict": bool(checks.get("strict")),
            "contexts": contexts,
            "checks": [{"context": c, "app_id": None} for c in contexts],
        }
    reviews = rules.get("required_pull_request_reviews")
    if reviews is not None:
        out["required_pull_request_reviews"] = {
            "url": f"{url}/required_pull_request_reviews",
            "dismiss_stale_reviews": bool(reviews.get("dismiss_stale_reviews")),
            "require_code_owner_reviews": bool(reviews.get("require_code_owner_reviews")),
            "required_approving_review_count": int(
                reviews.get("required_approving_review_count", 1)
            ),
        }
    out["enforce_admins"] = {
        "url": f"{url}/enforce_admins",
        "enabled": bool(rules.get("enforce_admins")),
    }
    return out


def get_protection(call: Call) -> Reply:
    ctx = call.repo()
    branch = _branch(call, ctx)
    rules = rules_of(call, ctx, branch)
    if rules is None:
        raise ApiError(404, "Branch not protected")
    return Reply(200, render(ctx, branch, rules))


def put_protection(call: Call) -> Reply:
    ctx = call.writable_repo()
    branch = _branch(call, ctx)
    data = call.json()
    for key in REQUIRED:
        if key not in data:
            raise validation_failed("Branch", key, "missing_field")
    call.forge.db.run(
        "INSERT INTO protections (repo_id, branch, rules) VALUES (?, ?, ?)"
        " ON CONFLICT (repo_id, branch) DO UPDATE SET rules = excluded.rules",
        ctx.id,
        branch,
        json.dumps(data),
    )
    return Reply(200, render(ctx, branch, data))


def delete_protection(call: Call) -> Reply:
    ctx = call.writable_repo()
    branch = _branch(call, ctx)
    if rules_of(call, ctx, branch) is None:
        raise ApiError(404, "Branch not protected")
    call.forge.db.run("DELETE FROM protections WHERE repo_id = ? AND branch = ?", ctx.id, branch)
    return Reply(204)


def refuse_merge(
    call: Call, ctx: RepoContext, pull: sqlite3.Row, base_sha: str, head_sha: str
) -> None:
    """Raise GitHub's 405 when merging `pull` would break its base branch's protection."""
    rules = rules_of(call, ctx, pull["base_ref"])
    if rules is None:
        return
    checks = rules.get("required_status_checks") or {}
    passed = passing_contexts(call, ctx, head_sha)
    for context in required_contexts(checks):
        if context not in passed:
            raise ApiError(405, f'Required status check "{context}" is expected.')
    if checks.get("strict") and ctx.git.merge_base(base_sha, head_sha) != base_sha:
        raise ApiError(405, "Head branch is not up to date with the base branch.")
    reviews = rules.get("required_pull_request_reviews")
    if reviews is not None:
        wanted = int(reviews.get("required_approving_review_count", 1))
        row = call.forge.db.one(
            "SELECT COUNT(*) AS n FROM reviews WHERE pull_id = ? AND state = 'APPROVED'",
            pull["id"],
        )
        if wanted and (row["n"] if row else 0) < wanted:
            raise ApiError(
                405,
                f"At least {wanted} approving review is required by reviewers with write access.",
            )
