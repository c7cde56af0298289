"""The role routes of a running run: which route serves each role now, and how that changes.

A run's model clients (the reviewer's, the direct-API executor's) are registered here. A role's
route changes when a person edits `[roles]` in the config file the run started with (the run
looks every half second) or calls `set_route` (the API's PUT /api/roles). A client swaps its
whole map at once and each call reads the map once, so the next call takes the new route and a
call in flight finishes on the old one. Every change is one `roles_changed` event.

`[roles]` entries are `role = "vendor:model"` or a table (`vendor`, `model`, optionally
`endpoint`, `api_key_env`, `api_format`, `classifier`). At start the flags win; a change to
the file while the run runs wins over them for the roles it changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import ConfigError, HarnessError, read_toml_file
from agent_harness.models.routes import (
    Route,
    UnknownRole,
    describe_route,
    route_from_spec,
    route_from_table,
)
from agent_harness.store.events import RolesChanged

if TYPE_CHECKING:
    from agent_harness.models.client import ModelClient

RoleEntry = str | Mapping[str, Any]


def route_of(role: str, entry: RoleEntry, env: Mapping[str, str], where: str) -> Route:
    """The route a `[roles]` entry (or the API's body) names."""
    if isinstance(entry, str):
        try:
            return route_from_spec(entry, env)
        except ConfigError as exc:
            raise ConfigError(f"{where}: roles.{role}: {exc.message}") from None
    if isinstance(entry, Mapping):
        return route_from_table(entry, env, f"{where}: roles.{role}")
    raise ConfigError(f'{where}: roles.{role} must be "vendor:model" or a table')


def read_roles(path: Path) -> dict[str, RoleEntry]:
    """The `[roles]` table of a config file (`[tool.agent-harness.roles]` in pyproject.toml)."""
    data = read_toml_file(path, ConfigError)
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("agent-harness", {})
    roles = data.get("roles", {})
    if not isinstance(roles, dict):
        raise ConfigError(f"{path}: roles must be a table")
    return dict(roles)


class RoleBook:
    """The routes every model client of a run uses, by role; one lock, one change at a time."""

    def __init__(
        self,
        env: Mapping[str, str],
        announce: Callable[[RolesChanged], None] = lambda _c: None,
        check: Callable[[Mapping[str, Route]], None] = lambda _routes: None,
    ) -> None:
        """`check` sees every role's route as a change would leave them, and raises a
        `HarnessError` to refuse it (the run's rule: reviewer and implementer of two vendors)."""
        self._env = env
        self._announce = announce
        self._check = check
        self._clients: list[ModelClient] = []
        self._lock = threading.Lock()
        self._file: Path | None = None
        self._seen: bytes | None = None  # the file as last read
        self._entries: dict[str, RoleEntry] = {}
        self.problem: str | None = None  # why the file's last change was not taken

    def add_client(self, client: ModelClient) -> None:
        with self._lock:
            self._clients.append(client)

    def routes(self) -> dict[str, Route]:
        """Every role a client of this run serves, and its route now."""
        with self._lock:
            return {role: r for c in self._clients for role, r in c.routes.items()}

    def set_routes(self, changes: Mapping[str, Route], source: str) -> dict[str, str]:
        """Give these roles these routes; returns (and announces) the roles that changed."""
        with self._lock:
            served = {role for client in self._clients for role in client.routes}
            for role in changes:
                if role not in served:
                    raise UnknownRole(role, sorted(served))
            now = {role: r for c in self._clients for role, r in c.routes.items()}
            self._check({**now, **changes})
            changed: dict[str, str] = {}
            for client in self._clients:
                mine = {r: changes[r] for r in client.routes if r in changes}
                if any(client.routes[r] != route for r, route in mine.items()):
                    client.reload({**client.routes, **mine})
                    changed.update({r: describe_route(route) for r, route in mine.items()})
        if changed:
            self._announce(RolesChanged(roles=changed, source=source))
        return changed

    def set_route(self, role: str, entry: RoleEntry, source: str = "api") -> dict[str, str]:
        """Route `role` to `entry` ("vendor:model" or a table) from the next call on."""
        return self.set_routes({role: route_of(role, entry, self._env, source)}, source)

    # -- the config file -----------------------------------------------------------------------
    def watch(self, path: Path | None) -> None:
        """Follow `[roles]` in this file from now on; what it says now is the baseline."""
        self._file = path
        if path is not None:
            self._seen = _contents(path)
            self._entries = read_roles(path)

    def refresh(self) -> dict[str, str]:
        """Take the roles whose entry changed in the file since the last look. A file that
        does not read (saved half-way, a typo), or a change the run refuses, changes nothing
        and says why in `problem`."""
        path = self._file
        if path is None or _contents(path) == self._seen:
            return {}
        self._seen = _contents(path)
        try:
            entries = read_roles(path)
            served = {role for role in self.routes()}
            wanted = {
                role: route_of(role, entry, self._env, str(path))
                for role, entry in entries.items()
                if entry != self._entries.get(role) and role in served
            }
            changed = self.set_routes(wanted, str(path)) if wanted else {}
        except HarnessError as exc:  # a bad entry, or a change the run's rules refuse
            self.problem = exc.message
            return {}
        self.problem = None
        self._entries = entries
        return changed


def _contents(path: Path) -> bytes | None:
    """The file's bytes (a config file is small; a time stamp can miss a quick rewrite)."""
    try:
        return path.read_bytes()
    except OSError:
        return None
