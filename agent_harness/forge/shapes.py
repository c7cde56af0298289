"""JSON bodies shaped like GitHub's REST API, built from database rows and git objects.

Every renderer emits the fields GitHub's OpenAPI description marks as required for that
schema (checked by the `npm`-marked schema test), with URLs rooted at the forge's own address
so that clients following `url` fields and `Link` headers come back here.
"""

from __future__ import annotations

import base64
import sqlite3
import urllib.parse
from datetime import UTC
from typing import Any

from agent_harness.forge.db import ForgeDB
from agent_harness.forge.gitrepo import CommitInfo, FileChange


def node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"{kind}:{ident}".encode()).decode().rstrip("=")


def noreply_email(user_id: int, login: str) -> str:
    return f"{user_id}+{login}@users.noreply.github.com"


class Renderer:
    """Renders rows for one forge address (`api`), e.g. http://127.0.0.1:8080.

    Web pages are linked under `web` when given: the address the forge's pages are served on
    for good, which outlives a forge started for one command on a passing port.
    """

    def __init__(
        self,
        db: ForgeDB,
        api: str,
        web: str | None = None,
        collaborators: frozenset[int] = frozenset(),
    ) -> None:
        self.db = db
        self.api = api.rstrip("/")
        self.html = (web or api).rstrip("/") + "/_html"
        self.collaborators = collaborators  # ids of users with push access who own nothing

    # -- users --------------------------------------------------------------------------
    def user(self, row: sqlite3.Row | None) -> dict[str, Any] | None:
        if row is None:
            return None
        login = row["login"]
        url = f"{self.api}/users/{login}"
        return {
            "login": login,
            "id": row["id"],
            "node_id": node_id("User", row["id"]),
            "avatar_url": f"{self.html}/avatars/{login}",
            "gravatar_id": "",
            "url": url,
            "html_url": f"{self.html}/{login}",
            "followers_url": f"{url}/followers",
            "following_url": f"{url}/following{{/other_user}}",
            "gists_url": f"{url}/gists{{/gist_id}}",
            "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{url}/subscriptions",
            "organizations_url": f"{url}/orgs",
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events{{/privacy}}",
            "received_events_url": f"{url}/received_events",
            "type": row["type"],
            "site_admin": False,
        }

    def association(self, user_id: int) -> str:
        """The author's relation to the repository, as GitHub labels it: the forge's own user
        is treated as the owner everywhere, a collaborator as a collaborator."""
        return "COLLABORATOR" if user_id in self.collaborators else "OWNER"

    def user_by_id(self, user_id: int | None) -> dict[str, Any] | None:
        if user_id is None:
            return None
        return self.user(self.db.one("SELECT * FROM users WHERE id = ?", user_id))

    def full_user(self, row: sqlite3.Row, private: bool) -> dict[str, Any]:
        out = self.user(row)
        assert out is not None
        repos = self.db.one("SELECT COUNT(*) AS n FROM repos WHERE owner_id = ?", row["id"])
        out |= {
            "name": row["login"],
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "public_repos": repos["n"] if repos else 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": row["created_at"],
            "updated_at": row["created_at"],
        }
        if private:
            out |= {
                "collaborators": 0,
                "disk_usage": 0,
                "owned_private_repos": 0,
                "private_gists": 0,
                "total_private_repos": 0,
                "two_factor_authentication": False,
            }
        return out

    def organization(self, row: sqlite3.Row) -> dict[str, Any]:
        login = row["login"]
        url = f"{self.api}/orgs/{login}"
        repos = self.db.one("SELECT COUNT(*) AS n FROM repos WHERE owner_id = ?", row["id"])
        return {
            "login": login,
            "id": row["id"],
            "node_id": node_id("Organization", row["id"]),
            "url": url,
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events",
            "hooks_url": f"{url}/hooks",
            "issues_url": f"{url}/issues",
            "members_url": f"{url}/members{{/member}}",
            "public_members_url": f"{url}/public_members{{/member}}",
            "avatar_url": f"{self.html}/avatars/{login}",
            "description": None,
            "html_url": f"{self.html}/{login}",
            "has_organization_projects": False,
            "has_repository_projects": False,
            "public_repos": repos["n"] if repos else 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "type": "Organization",
            "created_at": row["created_at"],
            "updated_at": row["created_at"],
            "archived_at": None,
        }

    # -- repositories -------------------------------------------------------------------
    def repo(self, row: sqlite3.Row, clone_url: str) -> dict[str, Any]:
        owner = self.db.one("SELECT * FROM users WHERE id = ?", row["owner_id"])
        assert owner is not None
        full = f"{owner['login']}/{row['name']}"
        url = f"{self.api}/repos/{full}"
        open_issues = self.db.one(
            "SELECT COUNT(*) AS n FROM issues WHERE repo_id = ? AND state = 'open'", row["id"]
        )
        n_open = open_issues["n"] if open_issues else 0
        return {
            "id": row["id"],
            "node_id": node_id("Repository", row["id"]),
            "name": row["name"],
            "full_name": full,
            "owner": self.user(owner),
            "private": bool(row["private"]),
            "visibility": "private" if row["private"] else "public",
            "html_url": f"{self.html}/{full}",
            "svn_url": f"{self.html}/{full}",
            "description": row["description"],
            "homepage": row["homepage"],
            "url": url,
            **{name: url + path for name, path in _REPO_API_PATHS.items()},
            "git_url": clone_url,
            "ssh_url": clone_url,
            "clone_url": clone_url,
            "default_branch": row["default_branch"],
            "open_issues_count": n_open,
            "open_issues": n_open,
            "has_issues": bool(row["has_issues"]),
            "archived": bool(row["archived"]),
            "pushed_at": row["updated_at"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            **_REPO_CONSTANTS,
            "topics": [],
            # The forge has no access control beyond a token's write bit: every caller is admin.
            "permissions": dict.fromkeys(("admin", "maintain", "push", "triage", "pull"), True),
        }

    # -- labels, milestones -------------------------------------------------------------
    def label(self, row: sqlite3.Row, repo_url: str) -> dict[str, Any]:
        return {
            "id": row["id"],
            "node_id": node_id("Label", row["id"]),
            "url": f"{repo_url}/labels/{urllib.parse.quote(row['name'], safe='')}",
            "name": row["name"],
            "color": row["color"],
            "default": bool(row["is_default"]),
            "description": row["description"],
        }

    def milestone(self, row: sqlite3.Row | None, repo_url: str, html: str) -> dict[str, Any] | None:
        if row is None:
            return None
        counts = {
            r["state"]: r["n"]
            for r in self.db.all(
                "SELECT state, COUNT(*) AS n FROM issues WHERE milestone_id = ? GROUP BY state",
                row["id"],
            )
        }
        url = f"{repo_url}/milestones/{row['number']}"
        return {
            "url": url,
            "html_url": f"{html}/milestone/{row['number']}",
            "labels_url": f"{url}/labels",
            "id": row["id"],
            "node_id": node_id("Milestone", row["id"]),
            "number": row["number"],
            "state": row["state"],
            "title": row["title"],
            "description": row["description"],
            "creator": self.user_by_id(row["creator_id"]),
            "open_issues": counts.get("open", 0),
            "closed_issues": counts.get("closed", 0),
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "closed_at": row["closed_at"],
            "due_on": row["due_on"],
        }

    # -- issues, comments ---------------------------------------------------------------
    def issue_labels(self, issue_id: int, repo_url: str) -> list[dict[str, Any]]:
        rows = self.db.all(
            "SELECT labels.* FROM labels JOIN issue_labels ON labels.id = issue_labels.label_id"
            " WHERE issue_labels.issue_id = ? ORDER BY labels.name",
            issue_id,
        )
        return [self.label(r, repo_url) for r in rows]

    def issue(
        self, row: sqlite3.Row, repo_url: str, html: str, pull: sqlite3.Row | None
    ) -> dict[str, Any]:
        n = row["number"]
        url = f"{repo_url}/issues/{n}"
        comments = self.db.one("SELECT COUNT(*) AS n FROM comments WHERE issue_id = ?", row["id"])
        milestone = (
            self.db.one("SELECT * FROM milestones WHERE id = ?", row["milestone_id"])
            if row["milestone_id"] is not None
            else None
        )
        out: dict[str, Any] = {
            "id": row["id"],
            "node_id": node_id("Issue", row["id"]),
            "url": url,
            "repository_url": repo_url,
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": f"{html}/{'pull' if row['is_pull'] else 'issues'}/{n}",
            "number": n,
            "state": row["state"],
            "state_reason": row["state_reason"],
            "title": row["title"],
            "body": row["body"],
            "user": self.user_by_id(row["user_id"]),
            "labels": self.issue_labels(row["id"], repo_url),
            "assignee": None,
            "assignees": [],
            "milestone": self.milestone(milestone, repo_url, html),
            "locked": bool(row["locked"]),
            "active_lock_reason": None,
            "comments": comments["n"] if comments else 0,
            "closed_at": row["closed_at"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "closed_by": self.user_by_id(row["closed_by_id"]),
            "author_association": self.association(row["user_id"]),
            "timeline_url": f"{url}/timeline",
            "reactions": _no_reactions(f"{url}/reactions"),
            # Nothing on the forge acts as a GitHub App: every write is a user's own.
            "performed_via_github_app": None,
        }
        if pull is not None:
            out["draft"] = bool(pull["draft"])
            out["pull_request"] = {
                "url": f"{repo_url}/pulls/{n}",
                "html_url": f"{html}/pull/{n}",
                "diff_url": f"{html}/pull/{n}.diff",
                "patch_url": f"{html}/pull/{n}.patch",
                "merged_at": pull["merged_at"],
            }
        return out

    def comment(self, row: sqlite3.Row, repo_url: str, html: str, number: int) -> dict[str, Any]:
        return {
            "id": row["id"],
            "node_id": node_id("IssueComment", row["id"]),
            "url": f"{repo_url}/issues/comments/{row['id']}",
            "html_url": f"{html}/issues/{number}#issuecomment-{row['id']}",
            "issue_url": f"{repo_url}/issues/{number}",
            "body": row["body"],
            "user": self.user_by_id(row["user_id"]),
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "author_association": self.association(row["user_id"]),
        }

    # -- git ----------------------------------------------------------------------------
    def commit(
        self,
        info: CommitInfo,
        repo_url: str,
        html: str,
        files: list[FileChange] | None = None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sha": info.sha,
            "node_id": node_id("Commit", info.sha),
            "url": f"{repo_url}/commits/{info.sha}",
            "html_url": f"{html}/commit/{info.sha}",
            "comments_url": f"{repo_url}/commits/{info.sha}/comments",
            "commit": {
                "url": f"{repo_url}/git/commits/{info.sha}",
                **_signatures(info),
                "message": info.message,
                "tree": {"sha": info.tree, "url": f"{repo_url}/git/trees/{info.tree}"},
                "comment_count": 0,
                "verification": dict(_UNSIGNED),
            },
            "author": self._user_for_email(info.author_email),
            "committer": self._user_for_email(info.committer_email),
            "parents": [
                {"sha": p, "url": f"{repo_url}/commits/{p}", "html_url": f"{html}/commit/{p}"}
                for p in info.parents
            ],
        }
        if files is not None:
            out["stats"] = {
                "additions": sum(f.additions for f in files),
                "deletions": sum(f.deletions for f in files),
                "total": sum(f.additions + f.deletions for f in files),
            }
            out["files"] = [self.file(f, repo_url, html, info.sha) for f in files]
        return out

    def _user_for_email(self, email: str) -> dict[str, Any] | None:
        # GitHub links a commit to an account by email; the forge knows only noreply addresses.
        local = email.split("@", 1)[0]
        if email.endswith("@users.noreply.github.com") and "+" in local:
            return self.user(
                self.db.one("SELECT * FROM users WHERE login = ?", local.split("+")[1])
            )
        return None

    def file(self, change: FileChange, repo_url: str, html: str, sha: str) -> dict[str, Any]:
        path = url_path(change.filename)  # a `#`, `?` or space in a name must not end the URL
        return {
            "sha": None,
            "filename": change.filename,
            "status": change.status,
            "additions": change.additions,
            "deletions": change.deletions,
            "changes": change.additions + change.deletions,
            "blob_url": f"{html}/blob/{sha}/{path}",
            "raw_url": f"{html}/raw/{sha}/{path}",
            "contents_url": f"{repo_url}/contents/{path}?ref={sha}",
        }

    def git_commit(self, info: CommitInfo, repo_url: str, html: str) -> dict[str, Any]:
        """A commit as the git database holds it (GitHub's "Get a commit object")."""
        url = f"{repo_url}/git/commits/{info.sha}"
        return {
            "sha": info.sha,
            "node_id": node_id("Commit", info.sha),
            "url": url,
            "html_url": f"{html}/commit/{info.sha}",
            **_signatures(info),
            "tree": {"sha": info.tree, "url": f"{repo_url}/git/trees/{info.tree}"},
            "message": info.message,
            "parents": [
                {
                    "sha": p,
                    "url": f"{repo_url}/git/commits/{p}",
                    "html_url": f"{html}/commit/{p}",
                }
                for p in info.parents
            ],
            "verification": dict(_UNSIGNED),
        }

    def git_ref(self, ref: str, sha: str, repo_url: str) -> dict[str, Any]:
        return {
            "ref": ref,
            "node_id": node_id("Ref", ref),
            "url": f"{repo_url}/git/{ref}",
            "object": {"type": "commit", "sha": sha, "url": f"{repo_url}/git/commits/{sha}"},
        }


def url_path(path: str) -> str:
    """A path in the repository as it goes into a URL: each part percent-encoded, a name that is
    not UTF-8 by its own bytes."""
    return urllib.parse.quote(path, safe="/", errors="surrogateescape")


# What the forge says of every commit's signature: it checks none.
_UNSIGNED: dict[str, Any] = {
    "verified": False,
    "reason": "unsigned",
    "signature": None,
    "payload": None,
    "verified_at": None,
}


def _no_reactions(url: str) -> dict[str, Any]:
    """GitHub's reaction summary for something nobody has reacted to (the forge keeps none)."""
    kinds = ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")
    return {"url": url, "total_count": 0, **dict.fromkeys(kinds, 0)}


def _signatures(info: CommitInfo) -> dict[str, Any]:
    """A commit's author and committer as git's commit objects name them."""
    return {
        "author": {
            "name": info.author_name,
            "email": info.author_email,
            "date": _utc(info.author_date),
        },
        "committer": {
            "name": info.committer_name,
            "email": info.committer_email,
            "date": _utc(info.committer_date),
        },
    }


def _utc(git_date: str) -> str:
    """Git's strict ISO date (with offset) as GitHub's `Z` timestamp."""
    from datetime import datetime

    moment = datetime.fromisoformat(git_date).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# The repository's API links, as paths under its own url (GitHub's URI templates kept as-is).
_REPO_API_PATHS = {
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}

# What no forge repository varies: it has no forks, stars, wiki, pages or licence, and it
# allows every merge method.
_REPO_CONSTANTS: dict[str, Any] = {
    "fork": False,
    "mirror_url": None,
    "language": None,
    "license": None,
    "forks": 0,
    "forks_count": 0,
    "stargazers_count": 0,
    "watchers_count": 0,
    "watchers": 0,
    "size": 0,
    "network_count": 0,
    "subscribers_count": 0,
    "is_template": False,
    "has_projects": False,
    "has_wiki": False,
    "has_pages": False,
    "has_downloads": False,
    "has_discussions": False,
    "disabled": False,
    "allow_merge_commit": True,
    "allow_squash_merge": True,
    "allow_rebase_merge": True,
    "delete_branch_on_merge": False,
}
