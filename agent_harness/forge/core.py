"""The forge itself: state on disk, the REST operations over it, and the knobs tests turn.

`Forge` owns a data directory (`forge.sqlite3` plus bare repositories under `git/`), the
tokens it accepts, the primary rate limit, fault rules and request accounting. It knows nothing
of HTTP framing; `ForgeServer` puts it on a socket. Every REST call runs inside one database
transaction, so a call either happens completely or not at all.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_harness.forge import (
    checks,
    comments,
    gitdata,
    issues,
    protection,
    pulls,
    repos,
    reviews,
    search,
    timeline,
)
from agent_harness.forge.accounting import RequestLog
from agent_harness.forge.db import ForgeDB
from agent_harness.forge.errors import ApiError, ForgeDataError, ForgeError
from agent_harness.forge.faults import Faults
from agent_harness.forge.gitrepo import BareRepo, Identity
from agent_harness.forge.ratelimit import RateLimiter
from agent_harness.forge.routes import Call, Reply, RepoContext, Router
from agent_harness.forge.shapes import Renderer, noreply_email

# GitHub seeds every new repository with these labels (name, color, description).
DEFAULT_LABELS = [
    ("bug", "d73a4a", "Something isn't working"),
    ("documentation", "0075ca", "Improvements or additions to documentation"),
    ("duplicate", "cfd3d7", "This issue or pull request already exists"),
    ("enhancement", "a2eeef", "New feature or request"),
    ("good first issue", "7057ff", "Good for newcomers"),
    ("help wanted", "008672", "Extra attention is needed"),
    ("invalid", "e4e669", "This doesn't seem right"),
    ("question", "d876e3", "Further information is requested"),
    ("wontfix", "ffffff", "This will not be worked on"),
]


# GitHub's logins: letters, digits and inner hyphens, at most 39 characters.
LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")


def bare_repo_path(data_dir: Path, owner: str, name: str) -> Path:
    """Where the bare repository of `owner/name` lives under a forge's data directory; a name
    that would lead out of it is refused (ValueError), whatever let it this far."""
    if "/" in owner or "/" in name or owner in ("", ".", "..") or name in ("", ".", ".."):
        raise ValueError(f"no repository can be named {owner!r}/{name!r}")
    return data_dir / "git" / owner.lower() / f"{name.lower()}.git"


def _checked_collaborators(
    collaborators: Mapping[str, str], login: str, token: str, read_only_token: str | None
) -> dict[str, str]:
    """The collaborators (login -> token), refused when one is the forge's own user, named
    twice (logins ignore case) or shares a token with another user."""
    others = dict(collaborators)
    clash = [name for name in others if name.lower() == login.lower()]
    if clash:
        raise ForgeError(f"collaborator {clash[0]} is the forge's own user")
    if len({name.lower() for name in others}) < len(others):
        raise ForgeError("a collaborator is named twice (logins ignore case)")
    tokens = [t for t in (token, read_only_token) if t is not None] + list(others.values())
    if others and len(set(tokens)) < len(tokens):
        raise ForgeError("each collaborator needs a token of its own, used by no other user")
    return others


class Forge:
    """A GitHub-compatible tracker and git host living in `data_dir`.

    `token` may read and write as user `login`; `read_only_token`, if given, may only read (its
    writes get 403, like a token without push access). `collaborators` maps more logins to
    their tokens: users with push access to every repository, such as a second person who may
    approve what `login` opened (GitHub refuses an approval by the pull request's author).
    Other names are organizations, created on first use.
    """

    def __init__(
        self,
        data_dir: Path,
        token: str = "forge-token",
        rate_limit: int = 5000,
        clock: Callable[[], float] = time.time,
        *,
        login: str = "forge-user",
        read_only_token: str | None = None,
        collaborators: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        others = _checked_collaborators(collaborators or {}, login, token, read_only_token)
        self.data_dir = Path(data_dir)
        try:
            (self.data_dir / "git").mkdir(parents=True, exist_ok=True)
            self.db = ForgeDB(self.data_dir / "forge.sqlite3")
        except (OSError, sqlite3.Error) as exc:
            raise ForgeDataError(str(self.data_dir), str(exc)) from exc
        self.token = token
        self.read_only_token = read_only_token
        self.login = login
        self.collaborators = others
        self.clock = clock
        self.sleep = sleep
        self.limiter = RateLimiter(rate_limit, clock)
        self.faults = Faults()
        self.requests = RequestLog()
        # GitHub's most entries in a tree's answer (past it, `truncated`); a test lowers it.
        self.tree_limit = gitdata.MAX_TREE_ENTRIES
        # Callables told (method, template, status, body) of every API response, e.g. to record.
        self.observers: list[Callable[[str, str | None, int, Any], None]] = []
        # Exceptions a handler raised that were answered with 500 (a forge bug, never silent).
        self.server_errors: list[Exception] = []
        self.api_url = "http://127.0.0.1"  # replaced by ForgeServer once it has a port
        # Where `html_url` links point when it is not `api_url`: the lasting address of the
        # pages of a forge that is serving on a passing port (see forge/local.py).
        self.web_url: str | None = None
        self.router = Router()
        modules = (checks, protection, repos, gitdata, issues, comments, pulls, reviews, search)
        for module in (*modules, timeline):  # the router picks the most specific route
            module.register(self.router)
        try:
            # Looked up once: every rendered author is checked against them.
            self.collaborator_ids = self._accounts()
        except ForgeError:
            self.db.close()
            raise

    # -- time, accounts -----------------------------------------------------------------------
    def _accounts(self) -> frozenset[int]:
        """Make the forge's own user and the collaborators; the collaborators' user ids."""
        ids: set[int] = set()
        with self.db.transaction():
            for name in (self.login, *self.collaborators):
                row = self._ensure_user(name, "User")
                if row["type"] != "User":
                    raise ForgeError(f"{name} is an organization on this forge, not a user")
                if name != self.login:
                    ids.add(int(row["id"]))
        return frozenset(ids)

    def now(self) -> str:
        return datetime.fromtimestamp(self.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _ensure_user(self, login: str, kind: str) -> sqlite3.Row:
        row = self.db.one("SELECT * FROM users WHERE login = ?", login)
        if row is None:
            self.db.run(
                "INSERT INTO users (login, type, created_at) VALUES (?, ?, ?)",
                login,
                kind,
                self.now(),
            )
            row = self.db.one("SELECT * FROM users WHERE login = ?", login)
        assert row is not None
        return row

    def account(self, login: str, kind: str) -> sqlite3.Row | None:
        """The account `login` if it is of `kind`; organizations spring into being on demand."""
        if not LOGIN.fullmatch(login):
            # An organization made for any name put its repositories wherever the name led
            # (`/tmp/x`, `../..`) and its name into headers (a CR LF): none such exists here.
            return None
        row = self.db.one("SELECT * FROM users WHERE login = ?", login)
        if row is None and kind == "Organization":
            with self.db.transaction():
                row = self._ensure_user(login, kind)
        return row if row is not None and row["type"] == kind else None

    def authenticate(self, token: str) -> tuple[sqlite3.Row, bool] | None:
        """(user, may_write) for a token, or None when the token is unknown."""
        if token == self.token or (self.read_only_token and token == self.read_only_token):
            user = self.db.one("SELECT * FROM users WHERE login = ?", self.login)
            assert user is not None
            return user, token == self.token
        for login, known in self.collaborators.items():
            if token == known:
                user = self.db.one("SELECT * FROM users WHERE login = ?", login)
                assert user is not None
                return user, True
        return None

    # -- repositories -------------------------------------------------------------------------
    def renderer(self) -> Renderer:
        return Renderer(self.db, self.api_url, self.web_url, self.collaborator_ids)

    def repo_path(self, owner: str, name: str) -> Path:
        return bare_repo_path(self.data_dir, owner, name)

    def clone_url(self, owner: str, name: str) -> str:
        """Where `git clone` / `git push` reach the repository: a file:// URL of the bare repo."""
        return self.repo_path(owner, name).resolve().as_uri()

    def repo_row(self, owner: str, name: str) -> sqlite3.Row | None:
        return self.db.one(
            "SELECT repos.* FROM repos JOIN users ON users.id = repos.owner_id"
            " WHERE users.login = ? AND repos.name = ?",
            owner,
            name,
        )

    def repo_context(self, owner: str, name: str, render: Renderer) -> RepoContext | None:
        row = self.repo_row(owner, name)
        if row is None:
            return None
        owner_row = self.db.one("SELECT * FROM users WHERE id = ?", row["owner_id"])
        assert owner_row is not None
        full = f"{owner_row['login']}/{row['name']}"
        return RepoContext(
            row=row,
            owner=owner_row,
            url=f"{render.api}/repos/{full}",
            html=f"{render.html}/{full}",
            git=BareRepo(self.repo_path(owner_row["login"], row["name"])),
        )

    def render_repo(self, row: sqlite3.Row, render: Renderer) -> dict[str, Any]:
        owner = self.db.one("SELECT login FROM users WHERE id = ?", row["owner_id"])
        assert owner is not None
        return render.repo(row, self.clone_url(owner["login"], row["name"]))

    def create_repo(
        self,
        owner: str,
        name: str,
        auto_init: bool = True,
        default_branch: str = "main",
        *,
        description: str | None = None,
        private: bool = False,
        has_issues: bool = True,
        homepage: str | None = None,
    ) -> dict[str, Any]:
        """Create a repository (and its bare git repo) directly; returns its REST JSON."""
        with self.db.transaction():
            if self.repo_row(owner, name) is not None:
                raise ForgeError(f"repository {owner}/{name} already exists")
            kind = "User" if owner.lower() == self.login.lower() else "Organization"
            owner_row = self.account(owner, kind) or self._ensure_user(owner, kind)
            now = self.now()
            repo_id = self.db.run(
                "INSERT INTO repos (owner_id, name, description, homepage, private, has_issues,"
                " default_branch, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                owner_row["id"],
                name,
                description,
                homepage,
                int(private),
                int(has_issues),
                default_branch,
                now,
                now,
            )
            for label, color, text in DEFAULT_LABELS:
                self.db.run(
                    "INSERT INTO labels (repo_id, name, color, description, is_default)"
                    " VALUES (?, ?, ?, ?, 1)",
                    repo_id,
                    label,
                    color,
                    text,
                )
            user = self.db.one("SELECT * FROM users WHERE login = ?", self.login)
            assert user is not None
            who = Identity(user["login"], noreply_email(user["id"], user["login"]), now)
            BareRepo.create(
                self.repo_path(owner_row["login"], name),
                default_branch,
                auto_init,
                who,
                f"# {name}\n\n{description or ''}\n",
            )
            row = self.db.one("SELECT * FROM repos WHERE id = ?", repo_id)
            assert row is not None
            return self.render_repo(row, self.renderer())

    def set_archived(self, owner: str, name: str, archived: bool = True) -> None:
        """Archive (or unarchive) a repository: writes to it are then refused with 403."""
        row = self.repo_row(owner, name)
        if row is None:
            raise ForgeError(f"no repository {owner}/{name}")
        self.db.run("UPDATE repos SET archived = ? WHERE id = ?", int(archived), row["id"])

    def next_number(self, repo_id: int) -> int:
        row = self.db.one(
            "SELECT COALESCE(MAX(number), 0) + 1 AS n FROM issues WHERE repo_id = ?", repo_id
        )
        assert row is not None
        return int(row["n"])

    # -- requests -----------------------------------------------------------------------------
    def dispatch(self, call: Call, handler: Callable[[Call], Reply]) -> Reply:
        with self.db.transaction():
            return handler(call)

    def perform(self, method: str, path: str, body: Any = None) -> Reply:
        """One REST operation done by the forge's own user in this process, with no HTTP in
        between: what a person does with a button of the web interface. Raises ApiError as
        the API would answer it."""
        found = self.router.match(method, path)
        if found is None:
            raise ApiError(404, "Not Found")
        route, params = found
        user = self.db.one("SELECT * FROM users WHERE login = ?", self.login)
        assert user is not None
        call = Call(
            forge=self,
            method=method,
            path=path,
            params=params,
            query={},
            body=body,
            user=user,
            can_write=True,
            render=self.renderer(),
            token=self.token,
        )
        return self.dispatch(call, route.handler)

    def mark(self) -> int:
        """A mark to count requests from (see `request_counts`)."""
        return self.requests.mark()

    def request_counts(self, since_mark: int | None = None) -> dict[str, int]:
        """Requests served since a mark, keyed like `GET /repos/{owner}/{repo}/issues`."""
        return self.requests.counts(since_mark)

    def close(self) -> None:
        self.db.close()
