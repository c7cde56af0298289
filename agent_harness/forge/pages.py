"""The forge's web pages: read-only HTML for its accounts, repositories, issues, pull requests,
commits and files, and the plain text of a file (`raw`) and of a pull's change (`.diff`,
`.patch`).

Every `html_url`, `blob_url`, `raw_url`, `diff_url` and `patch_url` the API hands out answers
here, so a link a tool prints opens in a browser. Pages are built on the server from the same
rows and bare repositories the API reads. All text is escaped and no page holds a script; the
server's Content-Security-Policy forbids one besides, and plain text is sent as such with
`nosniff`, so a file holding HTML is shown, never rendered. No token is asked for: as with a
public repository on GitHub, anyone who can reach the forge (by default, this machine only)
may read a repository that is not private.
"""

from __future__ import annotations

import html
import re
import shlex
import sqlite3
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_harness.forge.gitrepo import TreeEntry
from agent_harness.forge.pulls import pull_span
from agent_harness.forge.routes import RepoContext

if TYPE_CHECKING:
    from agent_harness.forge.core import Forge

PREFIX = "/_html"
MAX_DIFF_LINES = 4000
RECENT_COMMITS = 30
# The most of a file a page or `raw` shows: what GitHub's API would read at all (100 MB).
MAX_FILE = 100 * 1024 * 1024
# A file shown on a page past this is cut (the whole is at its `raw` address).
SHOWN_FILE = 1024 * 1024
HTML_TYPE = "text/html; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
SECURITY_POLICY = (
    "default-src 'none'; script-src 'none'; style-src 'unsafe-inline'; img-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:980px;padding:0 16px;color:#1f2328}
header{border-bottom:1px solid #d0d7de;padding:12px 0;margin-bottom:16px}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
h1 .n{color:#59636e;font-weight:normal}
.state{display:inline-block;border-radius:2em;padding:2px 10px;color:#fff;font-weight:600}
.open{background:#1a7f37}.closed{background:#cf222e}.merged{background:#8250df}
.box{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;margin:12px 0}
pre{background:#f6f8fa;padding:8px;overflow:auto;white-space:pre-wrap;word-wrap:break-word}
pre.diff{white-space:pre}.add{background:#dafbe1}.del{background:#ffebe9}.hunk{color:#59636e}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:4px 8px;
border-bottom:1px solid #eaeef2;vertical-align:top}code{font-size:90%}.muted{color:#59636e}
""".strip()


@dataclass(frozen=True)
class Page:
    status: int
    html: str
    location: str | None = None  # set on a redirect
    content_type: str = HTML_TYPE
    data: bytes | None = None  # sent instead of `html` when set (a file's bytes, a patch)

    def body(self) -> bytes:
        return self.data if self.data is not None else self.html.encode()


def _text(data: bytes | str, status: int = 200) -> Page:
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    return Page(status, "", content_type=TEXT_TYPE, data=raw)


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def render_page(forge: Forge, path: str) -> Page:
    """The page at `path` (which starts with /_html), or a 404 page."""
    raw = [p for p in path.removeprefix(PREFIX).split("/") if p]
    parts = [urllib.parse.unquote(p) for p in raw]
    with forge.db.transaction():
        if not parts:
            return _index(forge)
        if len(parts) < 2:
            return _account(forge, parts[0])
        ctx = forge.repo_context(parts[0], parts[1], forge.renderer())
        if ctx is None or ctx.row["private"]:
            return _not_found()
        return _in_repository(forge, ctx, raw[2:])


def _in_repository(forge: Forge, ctx: RepoContext, raw: list[str]) -> Page:
    """A repository's page, or one of the pages under it that `raw` (the rest of the path,
    still percent-encoded) names."""
    rest = [urllib.parse.unquote(p) for p in raw]
    if not rest:
        return _repository(forge, ctx)
    kind, first = rest[0], rest[1] if len(rest) > 1 else ""
    if len(rest) == 2 and kind in ("issues", "pull") and first.isdigit():
        return _numbered(forge, ctx, kind, int(first))
    number, _, suffix = first.partition(".")
    if len(rest) == 2 and kind == "pull" and number.isdigit() and suffix in ("diff", "patch"):
        return _pull_text(forge, ctx, int(number), suffix)
    if len(rest) == 2 and kind == "commit":
        return _commit(ctx, first)
    if len(rest) > 2 and kind == "tree":
        path = urllib.parse.unquote("/".join(raw[2:]), errors="surrogateescape")
        return _folder(ctx, first, path)
    if len(rest) > 2 and kind in ("blob", "raw"):
        # A file's name keeps its bytes, UTF-8 or not (the API percent-encodes them so).
        path = urllib.parse.unquote("/".join(raw[2:]), errors="surrogateescape")
        return _file(ctx, kind, first, path)
    return _not_found()


def _layout(title: str, body: str, status: int = 200) -> Page:
    text = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{_STYLE}</style></head><body>"
        f'<header><a href="{PREFIX}/">agent-harness forge</a> '
        '<span class="muted">read-only pages</span></header>'
        f"<main>{body}</main></body></html>\n"
    )
    return Page(status, text)


def _not_found() -> Page:
    return _layout("Not found", "<h1>Not found</h1><p>Nothing is here.</p>", status=404)


def _account(forge: Forge, login: str) -> Page:
    """A user's or an organization's page: its repositories that are not private."""
    owner = forge.db.one("SELECT * FROM users WHERE login = ?", login)
    if owner is None:
        return _not_found()
    rows = forge.db.all(
        "SELECT name, description FROM repos WHERE owner_id = ? AND private = 0 ORDER BY name",
        owner["id"],
    )
    name = owner["login"]
    items = "".join(
        f'<tr><td><a href="{PREFIX}/{e(name)}/{e(r["name"])}">{e(r["name"])}</a></td>'
        f"<td>{e(r['description'] or '')}</td></tr>"
        for r in rows
    )
    body = f"<h1>{e(name)}</h1>" + (
        f"<table>{items}</table>" if items else '<p class="muted">No repository.</p>'
    )
    return _layout(name, body)


def _repo_link(ctx: RepoContext) -> str:
    full = f"{ctx.owner['login']}/{ctx.row['name']}"
    return f'<a href="{PREFIX}/{e(full)}">{e(full)}</a>'


def _index(forge: Forge) -> Page:
    rows = forge.db.all(
        "SELECT users.login AS owner, repos.name AS name, repos.description AS description"
        " FROM repos JOIN users ON users.id = repos.owner_id WHERE repos.private = 0"
        " ORDER BY users.login, repos.name"
    )
    items = "".join(
        f'<tr><td><a href="{PREFIX}/{e(r["owner"])}/{e(r["name"])}">'
        f"{e(r['owner'])}/{e(r['name'])}</a></td><td>{e(r['description'] or '')}</td></tr>"
        for r in rows
    )
    body = "<h1>Repositories</h1>" + (
        f"<table>{items}</table>" if items else "<p>No repository yet.</p>"
    )
    return _layout("Repositories", body)


# -- a repository -------------------------------------------------------------------------------
def _repository(forge: Forge, ctx: RepoContext) -> Page:
    full = f"{ctx.owner['login']}/{ctx.row['name']}"
    clone = forge.clone_url(ctx.owner["login"], ctx.row["name"])
    default = ctx.row["default_branch"]
    branches = ctx.git.branches()
    parts = [f"<h1>{_repo_link(ctx)}</h1>"]
    if ctx.row["description"]:
        parts.append(f"<p>{e(ctx.row['description'])}</p>")
    parts.append(f"<p>Clone: <code>{e(clone)}</code></p>")
    if not branches:
        parts.append(
            '<div class="box"><p>This repository is empty. From your clone, put your '
            f"history in it:</p><pre>git remote add origin {e(clone)}\n"
            "git push -u origin HEAD</pre></div>"
        )
    parts.append(_issue_table(forge, ctx, pulls=True))
    parts.append(_issue_table(forge, ctx, pulls=False))
    if branches:
        rows = "".join(
            f"<tr><td><code>{e(name)}</code></td><td><code>{e(sha[:12])}</code></td></tr>"
            for name, sha in sorted(branches.items())
        )
        parts.append(f"<h2>Branches</h2><table>{rows}</table>")
    if default in branches:
        commits = ctx.git.log(branches[default])[:RECENT_COMMITS]
        rows = "".join(
            f"<tr><td><code>{e(c.sha[:12])}</code></td><td>{e(c.message.splitlines()[0])}"
            f"</td><td>{e(c.author_name)}</td><td>{e(c.author_date)}</td></tr>"
            for c in commits
        )
        parts.append(f"<h2>Commits on <code>{e(default)}</code></h2><table>{rows}</table>")
    return _layout(full, "".join(parts))


def _issue_table(forge: Forge, ctx: RepoContext, pulls: bool) -> str:
    rows = forge.db.all(
        "SELECT issues.*, pulls.merged_at AS merged_at, pulls.head_ref AS head_ref,"
        " pulls.base_ref AS base_ref FROM issues LEFT JOIN pulls ON pulls.issue_id = issues.id"
        " WHERE issues.repo_id = ? AND issues.is_pull = ? ORDER BY issues.number DESC",
        ctx.id,
        int(pulls),
    )
    kind, title = ("pull", "Pull requests") if pulls else ("issues", "Issues")
    if not rows:
        return f'<h2>{title}</h2><p class="muted">None.</p>'
    base = f"{PREFIX}/{e(ctx.owner['login'])}/{e(ctx.row['name'])}/{kind}"
    lines = []
    for row in rows:
        extra = (
            f"<code>{e(row['head_ref'])}</code> → <code>{e(row['base_ref'])}</code>"
            if pulls
            else e(", ".join(label["name"] for label in _labels(forge, row["id"])))
        )
        lines.append(
            f'<tr><td><a href="{base}/{row["number"]}">#{row["number"]}</a></td>'
            f"<td>{e(row['title'])}</td><td>{_state_badge(row, row['merged_at'])}</td>"
            f"<td>{extra}</td></tr>"
        )
    return f"<h2>{title}</h2><table>{''.join(lines)}</table>"


def _labels(forge: Forge, issue_id: int) -> list[sqlite3.Row]:
    return forge.db.all(
        "SELECT labels.name FROM labels JOIN issue_labels ON labels.id = issue_labels.label_id"
        " WHERE issue_labels.issue_id = ? ORDER BY labels.name",
        issue_id,
    )


def _state_badge(issue: sqlite3.Row, merged_at: str | None) -> str:
    if merged_at:
        return '<span class="state merged">Merged</span>'
    if issue["state"] == "open":
        return '<span class="state open">Open</span>'
    return '<span class="state closed">Closed</span>'


# -- an issue or a pull request -----------------------------------------------------------------
def _numbered(forge: Forge, ctx: RepoContext, kind: str, number: int) -> Page:
    issue = forge.db.one("SELECT * FROM issues WHERE repo_id = ? AND number = ?", ctx.id, number)
    if issue is None:
        return _not_found()
    pull = forge.db.one("SELECT * FROM pulls WHERE issue_id = ?", issue["id"])
    if kind == "pull" and pull is None:
        return _not_found()
    if kind == "issues" and pull is not None:  # GitHub sends an issue link of a pull there
        full = f"{ctx.owner['login']}/{ctx.row['name']}"
        return Page(302, "", location=f"{PREFIX}/{full}/pull/{number}")
    head = (
        f'<p>{_repo_link(ctx)}</p><h1>{e(issue["title"])} <span class="n">#{number}</span></h1>'
        f"<p>{_state_badge(issue, pull['merged_at'] if pull else None)} "
        f"opened by {e(_login(forge, issue['user_id']))} on {e(issue['created_at'])}"
        f"{_closing(forge, issue)}</p>"
    )
    labels = ", ".join(row["name"] for row in _labels(forge, issue["id"]))
    meta = f"<p>Labels: {e(labels)}</p>" if labels else ""
    text = _shown(issue["body"])
    body = f"<pre>{e(text)}</pre>" if text else '<p class="muted">No text.</p>'
    middle = _pull_section(forge, ctx, issue, pull) if pull is not None else ""
    page = head + meta + body + middle + _comments(forge, issue)
    return _layout(f"{issue['title']} · #{number}", page)


# An HTML comment in markdown: GitHub renders it as nothing (tools keep markers there).
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _shown(text: str | None) -> str:
    """A body as GitHub's page shows it: its HTML comments hidden, the rest as written."""
    return _HTML_COMMENT.sub("", text or "").strip()


def _login(forge: Forge, user_id: int | None) -> str:
    row = forge.db.one("SELECT login FROM users WHERE id = ?", user_id)
    return str(row["login"]) if row else "someone"


def _closing(forge: Forge, issue: sqlite3.Row) -> str:
    if issue["state"] != "closed" or not issue["closed_at"]:
        return ""
    return f"; closed by {e(_login(forge, issue['closed_by_id']))} on {e(issue['closed_at'])}"


def _comments(forge: Forge, issue: sqlite3.Row) -> str:
    rows = forge.db.all("SELECT * FROM comments WHERE issue_id = ? ORDER BY id", issue["id"])
    if not rows:
        return ""
    items = "".join(
        f'<div class="box"><p class="muted">{e(_login(forge, r["user_id"]))} on '
        f"{e(r['created_at'])}</p><pre>{e(_shown(r['body']))}</pre></div>"
        for r in rows
    )
    return f"<h2>Comments</h2>{items}"


def _pull_section(forge: Forge, ctx: RepoContext, issue: sqlite3.Row, pull: sqlite3.Row) -> str:
    """What a pull request changes: its branches, whether and how it can merge, its commits,
    the files it touches and the diff."""
    git = ctx.git
    fork, head_sha = pull_span(ctx, pull)
    commits = list(reversed(git.log(head_sha, exclude=fork)))
    parts = [_branches_line(forge, ctx, issue, pull, len(commits))]
    if not pull["merged_at"] and issue["state"] == "open":
        base_tip = git.resolve(f"refs/heads/{pull['base_ref']}") or head_sha
        parts.append(_merge_box(forge, ctx, issue, pull, base_tip, head_sha))
    rows = "".join(
        f"<tr><td><code>{e(c.sha[:12])}</code></td><td>{e(c.message.splitlines()[0])}</td>"
        f"<td>{e(c.author_name)}</td></tr>"
        for c in commits
    )
    parts.append(f"<h2>Commits</h2><table>{rows}</table>")
    changes = git.changes(fork, head_sha)
    rows = "".join(
        f"<tr><td><code>{e(f.filename)}</code></td><td>{e(f.status)}</td>"
        f'<td class="add">+{f.additions}</td><td class="del">−{f.deletions}</td></tr>'
        for f in changes
    )
    parts.append(f"<h2>Files changed ({len(changes)})</h2><table>{rows}</table>")
    parts.append(_diff(git.diff(fork, head_sha)))
    return "".join(parts)


def _branches_line(
    forge: Forge, ctx: RepoContext, issue: sqlite3.Row, pull: sqlite3.Row, count: int
) -> str:
    who = e(_login(forge, issue["user_id"]))
    noun = "commit" if count == 1 else "commits"
    span = (
        f"{count} {noun} into <code>{e(pull['base_ref'])}</code> from "
        f"<code>{e(pull['head_ref'])}</code>"
    )
    if pull["merged_at"]:
        sha = e(str(pull["merge_commit_sha"])[:12])
        return (
            f"<p>{e(_login(forge, pull['merged_by_id']))} merged {span} on "
            f"{e(pull['merged_at'])} as <code>{sha}</code>.</p>"
        )
    if issue["state"] == "open":
        return f"<p>{who} wants to merge {span}.</p>"
    return f"<p>{who} proposed to merge {span}; it was closed without merging.</p>"


def _merge_box(
    forge: Forge,
    ctx: RepoContext,
    issue: sqlite3.Row,
    pull: sqlite3.Row,
    base_tip: str,
    head_sha: str,
) -> str:
    full = f"{ctx.owner['login']}/{ctx.row['name']}"
    data = f" --data {shlex.quote(str(forge.data_dir.resolve()))}"
    n = issue["number"]
    if ctx.git.merged_tree(base_tip, head_sha) is None:
        verdict = (
            f"This branch conflicts with <code>{e(pull['base_ref'])}</code>: merge "
            f"<code>{e(pull['base_ref'])}</code> into it first."
        )
    else:
        verdict = f"No conflicts with <code>{e(pull['base_ref'])}</code>."
    return (
        f'<div class="box"><p>{verdict} These pages only read; merge or close it with:</p>'
        f"<pre>agent-harness forge merge {e(full)} {n}{e(data)}\n"
        f"agent-harness forge close {e(full)} {n}{e(data)}</pre></div>"
    )


def _diff(text: str) -> str:
    lines = text.splitlines()
    cut = len(lines) > MAX_DIFF_LINES
    out = []
    for line in lines[:MAX_DIFF_LINES]:
        if line.startswith("+") and not line.startswith("+++"):
            out.append(f'<span class="add">{e(line)}</span>')
        elif line.startswith("-") and not line.startswith("---"):
            out.append(f'<span class="del">{e(line)}</span>')
        elif line.startswith("@@"):
            out.append(f'<span class="hunk">{e(line)}</span>')
        else:
            out.append(e(line))
    note = f'<p class="muted">The diff is cut after {MAX_DIFF_LINES} lines.</p>' if cut else ""
    return f'<h2>Diff</h2><pre class="diff">{chr(10).join(out)}</pre>{note}'


# -- commits, files, a pull's change as text ------------------------------------------------------
def _pull_text(forge: Forge, ctx: RepoContext, number: int, kind: str) -> Page:
    """A pull request's `diff_url` (one unified diff) or `patch_url` (its commits as mail)."""
    pull = forge.db.one(
        "SELECT pulls.* FROM pulls JOIN issues ON issues.id = pulls.issue_id"
        " WHERE issues.repo_id = ? AND issues.number = ?",
        ctx.id,
        number,
    )
    if pull is None:
        return _text("404: Not Found\n", status=404)
    fork, head = pull_span(ctx, pull)
    return _text(ctx.git.diff(fork, head) if kind == "diff" else ctx.git.format_patch(fork, head))


def _commit(ctx: RepoContext, name: str) -> Page:
    """A commit's page: its message, author, parents and what it changed."""
    sha = ctx.git.resolve(name)
    if sha is None:
        return _not_found()
    info = ctx.git.commit(sha)
    base = info.parents[0] if info.parents else _EMPTY_TREE
    full = f"{ctx.owner['login']}/{ctx.row['name']}"
    parents = ", ".join(
        f'<a href="{PREFIX}/{e(full)}/commit/{e(p)}"><code>{e(p[:12])}</code></a>'
        for p in info.parents
    )
    title, _, rest = info.message.partition("\n")
    body = (
        f"<p>{_repo_link(ctx)}</p><h1>{e(title)}</h1>"
        + (f"<pre>{e(rest.strip())}</pre>" if rest.strip() else "")
        + f"<p><code>{e(sha)}</code> by {e(info.author_name)} on {e(info.author_date)}"
        + (f"; parents {parents}" if parents else "")
        + "</p>"
        + _diff(ctx.git.diff(base, sha))
    )
    return _layout(f"{title} · {sha[:12]}", body)


def _file(ctx: RepoContext, kind: str, ref: str, path: str) -> Page:
    """A file at a commit: its bytes as plain text (`raw`), or a page showing it (`blob`)."""
    sha = ctx.git.resolve(ref)
    entry = ctx.git.entry(sha, path) if sha is not None else None
    if sha is None or entry is None or entry.kind != "blob" or (entry.size or 0) > MAX_FILE:
        return _text("404: Not Found\n", status=404) if kind == "raw" else _not_found()
    data = ctx.git.blob(entry.sha)
    if kind == "raw":
        return _text(data)
    return _blob_page(ctx, sha, path, entry, data)


def _folder(ctx: RepoContext, ref: str, path: str) -> Page:
    """A folder at a commit (the `html_url` of a directory's contents): its entries, each a
    link to its own page."""
    sha = ctx.git.resolve(ref)
    entry = ctx.git.entry(sha, path) if sha is not None else None
    listed = ctx.git.tree(entry.sha) if entry is not None and entry.kind == "tree" else None
    if sha is None or listed is None:
        return _not_found()
    full = f"{ctx.owner['login']}/{ctx.row['name']}"
    shown_path = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    rows = []
    for item in sorted(listed, key=lambda x: (x.kind != "tree", x.path)):
        where = urllib.parse.quote(f"{path}/{item.path}", errors="surrogateescape")
        page = "tree" if item.kind == "tree" else "blob"
        name = item.path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        link = f"{PREFIX}/{e(full)}/{page}/{e(sha)}/{e(where)}"
        shown = f'<a href="{link}">{e(name)}</a>' if item.kind != "commit" else e(name)
        rows.append(f"<li>{shown}{'/' if item.kind == 'tree' else ''}</li>")
    body = (
        f"<p>{_repo_link(ctx)} at <code>{e(sha[:12])}</code></p><h1>{e(shown_path)}/</h1>"
        f"<ul>{''.join(rows)}</ul>"
    )
    return _layout(shown_path, body)


def _blob_page(ctx: RepoContext, sha: str, path: str, entry: TreeEntry, data: bytes) -> Page:
    full = f"{ctx.owner['login']}/{ctx.row['name']}"
    shown_path = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    raw = f"{PREFIX}/{e(full)}/raw/{e(sha)}/{e(urllib.parse.quote(path, errors='surrogateescape'))}"
    if b"\0" in data[:8000]:
        content = '<p class="muted">A binary file.</p>'
    else:
        text = data[:SHOWN_FILE].decode("utf-8", "replace")
        cut = '<p class="muted">Cut; the whole file is raw.</p>' if len(data) > SHOWN_FILE else ""
        content = f"<pre>{e(text)}</pre>{cut}"
    body = (
        f"<p>{_repo_link(ctx)} at <code>{e(sha[:12])}</code></p><h1>{e(shown_path)}</h1>"
        f'<p>{entry.size} bytes · <a href="{raw}">raw</a></p>{content}'
    )
    return _layout(shown_path, body)


_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's tree of nothing
