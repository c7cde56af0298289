"""Routing of REST calls to handlers, by method and GitHub's path templates.

Templates are written exactly as GitHub's docs spell them (`/repos/{owner}/{repo}/issues`), so
the same string names an operation in the router, in request accounting and in fault rules.
A handler gets a `Call` (who asked what) and returns a `Reply`; errors are raised as `ApiError`.
"""

from __future__ import annotations

import re
import sqlite3
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_harness.forge.errors import ApiError, not_found
from agent_harness.forge.gitrepo import BareRepo
from agent_harness.forge.shapes import Renderer

if TYPE_CHECKING:
    from agent_harness.forge.core import Forge

# Parameters that may contain slashes (branch names such as `feature/x`, `heads/main`, a file's
# path in the repository).
_GREEDY = {"ref", "basehead", "branch", "path"}


@dataclass
class Reply:
    status: int
    body: Any = None
    paginate: bool = False  # body is a full list; the server slices it into pages
    headers: dict[str, str] = field(default_factory=dict)
    # When set, body holds rows and only the rows of the requested page are rendered.
    render_item: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class RepoContext:
    row: sqlite3.Row
    owner: sqlite3.Row
    url: str
    html: str
    git: BareRepo

    @property
    def id(self) -> int:
        return int(self.row["id"])


@dataclass
class Call:
    forge: Forge
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    user: sqlite3.Row
    can_write: bool
    render: Renderer
    token: str

    def json(self) -> dict[str, Any]:
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise ApiError(400, "Problems parsing JSON")
        return self.body

    def repo(self) -> RepoContext:
        ctx = self.forge.repo_context(self.params["owner"], self.params["repo"], self.render)
        if ctx is None:
            raise not_found()
        return ctx

    def writable_repo(self) -> RepoContext:
        ctx = self.repo()
        self.require_write()
        if ctx.row["archived"]:
            raise ApiError(403, "Repository was archived so is read-only.")
        return ctx

    def require_write(self) -> None:
        if not self.can_write:
            raise ApiError(403, "Resource not accessible by personal access token")

    def int_param(self, name: str) -> int:
        try:
            return int(self.params[name])
        except ValueError as exc:
            raise not_found() from exc


Handler = Callable[[Call], Reply]


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    pattern: re.Pattern[str]
    handler: Handler
    # How much of the template is fixed text: of two routes matching one path, the one with
    # more (`/issues/comments` over `/issues/{issue_number}`) is meant.
    literal: int


def _past_any_id(name: str, value: str) -> bool:
    """A number parameter (`issue_number`, `comment_id`, ...) too big for any stored id: the
    database's integers stop at 2**63 - 1 (a bigger one was an OverflowError, a 500)."""
    numbered = name.endswith(("_number", "_id"))
    if not numbered or not value.isdigit():
        return False  # a route's own pattern says what a number may look like
    return len(value) > 19 or int(value) > 2**63 - 1


class Router:
    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, method: str, template: str, handler: Handler) -> None:
        def group(match: re.Match[str]) -> str:
            name = match.group(1)
            return f"(?P<{name}>.+)" if name in _GREEDY else f"(?P<{name}>[^/]+)"

        regex = re.sub(
            r"\{(\w+)\}", group, re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
        )
        # A path in the repository may be left out (`/contents/` is the root directory).
        regex = regex.replace("/(?P<path>.+)", "(?:/(?P<path>.+))?")
        literal = len(re.sub(r"\{\w+\}", "", template))
        self.routes.append(Route(method, template, re.compile(f"^{regex}$"), handler, literal))

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """The route for a request: of several that match, the one naming the most of the
        path as fixed text, whatever order the modules registered them in."""
        found = self._best(path, method)
        if found is None:
            return None
        route, matched = found
        params = {
            # A path in the repository keeps the bytes of a name that is not UTF-8.
            k: urllib.parse.unquote(v, errors="surrogateescape" if k == "path" else "replace")
            for k, v in matched.groupdict(default="").items()
        }
        if any(_past_any_id(k, v) for k, v in params.items()):
            return None  # no issue, pull or comment has such a number: a 404
        return route, params

    def _best(self, path: str, method: str | None) -> tuple[Route, re.Match[str]] | None:
        best: tuple[Route, re.Match[str]] | None = None
        for route in self.routes:
            if method is not None and route.method != method:
                continue
            found = route.pattern.match(path)
            if found and (best is None or route.literal > best[0].literal):
                best = (route, found)
        return best

    def template_for(self, path: str) -> str | None:
        """The template of any route whose path matches, whatever the method."""
        found = self._best(path, None)
        return found[0].template if found else None
