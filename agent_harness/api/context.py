"""What every route is handed: the database, the mode, and the worker pools when supervising."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from fastapi import Request

from agent_harness.errors import HarnessError
from agent_harness.queue.projects import ProjectRecord, ProjectSpec
from agent_harness.store.database import Store

if TYPE_CHECKING:
    from agent_harness.inception.planner import Planner
    from agent_harness.tracker.sync import SyncReport


class Pools(Protocol):
    """The worker pools of a supervising server, one per running project."""

    def check_spec(self, spec: ProjectSpec) -> None: ...

    def start(self, project: str) -> ProjectRecord: ...

    def stop(self, project: str) -> ProjectRecord: ...

    def running(self) -> list[str]: ...

    def error(self, project: str) -> str | None: ...

    def roles(self, project: str) -> tuple[dict[str, str], bool]: ...

    def set_role(self, project: str, role: str, route: str) -> tuple[dict[str, str], bool]: ...

    def close(self) -> None: ...

    def sync(self, project: str, *, dry_run: bool) -> SyncReport: ...


class NoAuditDatabase(HarnessError):
    """Nothing was ever recorded in the audit: its database does not exist yet."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"no audit database at {where}: POST /api/audit/reconcile (or `agent-harness "
            "ingest`) records the work log into it"
        )


class AuditNotRecorded(HarnessError):
    """The audit database could not be written; the drop was counted (`audit health`)."""


class Busy(HarnessError):
    """As many plans are being read as the server reads at once; try again shortly."""

    retry_after_s = 1

    def __init__(self) -> None:
        super().__init__(
            f"the server is reading {PARSES_AT_ONCE} plans already; "
            f"try again in {self.retry_after_s} s"
        )


# Plans read at once (`POST /api/plan/parse`): reading one is Python's CPU work, a plan of
# `[[[…` costs seconds a megabyte, and the interpreter runs one thread at a time, so more at once
# only slow every other request down. A request that waits longer than PARSE_WAIT_S for its
# turn is answered 503 with a Retry-After.
PARSES_AT_ONCE = 2
PARSE_WAIT_S = 1.0


class MonitoringOnly(HarnessError):
    """This server only watches: it runs no worker pool and writes nothing."""

    def __init__(self, what: str) -> None:
        super().__init__(f"monitoring only: no worker pool ({what} needs `serve --supervise`)")


@dataclass
class ApiContext:
    store: Store
    mode: Literal["monitoring", "supervised"]
    pools: Pools | None = None
    work_root: Path | None = None
    audit_url: str | None = None
    settings: Any = None  # agent_harness.config.Settings; the defaults when None
    # Where the planner's keys and base URLs are read (OPENAI_API_KEY, OPENAI_BASE_URL, ...):
    # the process's sealed environment when None.
    env: Mapping[str, str] | None = None
    parse_wait_s: float = PARSE_WAIT_S
    parses: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(PARSES_AT_ONCE)
    )

    @contextmanager
    def parsing(self) -> Iterator[None]:
        """One of the PARSES_AT_ONCE turns at reading a plan; Busy when none comes in time."""
        if not self.parses.acquire(timeout=self.parse_wait_s):
            raise Busy()
        try:
            yield
        finally:
            self.parses.release()

    def writable(self, what: str) -> Pools:
        """The pools, when this server may change anything; MonitoringOnly otherwise."""
        if self.pools is None:
            raise MonitoringOnly(what)
        return self.pools

    def model_env(self) -> Mapping[str, str]:
        from agent_harness.secrets.process import process_env

        return process_env() if self.env is None else self.env

    def planner(self, session_id: str, spec: str) -> Planner:
        """The inception planner of a session, over the model client."""
        from agent_harness.inception.session import planner_for

        protected = None if self.settings is None else self.settings.protected_paths
        limit = None if self.settings is None else self.settings.budgets.inception_cost_usd
        return planner_for(self.store, session_id, spec, self.model_env(), protected, limit)

    def audit_target(self) -> str:
        """`serve --audit-db`, else audit.sqlite beside the work database, as for the CLI."""
        from agent_harness.audit.database import audit_url

        return audit_url(self.audit_url, self.store.url)

    def open_audit(self, *, must_exist: bool) -> Store:
        """The audit database, opened (and migrated) for one request; with `must_exist`, a
        SQLite file that is not there is `NoAuditDatabase` rather than made empty."""
        from agent_harness.audit.database import open_audit

        target = self.audit_target()
        path = target.removeprefix("sqlite:///")
        if must_exist and "://" not in path and not Path(path).exists():
            raise NoAuditDatabase(target)
        return open_audit(target, clock=self.store.clock)

    def running(self) -> list[str]:
        return [] if self.pools is None else self.pools.running()

    def roles(self, project: str) -> tuple[dict[str, str], bool]:
        """The project's role routes, and whether a running pass uses them now; a monitoring
        server runs nothing, so what was kept for the project is its answer."""
        if self.pools is not None:
            return self.pools.roles(project)
        from agent_harness.queue.projects import get_project

        return dict(get_project(self.store, project).roles), False

    def pool_error(self, project: str) -> str | None:
        return None if self.pools is None else self.pools.error(project)

    def sync(self, project: str, *, dry_run: bool) -> SyncReport:
        from agent_harness.api.pools import sync_project

        if self.pools is not None:
            return self.pools.sync(project, dry_run=dry_run)
        return sync_project(self.store, self.settings, project, dry_run=dry_run)


def context(request: Request) -> ApiContext:
    ctx = request.app.state.ctx
    assert isinstance(ctx, ApiContext)
    return ctx
