"""REST handlers for a repository's git database and files: commit, tree and blob objects, the
contents of a path at a ref, and tags.

Everything is read from the bare repository by git, object by object: a path is looked up in
the trees of a commit, never on a disk, so a path with `..`, `.` or an empty part names
nothing (404), and neither does a sha that is not one. The sizes GitHub documents bound every
answer: a tree stops at 100,000 entries (`truncated`), a directory at 1,000, a file's content
is inlined up to 1 MB and no blob past 100 MB is read.
"""

from __future__ import annotations

import base64
import posixpath
import re
import urllib.parse
from typing import Any

from agent_harness.forge.errors import ApiError, not_found
from agent_harness.forge.gitrepo import TreeEntry
from agent_harness.forge.routes import Call, Reply, RepoContext, Router
from agent_harness.forge.shapes import node_id, url_path

MAX_TREE_ENTRIES = 100_000
MAX_DIRECTORY = 1000
INLINE_LIMIT = 1024 * 1024
BLOB_LIMIT = 100 * 1024 * 1024
NOT_A_SHA = "The sha parameter must be exactly 40 characters and contain only [0-9a-f]."
EMPTY = "Git Repository is empty."
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def register(router: Router) -> None:
    router.add("GET", "/repos/{owner}/{repo}/git/commits/{commit_sha}", get_git_commit)
    router.add("GET", "/repos/{owner}/{repo}/git/trees/{tree_sha}", get_tree)
    router.add("GET", "/repos/{owner}/{repo}/git/blobs/{file_sha}", get_blob)
    router.add("GET", "/repos/{owner}/{repo}/contents/{path}", get_contents)
    router.add("GET", "/repos/{owner}/{repo}/tags", list_tags)


def too_large() -> ApiError:
    """GitHub's refusal of a blob past what its API reads (100 MB)."""
    error = {"resource": "Blob", "field": "data", "code": "too_large"}
    return ApiError(403, "This blob is too large to read through the API (over 100 MB).", [error])


def base64_lines(data: bytes) -> str:
    """Bytes as GitHub's `content` carries them: base64 in lines of 60 characters."""
    text = base64.b64encode(data).decode("ascii")
    return "".join(text[i : i + 60] + "\n" for i in range(0, len(text), 60))


# -- git objects --------------------------------------------------------------------------------
def get_git_commit(call: Call) -> Reply:
    ctx = call.repo()
    sha = call.params["commit_sha"]
    if ctx.git.object_kind(sha) != "commit":
        raise not_found()
    return Reply(200, call.render.git_commit(ctx.git.commit(sha), ctx.url, ctx.html))


def _tree_sha(ctx: RepoContext, name: str) -> str | None:
    """The tree `name` stands for: a tree's own sha, a commit's (or tag's) sha, or a branch or
    tag name, as GitHub takes any of them."""
    kind = ctx.git.object_kind(name)
    if kind == "tree":
        return name
    if kind == "blob":
        return None
    if kind is None and not ctx.git.branches():
        raise ApiError(409, EMPTY)
    commit = ctx.git.resolve(name)
    return ctx.git.tree_of(commit) if commit is not None else None


def get_tree(call: Call) -> Reply:
    ctx = call.repo()
    sha = _tree_sha(ctx, call.params["tree_sha"])
    # GitHub: the parameter set to any value at all (even 0 or false) lists every level.
    entries = ctx.git.tree(sha, recursive="recursive" in call.query) if sha else None
    if sha is None or entries is None:
        raise not_found()
    limit = call.forge.tree_limit
    items = []
    for entry in entries[:limit]:
        item: dict[str, Any] = {
            "path": entry.path,
            "mode": entry.mode,
            "type": entry.kind,
            "sha": entry.sha,
        }
        if entry.kind == "blob":
            item |= {"size": entry.size, "url": f"{ctx.url}/git/blobs/{entry.sha}"}
        elif entry.kind == "tree":
            item["url"] = f"{ctx.url}/git/trees/{entry.sha}"
        items.append(item)  # a submodule's commit lives in another repository: no url
    body = {
        "sha": sha,
        "url": f"{ctx.url}/git/trees/{sha}",
        "tree": items,
        "truncated": len(entries) > limit,
    }
    return Reply(200, body)


