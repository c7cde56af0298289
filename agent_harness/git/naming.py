"""The names the harness gives an item's branches and worktrees, and reads back from them.

An item's branch is `agent-harness/[<namespace>/]<id>[.rN]-<slug of its title>`: the namespace
keeps a second plan's T1 apart from the first's, `.rN` is its Nth retry (a new branch from the
current default branch), and the slug only helps a person read it: the prefix is what names
the item.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

BRANCH_PREFIX = "agent-harness/"


def slugify(title: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return (slug[:limit].rstrip("-")) or "item"


def clean_name(text: str) -> str:
    """`text` with every run of characters a ref or a folder name should not hold as a dash."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text)


def name_part(text: str, limit: int) -> str:
    """`text` as a part of a session's or a folder's name: itself when it is plain and at most
    `limit` long, else its first `limit` plain characters and a hash of the whole. Two texts
    never share a part: plans keyed `user-authentication-flow` and `user-authentication-admin`,
    or items `T1.2` and `T1-2`, would share one if they were only cut or cleaned."""
    plain = clean_name(text)
    if plain == text and len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:6]
    return f"{plain[:limit]}-{digest}"


def session_name(repo: str, namespace: str, item_id: str, state_dir: str) -> str:
    """The name of an item's agent session: stable across restarts (so a live agent is found
    again), distinct per plan and item (each part cut or cleaned is marked with its hash) and
    per state directory (so two clones of one repository on a machine never share one)."""
    where = hashlib.sha256(os.fsencode(state_dir)).hexdigest()[:6]
    short_repo = clean_name(repo.split("/")[-1][:30])  # short enough that the hash survives
    space = f"{name_part(namespace, 20)}-" if namespace else ""
    return f"ah-{short_repo}-{space}{name_part(item_id, 40)}-{where}"


def item_dir_name(item_id: str, namespace: str = "") -> str:
    """The folder of an item's logs and saved steps under the state directory: its id, and for
    a plan other than the main one its namespace before it (`<key>--<id>`), each marked with a
    hash when cut or cleaned. (Worktrees and branches are named from the cleaned key alone, as
    they always were: renaming a branch would lose its open pull request.)"""
    if not namespace:
        return name_part(item_id, 100)
    return f"{name_part(namespace, 60)}--{name_part(item_id, 100)}"


def generation_suffix(generation: int) -> str:
    """`.rN` for the Nth retry of an item, nothing for its first life. A dot cannot occur in an
    id or a slug, so one generation's names never match another's."""
    return f".r{generation}" if generation else ""


def branch_name(item_id: str, title: str, namespace: str = "", generation: int = 0) -> str:
    """`agent-harness/<id>-<slug>`; with a namespace (a second plan in the same repository),
    `agent-harness/<namespace>/<id>-<slug>`, so two plans' T1 never share a branch; a retried
    item starts over on `agent-harness/<id>.rN-<slug>`, from the current default branch."""
    return f"{branch_prefix(item_id, namespace, generation)}{slugify(title)}"


def branch_prefix(item_id: str, namespace: str = "", generation: int = 0) -> str:
    """What every branch of the item (in this plan and generation) starts with, whatever its
    title: `agent-harness/[<namespace>/]<id>[.rN]-`."""
    space = f"{clean_name(namespace)}/" if namespace else ""
    return f"{BRANCH_PREFIX}{space}{clean_name(item_id)}{generation_suffix(generation)}-"


def of_a_longer_id(name: str, item_id: str, namespace: str, others: Iterable[str]) -> bool:
    """Whether branch `name`, which starts with `item_id`'s prefix, is another item's whose id
    goes on from it with a dash (`bucket-store` after `bucket`, as Cursor's todos are named):
    its `bucket-store-…` branches start with `bucket-` too."""
    stem = clean_name(item_id) + "-"
    for other in others:
        if not clean_name(other).startswith(stem):
            continue
        base = branch_prefix(other, namespace)[:-1]  # any generation's: `<id>-`, `<id>.rN-`
        if name.startswith(base) and re.match(r"(?:\.r\d+)?-", name[len(base) :]):
            return True
    return False


