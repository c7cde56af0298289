"""REST handlers for accounts, repositories and their git data (branches, commits, refs, compare).

Git data is read from the bare repository on every call, never cached in the database, so a
branch pushed with plain `git push` shows up here immediately, as it does on GitHub.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from agent_harness.forge.errors import ApiError, not_found, validation_failed
from agent_harness.forge.gitrepo import BareRepo
from agent_harness.forge.routes import Call, Reply, RepoContext, Router

# GitHub's repository names: fullmatch, as `$` alone lets a trailing newline through (which
# then ended a response's headers early); `.` and `..` are refused as GitHub refuses them.
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def _good_name(name: object) -> bool:
    return isinstance(name, str) and bool(_NAME.fullmatch(name)) and name not in (".", "..")


def register(router: Router) -> None:
    router.add("GET", "/user", get_authenticated_user)
    router.add("GET", "/users/{username}", get_user)
    router.add("GET", "/users/{username}/repos", list_user_repos)
    router.add("GET", "/orgs/{org}", get_org)
    router.add("POST", "/user/repos", create_user_repo)
    router.add("POST", "/orgs/{org}/repos", create_org_repo)
    router.add("GET", "/repos/{owner}/{repo}", get_repo)
    router.add("PATCH", "/repos/{owner}/{repo}", update_repo)
    router.add("GET", "/repositories/{repository_id}", get_repo_by_id)
    router.add("GET", "/repos/{owner}/{repo}/branches", list_branches)
    router.add("GET", "/repos/{owner}/{repo}/branches/{branch}", get_branch)
    router.add("GET", "/repos/{owner}/{repo}/commits", list_commits)
    router.add("GET", "/repos/{owner}/{repo}/commits/{ref}", get_commit)
    router.add("GET", "/repos/{owner}/{repo}/git/ref/{ref}", get_ref)
    router.add("GET", "/repos/{owner}/{repo}/git/matching-refs/{ref}", list_matching_refs)
    router.add("GET", "/repos/{owner}/{repo}/git/refs", list_refs)
    router.add("POST", "/repos/{owner}/{repo}/git/refs", create_ref)
    router.add("GET", "/repos/{owner}/{repo}/git/refs/{ref}", get_refs)
    router.add("PATCH", "/repos/{owner}/{repo}/git/refs/{ref}", update_ref)
    router.add("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}", delete_ref)
    router.add("GET", "/repos/{owner}/{repo}/compare/{basehead}", compare)
    router.add("GET", "/rate_limit", rate_limit)


# -- accounts ---------------------------------------------------------------------------------
def get_authenticated_user(call: Call) -> Reply:
    return Reply(200, call.render.full_user(call.user, private=True))


def get_user(call: Call) -> Reply:
    row = call.forge.db.one("SELECT * FROM users WHERE login = ?", call.params["username"])
    if row is None:
        raise not_found()
    return Reply(200, call.render.full_user(row, private=False))


def list_user_repos(call: Call) -> Reply:
    """An account's public repositories (a user's `repos_url`), by name as GitHub sorts them."""
    owner = call.forge.db.one("SELECT id FROM users WHERE login = ?", call.params["username"])
    if owner is None:
        raise not_found()
    rows = call.forge.db.all(
        "SELECT * FROM repos WHERE owner_id = ? AND private = 0 ORDER BY name", owner["id"]
    )
    return Reply(
        200, rows, paginate=True, render_item=lambda row: call.forge.render_repo(row, call.render)
    )


def get_org(call: Call) -> Reply:
    # Organizations are implicit on the forge: any name not taken by a user is one.
    row = call.forge.account(call.params["org"], "Organization")
    if row is None:
        raise not_found()
    return Reply(200, call.render.organization(row))


def create_user_repo(call: Call) -> Reply:
    return _create_repo(call, call.user["login"])


def create_org_repo(call: Call) -> Reply:
    if call.forge.account(call.params["org"], "Organization") is None:
        raise not_found()
    return _create_repo(call, call.params["org"])


def _create_repo(call: Call, owner: str) -> Reply:
    call.require_write()
    data = call.json()
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise validation_failed("Repository", "name", "missing_field")
    if not _good_name(name):
        raise validation_failed("Repository", "name", "invalid")
    if call.forge.repo_row(owner, name) is not None:
        raise _name_taken()
    call.forge.create_repo(
        owner,
        name,
        auto_init=bool(data.get("auto_init", False)),
        description=data.get("description"),
        private=bool(data.get("private", False)),
        has_issues=bool(data.get("has_issues", True)),
        homepage=data.get("homepage"),
    )
    ctx = call.forge.repo_context(owner, name, call.render)
    assert ctx is not None
    return Reply(201, call.forge.render_repo(ctx.row, call.render))


def get_repo(call: Call) -> Reply:
    ctx = call.repo()
    return Reply(200, call.forge.render_repo(_settled_default(call, ctx), call.render))


def _settled_default(call: Call, ctx: RepoContext) -> Any:
    """The repository's row, its default branch settled as GitHub settles it: pushes reach the
    bare repository without the forge (over file://), so the first branch pushed to an empty
    one (`master`, where the forge made `main`) becomes its default when the forge next looks,
    `main` or `master` first when several came at once."""
    current = ctx.row["default_branch"]
    branches = ctx.git.branches()
    if not branches or current in branches:
        return ctx.row
    chosen = next((b for b in ("main", "master") if b in branches), sorted(branches)[0])
    ctx.git.set_head(chosen)
    call.forge.db.run("UPDATE repos SET default_branch = ? WHERE id = ?", chosen, ctx.id)
    row = call.forge.db.one("SELECT * FROM repos WHERE id = ?", ctx.id)
    assert row is not None
    return row


def update_repo(call: Call) -> Reply:
    ctx = call.repo()
    call.require_write()
    data = call.json()
    if ctx.row["archived"] and data.get("archived") is not False:
        raise ApiError(403, "Repository was archived so is read-only.")
    columns = {
        "description": "description",
        "homepage": "homepage",
        "private": "private",
        "archived": "archived",
        "has_issues": "has_issues",
        "default_branch": "default_branch",
    }
    # Every value checked before anything changes: a bad one after the rename left the row
    # under the old name and the bare repository under the new (a 500 on every git read).
    for key in columns:
        if key in data and not _fits(key, data[key]):
            raise validation_failed("Repository", key, "invalid")
    wanted = data.get("default_branch")
    changed = wanted is not None and wanted != ctx.row["default_branch"]
    if changed and wanted not in ctx.git.branches():  # as GitHub: only a branch that exists
        raise validation_failed("Repository", "default_branch", "invalid")
    if "name" in data and data["name"] != ctx.row["name"]:
        _rename(call, ctx, data["name"])
    for key, column in columns.items():
        if key in data:
            value = data[key]
            if isinstance(value, bool):
                value = int(value)
            call.forge.db.run(f"UPDATE repos SET {column} = ? WHERE id = ?", value, ctx.id)
    call.forge.db.run("UPDATE repos SET updated_at = ? WHERE id = ?", call.forge.now(), ctx.id)
    row = call.forge.db.one("SELECT * FROM repos WHERE id = ?", ctx.id)
    assert row is not None
    if wanted is not None:  # what a clone checks out; the repository may have been renamed
        owner = ctx.owner["login"]
        BareRepo(call.forge.repo_path(owner, row["name"])).set_head(str(wanted))
    return Reply(200, call.forge.render_repo(row, call.render))


_FLAGS = frozenset({"private", "archived", "has_issues"})


def _fits(key: str, value: Any) -> bool:
    if key in _FLAGS:
        return isinstance(value, bool)
    if key == "default_branch":
        return isinstance(value, str) and 0 < len(value) <= 255
    return value is None or (isinstance(value, str) and len(value) <= 65_536)


def _rename(call: Call, ctx: RepoContext, name: Any) -> None:
    """A new name for the repository: its row and its bare repository move together."""
    if not _good_name(name):
        raise validation_failed("Repository", "name", "invalid")
    login = ctx.owner["login"]
    taken = call.forge.repo_row(login, name)
    if taken is not None and taken["id"] != ctx.id:
        raise _name_taken()
    target = call.forge.repo_path(login, name)
    if target != ctx.git.path:
        ctx.git.path.rename(target)
    call.forge.db.run("UPDATE repos SET name = ? WHERE id = ?", name, ctx.id)


def get_repo_by_id(call: Call) -> Reply:
    """`/repositories/{id}`: the address GitHub's own links use, stable across renames."""
    row = call.forge.db.one("SELECT * FROM repos WHERE id = ?", call.int_param("repository_id"))
    if row is None:
        raise not_found()
    return Reply(200, call.forge.render_repo(row, call.render))


# -- branches and commits ---------------------------------------------------------------------
def list_branches(call: Call) -> Reply:
    ctx = call.repo()
    body = [
        {
            "name": name,
            "commit": {"sha": sha, "url": f"{ctx.url}/commits/{sha}"},
            "protected": False,
        }
        for name, sha in sorted(ctx.git.branches().items())
    ]
    return Reply(200, body, paginate=True)


def get_branch(call: Call) -> Reply:
    ctx = call.repo()
    name = call.params["branch"]
    sha = ctx.git.branches().get(name)
    if sha is None:
        raise ApiError(404, "Branch not found")
    protected = call.forge.db.one(
        "SELECT 1 FROM protections WHERE repo_id = ? AND branch = ?", ctx.id, name
    )
    return Reply(
        200,
        {
            "name": name,
            "commit": call.render.commit(ctx.git.commit(sha), ctx.url, ctx.html),
            "_links": {"self": f"{ctx.url}/branches/{name}", "html": f"{ctx.html}/tree/{name}"},
            "protected": protected is not None,
            "protection": {
                "enabled": False,
                "required_status_checks": {
                    "enforcement_level": "off",
                    "contexts": [],
                    "checks": [],
                },
            },
            "protection_url": f"{ctx.url}/branches/{name}/protection",
        },
    )


def _since(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise validation_failed("Commit", field, "invalid") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


def list_commits(call: Call) -> Reply:
    ctx = call.repo()
    ref = call.query.get("sha") or ctx.row["default_branch"]
    if not ctx.git.branches():
        raise ApiError(409, "Git Repository is empty.")
    sha = ctx.git.resolve(ref)
    if sha is None:
        raise not_found()
    commits = ctx.git.log(
        sha,
        since=_since(call.query.get("since"), "since"),
        until=_since(call.query.get("until"), "until"),
        path=call.query.get("path"),
    )
    return Reply(200, [call.render.commit(c, ctx.url, ctx.html) for c in commits], paginate=True)


def get_commit(call: Call) -> Reply:
    ctx = call.repo()
    sha = ctx.git.resolve(call.params["ref"])
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {call.params['ref']}")
    info = ctx.git.commit(sha)
    parent = info.parents[0] if info.parents else _empty_tree()
    files = ctx.git.changes(parent, sha)
    return Reply(200, call.render.commit(info, ctx.url, ctx.html, files=files))


def _empty_tree() -> str:
    return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's well-known empty tree


# -- refs -------------------------------------------------------------------------------------
def get_ref(call: Call) -> Reply:
    ctx = call.repo()
    ref = "refs/" + call.params["ref"]
    sha = ctx.git.refs(ref).get(ref)
    if sha is None:
        raise not_found()
    return Reply(200, call.render.git_ref(ref, sha, ctx.url))


def get_refs(call: Call) -> Reply:
    """`git/refs/{ref}`, where every ref's `url` points: the ref itself when it exists, else
    (as GitHub still answers there) the refs under it as a folder, such as `heads`."""
    ctx = call.repo()
    ref = "refs/" + call.params["ref"]
    refs = ctx.git.refs(ref)
    if ref in refs:
        return Reply(200, call.render.git_ref(ref, refs[ref], ctx.url))
    under = sorted((k, v) for k, v in refs.items() if k.startswith(ref.rstrip("/") + "/"))
    if not under:
        raise not_found()
    return Reply(200, [call.render.git_ref(k, v, ctx.url) for k, v in under], paginate=True)


def list_matching_refs(call: Call) -> Reply:
    ctx = call.repo()
    prefix = "refs/" + call.params["ref"]
    refs = {k: v for k, v in ctx.git.refs("refs/").items() if k.startswith(prefix)}
    return Reply(200, [call.render.git_ref(k, v, ctx.url) for k, v in sorted(refs.items())], True)


def list_refs(call: Call) -> Reply:
    ctx = call.repo()
    refs = ctx.git.refs("refs/")
    return Reply(200, [call.render.git_ref(k, v, ctx.url) for k, v in sorted(refs.items())], True)


def create_ref(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    ref, sha = data.get("ref"), data.get("sha")
    if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
        raise ApiError(422, "Reference name must start with 'refs/' and have at least two slashes.")
    if not isinstance(sha, str) or ctx.git.resolve(sha) is None:
        raise ApiError(422, "Object does not exist")
    if ctx.git.refs(ref).get(ref) is not None:
        raise ApiError(422, "Reference already exists")
    ctx.git.update_ref(ref, sha)
    return Reply(201, call.render.git_ref(ref, sha, ctx.url))


def update_ref(call: Call) -> Reply:
    ctx = call.writable_repo()
    data = call.json()
    ref = "refs/" + call.params["ref"]
    old = ctx.git.refs(ref).get(ref)
    sha = data.get("sha")
    if old is None:
        raise ApiError(422, "Reference does not exist")
    if not isinstance(sha, str) or ctx.git.resolve(sha) is None:
        raise ApiError(422, "Object does not exist")
    if not data.get("force") and ctx.git.merge_base(old, sha) != old:
        raise ApiError(422, "Update is not a fast forward")
    ctx.git.update_ref(ref, sha)
    return Reply(200, call.render.git_ref(ref, sha, ctx.url))


def delete_ref(call: Call) -> Reply:
    ctx = call.writable_repo()
    ref = "refs/" + call.params["ref"]
    if ctx.git.refs(ref).get(ref) is None:
        raise ApiError(422, "Reference does not exist")
    ctx.git.delete_ref(ref)
    return Reply(204)


# -- compare ----------------------------------------------------------------------------------
def _branch_or_sha(ctx: RepoContext, spec: str) -> str:
    owner, sep, name = spec.partition(":")
    if sep and owner.lower() != ctx.owner["login"].lower():
        raise not_found()
    sha = ctx.git.resolve(name if sep else spec)
    if sha is None:
        raise not_found()
    return sha


def compare(call: Call) -> Reply:
    ctx = call.repo()
    spec = call.params["basehead"]
    if "..." not in spec:
        raise not_found()
    base_spec, head_spec = spec.split("...", 1)
    base, head = _branch_or_sha(ctx, base_spec), _branch_or_sha(ctx, head_spec)
    merge_base = ctx.git.merge_base(base, head)
    if merge_base is None:
        raise not_found()
    ahead, behind = ctx.git.count(merge_base, head), ctx.git.count(merge_base, base)
    status = (
        "identical"
        if ahead == behind == 0
        else "ahead"
        if behind == 0
        else "behind"
        if ahead == 0
        else "diverged"
    )
    # GitHub lists compare commits oldest first.
    commits = list(reversed(ctx.git.log(head, exclude=merge_base)))
    render = call.render
    body: dict[str, Any] = {
        "url": f"{ctx.url}/compare/{spec}",
        "html_url": f"{ctx.html}/compare/{spec}",
        "permalink_url": f"{ctx.html}/compare/{base}...{head}",
        "diff_url": f"{ctx.html}/compare/{spec}.diff",
        "patch_url": f"{ctx.html}/compare/{spec}.patch",
        "base_commit": render.commit(ctx.git.commit(base), ctx.url, ctx.html),
        "merge_base_commit": render.commit(ctx.git.commit(merge_base), ctx.url, ctx.html),
        "status": status,
        "ahead_by": ahead,
        "behind_by": behind,
        "total_commits": ahead,
        "commits": [render.commit(c, ctx.url, ctx.html) for c in commits[:250]],
        "files": [
            render.file(f, ctx.url, ctx.html, head) for f in ctx.git.changes(merge_base, head)
        ],
    }
    return Reply(200, body)


def rate_limit(call: Call) -> Reply:
    state = call.forge.limiter.peek(call.token)
    rate = {
        "limit": state.limit,
        "remaining": state.remaining,
        "reset": state.reset,
        "used": state.used,
    }
    return Reply(200, {"resources": {"core": rate, "search": rate}, "rate": rate})


def _name_taken() -> ApiError:
    """GitHub's 422 for a repository name the account already uses (on create and rename)."""
    return ApiError(
        422,
        "Repository creation failed.",
        [
            {
                "resource": "Repository",
                "code": "custom",
                "field": "name",
                "message": "name already exists on this account",
            }
        ],
    )