def get_blob(call: Call) -> Reply:
    ctx = call.repo()
    sha = call.params["file_sha"]
    if not _SHA.fullmatch(sha):
        raise ApiError(422, NOT_A_SHA)
    if ctx.git.object_kind(sha) != "blob":
        raise not_found()
    size = ctx.git.blob_size(sha)
    if size > BLOB_LIMIT:
        raise too_large()
    body = {
        "sha": sha,
        "node_id": node_id("Blob", sha),
        "size": size,
        "url": f"{ctx.url}/git/blobs/{sha}",
        "content": base64_lines(ctx.git.blob(sha)),
        "encoding": "base64",
    }
    return Reply(200, body)


# -- contents -----------------------------------------------------------------------------------
def get_contents(call: Call) -> Reply:
    return _contents(call, call.params["path"])


def _contents(call: Call, path: str) -> Reply:
    """A file as one object with its content, a directory as the list of its entries."""
    ctx = call.repo()
    ref = call.query.get("ref") or str(ctx.row["default_branch"])
    if not ctx.git.branches():
        raise ApiError(404, "This repository is empty.")
    commit = ctx.git.resolve(ref)
    if commit is None:
        raise ApiError(404, f"No commit found for the ref {ref}")
    if path:
        entry = ctx.git.entry(commit, path)
        if entry is None:
            raise not_found()
        if entry.kind != "tree":
            return Reply(200, _one(ctx, ref, commit, entry, path))
        listed = ctx.git.tree(entry.sha) or []
    else:
        listed = ctx.git.tree(f"{commit}^{{tree}}") or []
    prefix = f"{path}/" if path else ""
    body = [_listed(ctx, ref, commit, e, prefix + e.path) for e in listed[:MAX_DIRECTORY]]
    return Reply(200, body)


def _listed(ctx: RepoContext, ref: str, commit: str, entry: TreeEntry, path: str) -> dict[str, Any]:
    """An entry as a directory's listing shows it (a submodule is a "file" there: GitHub keeps
    that for compatibility)."""
    kind = "dir" if entry.kind == "tree" else "symlink" if entry.mode == "120000" else "file"
    quoted = url_path(path)
    url = f"{ctx.url}/contents/{quoted}?ref={urllib.parse.quote(ref, safe='')}"
    git = html = download = None
    if entry.kind != "commit":  # a submodule's objects are in another repository
        git = f"{ctx.url}/git/{'trees' if entry.kind == 'tree' else 'blobs'}/{entry.sha}"
        html = f"{ctx.html}/{'tree' if entry.kind == 'tree' else 'blob'}/{commit}/{quoted}"
        download = f"{ctx.html}/raw/{commit}/{quoted}" if entry.kind == "blob" else None
    return {
        "type": kind,
        "size": entry.size or 0,
        "name": path.rpartition("/")[2],
        "path": path,
        "sha": entry.sha,
        "url": url,
        "git_url": git,
        "html_url": html,
        "download_url": download,
        "_links": {"self": url, "git": git, "html": html},
    }


def _one(ctx: RepoContext, ref: str, commit: str, entry: TreeEntry, path: str) -> dict[str, Any]:
    """A file (its content in base64, none past 1 MB), a symlink (its target) or a
    submodule (where it comes from) named by its own path."""
    out = _listed(ctx, ref, commit, entry, path)
    if entry.kind == "commit":
        return out | {
            "type": "submodule",
            "submodule_git_url": ctx.git.submodule_url(commit, path) or "",
        }
    if entry.mode == "120000":
        target = ctx.git.blob(entry.sha).decode("utf-8", "surrogateescape")
        # GitHub answers a link to a plain file in the repository with that file.
        inside = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        found = None if target.startswith("/") else ctx.git.entry(commit, inside)
        if found is not None and found.kind == "blob" and found.mode != "120000":
            return _one(ctx, ref, commit, found, inside)
        return out | {"target": target}
    size = entry.size or 0
    if size > BLOB_LIMIT:
        raise too_large()
    if size > INLINE_LIMIT:
        return out | {"content": "", "encoding": "none"}
    return out | {"content": base64_lines(ctx.git.blob(entry.sha)), "encoding": "base64"}


# -- tags ---------------------------------------------------------------------------------------
def list_tags(call: Call) -> Reply:
    ctx = call.repo()
    body = []
    for name, sha in ctx.git.tags():
        quoted = urllib.parse.quote(name, safe="/")
        body.append(
            {
                "name": name,
                "commit": {"sha": sha, "url": f"{ctx.url}/commits/{sha}"},
                "zipball_url": f"{ctx.url}/zipball/refs/tags/{quoted}",
                "tarball_url": f"{ctx.url}/tarball/refs/tags/{quoted}",
                "node_id": node_id("Ref", f"refs/tags/{name}"),
            }
        )
    return Reply(200, body, paginate=True)