# After `<id>-` in a branch name: the rest of a longer id rather than a title's slug (slugs are
# lower case; a slug that starts with a number and a dash is taken for an id too).
LONGER_ID = re.compile(r"^(?:[A-Z_]|\d+(?:[-_.]|$))")


def find_branch(
    refs: Mapping[str, str],
    remote: str,
    item_id: str,
    namespace: str,
    generation: int,
    wanted: tuple[str | None, ...],
    others: Callable[[], Iterable[str]],
) -> str | None:
    """The branch the item already has, among `refs` (full ref name -> sha): the first of
    `wanted` (the one its history names, the one its title names, the one its own worktree has
    checked out) that is there and is the item's; else one that starts with its prefix (the
    title was edited since). Such a name that goes on like a longer id (`T1-2-` or `T1-A2`
    after `T1-`, `3-1-` after `3-`, the spelling of `3.1`) is taken for another item's, and so
    is one of an id of `others` (the plan's other ids, asked only then) that goes on from it."""
    prefix = branch_prefix(item_id, namespace, generation)
    remote_prefix = f"refs/remotes/{remote}/"
    for name in wanted:
        there = f"refs/heads/{name}" in refs or f"{remote_prefix}{name}" in refs
        if name and name.startswith(prefix) and there:
            return name

    def under(space: str) -> list[str]:
        """The item's branches among the refs under `space`, by name."""
        names = (ref.removeprefix(space) for ref in refs if ref.startswith(space + prefix))
        found = [n for n in names if not LONGER_ID.match(n.removeprefix(prefix))]
        if not found:
            return []
        ids = list(others())
        return sorted(n for n in found if not of_a_longer_id(n, item_id, namespace, ids))

    found = under("refs/heads/") or under(remote_prefix)
    return found[0] if found else None


def plan_namespace(plan_key: str) -> str:
    """The namespace of a plan's branches and worktrees: none for the repository's main plan
    (key PLAN), its key for any other."""
    return "" if plan_key == "PLAN" else plan_key


def worktree_dir_name(item_id: str, namespace: str = "", generation: int = 0) -> str:
    base = f"{clean_name(namespace)}--{clean_name(item_id)}" if namespace else clean_name(item_id)
    return base + generation_suffix(generation)


def item_of_dir_name(name: str) -> str:
    """The worktree directory's name without its retry generation (`T1.r2` -> `T1`)."""
    return re.sub(r"\.r\d+$", "", name)


def repo_named(url: str) -> str:
    """The `owner/name` (lower case) a git URL ends in: `https://github.com/O/N.git`,
    `git@host:O/N.git`, `ssh://git@host/O/N`, a local path `/srv/forge/git/O/N.git`."""
    path = url.strip()
    if "://" in path:
        path = path.split("://", 1)[1].partition("/")[2]
    elif _names_host(path) and not re.match(r"^[A-Za-z]:[\\/]", path):
        path = path.split(":", 1)[1]  # scp-like `git@host:O/N.git`
    parts = [part for part in path.split("?")[0].rstrip("/").split("/") if part]
    if parts:
        parts[-1] = parts[-1].removesuffix(".git")
    return "/".join(parts[-2:]).lower()


def local_path(url: str) -> Path | None:
    """The local path a git URL names (`file:///srv/app.git`, `/srv/app.git`); None for a
    URL of another machine (https, ssh, `host:path`) or a relative path."""
    url = url.strip()
    if url.lower().startswith("file://"):
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(url)
        return Path(unquote(parts.path)) if parts.netloc in ("", "localhost") else None
    return Path(url) if "://" not in url and os.path.isabs(url) else None


def relative_path_url(url: str) -> bool:
    """A remote URL that is a relative path (`../forge/app.git`), not a URL nor `host:path`."""
    return "://" not in url and not os.path.isabs(url) and not _names_host(url)


def _names_host(url: str) -> bool:
    """git's scp-like form, `git@host:o/r.git` or `host:o/r`: a ':' before any '/'."""
    return ":" in url.split("/", 1)[0]
