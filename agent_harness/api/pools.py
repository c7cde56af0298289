"""The worker pools of a supervising server (`serve --supervise`), and syncing a registered
project's plan: both reach the project's tracker, opened as `agent-harness run` opens it.

Each started project runs in a thread of its own, as `agent-harness run` would: sync the plan,
queue it, let its fleet work every ready item, then look again after a pause, until stopped.
Stopping drains the fleet (work in flight finishes); a killed server leaves its leases to
lapse or to be taken back by the next start, and a restarted server starts again every project
whose control state says running.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import UsageError
from agent_harness.models.routes import describe_route
from agent_harness.queue import projects
from agent_harness.queue.projects import ControlState, ProjectRecord, ProjectSpec
from agent_harness.store.database import Store
from agent_harness.store.hostlock import held_by_this_host, plan_sync_lock
from agent_harness.tracker.sync import SyncReport, sync_plan

if TYPE_CHECKING:
    from agent_harness.pipeline.launch import RunRequest


def _settings(settings: Any) -> Any:
    if settings is not None:
        return settings
    from agent_harness.config import load_settings

    return load_settings().settings


# The project a folder under `projects/` named without a hash belongs to (see
# project_state_dir).
OWNER_FILE = ".agent-harness-project"


def project_state_dir(root: Path, project: str, registered: Iterable[str] = ()) -> Path:
    """A project's own state folder under `root/projects`: its name with a hash of the whole
    (`me-app-PLAN-1a2b3c`), as `c/d-e:PLAN` and `c-d/e:PLAN` cleaned alike once shared one
    folder, their worktrees and sessions with it. A folder named the old way (without the
    hash) stays its project's: the one its owner file names, or, before one is written, the
    project when no other `registered` project's name cleans alike (which could be either)."""
    import hashlib
    import re

    def cleaned(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)

    slug = cleaned(project)
    folders = root / "projects"
    kept = folders / slug
    alike = {name for name in registered if cleaned(name) == slug} - {project}
    if kept.is_dir():
        owner = kept / OWNER_FILE
        if not alike:
            with contextlib.suppress(FileExistsError), open(owner, "x", encoding="utf-8") as f:
                f.write(project + "\n")  # the one project it can be, from now on
        with contextlib.suppress(OSError):
            if owner.read_text(encoding="utf-8").strip() == project:
                return kept
    digest = hashlib.sha256(project.encode("utf-8")).hexdigest()[:6]
    return folders / f"{slug}-{digest}"


class NoSuchRole(UsageError):
    """A project has no model role of that name (the API's 404)."""


def sync_project(
    store: Store,
    settings: Any,
    project: str,
    *,
    dry_run: bool,
    serving: Any = None,
) -> SyncReport:
    """Mirror a registered project's plan (and the items added to it) to its issues."""
    from agent_harness.pipeline.trackers import open_tracker

    record = projects.get_project(store, project)
    plan = projects.read_plan(store, project)
    spec = record.spec
    with open_tracker(
        spec.repo,
        spec.forge,
        None,
        _settings(settings),
        create=False,
        dry_run=dry_run,
        serving=serving if spec.forge == "local" else None,
    ) as tracker:
        if dry_run:
            return sync_plan(plan, tracker, spec.key, dry_run=True)
        # One sync at a time, with every run (on any host) syncing the same plan: two at once
        # would each open an issue for a new item.
        with held_by_this_host(store, plan_sync_lock(tracker.repo, spec.key)):
            return sync_plan(plan, tracker, spec.key)


class _Runner(threading.Thread):
    """One project's pipeline, run again after each pass until told to stop."""

    def __init__(self, owner: ProjectPools, record: ProjectRecord) -> None:
        super().__init__(name=f"pool-{record.id}", daemon=True)
        self.owner = owner
        self.project = record.id
        self.stopping = threading.Event()
        self.fleet: Any = None
        self.error: str | None = None
        self.book: Any = None  # the running pass's role routes (models.roles.RoleBook)

    def capture(self, *args: Any, **kwargs: Any) -> Any:
        from agent_harness.queue.fleet import Fleet

        self.fleet = Fleet(*args, **kwargs)
        if self.stopping.is_set():
            self.fleet.drain(self.project)
        return self.fleet

    def stop(self) -> None:
        self.stopping.set()
        if self.fleet is not None:
            self.fleet.drain(self.project)

    def run(self) -> None:
        from agent_harness.errors import HarnessError

        while not self.stopping.is_set():
            try:
                self.owner.run_once(self.project, self.capture)
                self.error = None
            except HarnessError as exc:  # recorded for GET /api/projects; tried again later
                self.error = exc.message
            except Exception as exc:  # a bug: said on the project, and this pool stops
                self.error = f"internal error: {type(exc).__name__}: {exc} (this pool stopped)"
                return
            self.stopping.wait(self.owner.idle_s)


class ProjectPools:
    """A worker pool per started project; see the module's docstring."""

    def __init__(
        self,
        store: Store,
        settings: Any = None,
        *,
        db_url: str | None = None,
        audit_db: str | None = None,
        idle_s: float = 30.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.store = store
        self.settings = _settings(settings)
        self.db_url = db_url or store.url  # the runs write where the API reads
        self.audit_db = audit_db  # and each pass is recorded in the audit the API reads
        self.idle_s = idle_s
        self.env = env
        self._runners: dict[str, _Runner] = {}
        self._lock = threading.Lock()
        self._control = threading.Lock()  # one start or stop at a time
        self._forge_stack = ExitStack()
        self._local: Any = None  # the local forge, started on first use, shared by projects

    def local_forge(self) -> Any:
        """The embedded forge every local project of this server uses (one address)."""
        from agent_harness.forge.local import local_forge

        with self._lock:
            if self._local is None:
                state_dir = Path(self.settings.state_dir)
                self._local = self._forge_stack.enter_context(local_forge(state_dir))
            return self._local

    def project_settings(self, project: str) -> Any:
        """The settings a project's runs use: the server's, with a state directory of the
        project's own (worktrees, sessions and locks of two projects never meet)."""
        known = [record.id for record in projects.registered(self.store)]
        state_dir = project_state_dir(Path(self.settings.state_dir), project, known)
        return self.settings.model_copy(update={"state_dir": str(state_dir)})

    def sync(self, project: str, *, dry_run: bool) -> SyncReport:
        spec = projects.get_project(self.store, project).spec
        serving = self.local_forge() if spec.forge == "local" else None
        return sync_project(
            self.store,
            self.settings,
            project,
            dry_run=dry_run,
            serving=serving,
        )

    def resume(self) -> list[str]:
        """Start again every project left running (after a restart, or a kill)."""
        names = [r.id for r in projects.registered(self.store) if r.control == "running"]
        for name in names:
            self.start(name)
        return names

    def start(self, project: str) -> ProjectRecord:
        # Starts and stops take turns whole: interleaved, a stop could pop the runner a start
        # had just made before the start wrote RUNNING, leaving a project "running" that no
        # pool works.
        from agent_harness.pipeline.launch import check_roles

        with self._control:
            record = projects.get_project(self.store, project)
            # What would fail every pass the same way is refused here, not reported later as
            # the pool's error while the project reads "running": an agent not installed, a
            # key not set, a reviewer of the implementer's vendor.
            check_roles(self.request_for(record.spec, record.roles), self._env())
            with self._lock:
                runner = self._runners.get(project)
                if runner is None or not runner.is_alive() or runner.stopping.is_set():
                    runner = _Runner(self, record)
                    self._runners[project] = runner
                    runner.start()
            return projects.set_control(self.store, project, ControlState.RUNNING)

    def stop(self, project: str) -> ProjectRecord:
        with self._control:
            record = projects.set_control(self.store, project, ControlState.STOPPED)
            with self._lock:
                runner = self._runners.pop(project, None)
            if runner is not None:
                runner.stop()
            return record

    def error(self, project: str) -> str | None:
        """Why the project's last pass failed (its runner tries again after a pause)."""
        with self._lock:
            runner = self._runners.get(project)
        return None if runner is None else runner.error

    def running(self) -> list[str]:
        with self._lock:
            return sorted(name for name, r in self._runners.items() if r.is_alive())

    def close(self, join_s: float = 0.0) -> None:
        """Drain every pool without waiting: leases still held lapse, or the next start takes
        them back, as after a killed `agent-harness run`."""
        with self._lock:
            runners, self._runners = list(self._runners.values()), {}
        for runner in runners:
            runner.stop()
        for runner in runners:
            runner.join(timeout=join_s)
        with self._lock:
            self._local = None
        self._forge_stack.close()

    def _env(self) -> dict[str, str]:
        """The environment the passes run with: the one given, else this process's."""
        from agent_harness.secrets.process import process_env

        return dict(self.env or process_env())

    def check_spec(self, spec: ProjectSpec) -> None:
        """Refuse a project whose roles no pass could use: an agent or a vendor not known, a
        reviewer of the implementer's vendor (whether installed and keyed is `start`'s)."""
        from agent_harness.pipeline.launch import check_roles

        check_roles(self.request_for(spec, {}), self._env(), ready=False)

    def request_for(self, spec: ProjectSpec, kept: Mapping[str, str]) -> RunRequest:
        """The run a pass of this project makes, as `agent-harness run` would be asked for
        it; the roles are those registered, or set over the API since and `kept`."""
        from agent_harness.pipeline.launch import RunRequest

        work, plan_path = projects.check_paths(spec, None)
        return RunRequest(
            repo=spec.repo,
            work=work,
            plan_path=plan_path,
            checks=list(spec.checks),
            agent=spec.agent,
            implementer=kept.get("implementer", spec.implementer) if spec.implementer else None,
            reviewer=kept.get("reviewer", spec.reviewer) if ":" in spec.reviewer else spec.reviewer,
            workers=spec.workers,
            plan_key=spec.key,
            forge=spec.forge,
            db=self.db_url,
            audit_db=self.audit_db,
            model=spec.model,
            max_attempts=spec.max_attempts,
            wait_for_others=False,
        )

    def run_once(self, project: str, fleet_factory: Any) -> None:
        """One pass of the project's pipeline, as `agent-harness run` would make it."""
        from agent_harness.pipeline.launch import pipelines_for
        from agent_harness.pipeline.trackers import open_tracker

        record = projects.get_project(self.store, project)
        # The registered roles: those set over the API are applied below, and announced.
        request = self.request_for(record.spec, {})
        spec = record.spec

        serving = self.local_forge() if spec.forge == "local" else None

        def tracker() -> Any:
            return open_tracker(
                spec.repo, spec.forge, None, self.settings, False, need_history=True,
                serving=serving,
            )  # fmt: skip

        plan = projects.read_plan(self.store, project)
        with pipelines_for(
            request,
            self.project_settings(project),
            lambda _repo: tracker(),
            env=self.env,
            plan=plan,
            forge_home=Path(self.settings.state_dir),  # the server's forge, every project's
        ) as launched:
            [(pipeline, _plan)] = launched.built
            # Under the lock `set_role` takes: a route set over the API while this pass starts
            # is either stored before the routes are read here, or applied to this book.
            with self._lock:
                kept = projects.get_project(self.store, project).roles
                for role, route in kept.items():  # routes set over the API, kept
                    launched.roles.set_route(role, route, source="api (kept)")
                runner = self._runners.get(project)
                if runner is not None:
                    runner.book = launched.roles
            try:
                pipeline.run(fleet_factory=fleet_factory)
            finally:
                if runner is not None:
                    runner.book = None

    def roles(self, project: str) -> tuple[dict[str, str], bool]:
        """The project's role routes: its running pass's (live), else the ones kept for it."""
        record = projects.get_project(self.store, project)
        with self._lock:
            runner = self._runners.get(project)
        book = None if runner is None else runner.book
        if book is None:
            return dict(record.roles), False
        return {role: describe_route(route) for role, route in book.routes().items()}, True

    def set_role(self, project: str, role: str, route: str) -> tuple[dict[str, str], bool]:
        """Re-route `role`: the running pass's next model call takes it (a change its rules
        refuse is refused here), and every later pass starts with it."""
        from agent_harness.models.roles import route_of
        from agent_harness.pipeline.launch import check_roles

        record = projects.get_project(self.store, project)
        spec = record.spec
        served = {"reviewer"} if ":" in spec.reviewer else set()
        served |= {"implementer", "planner"} if spec.implementer else set()
        if role not in served:
            names = ", ".join(sorted(served)) or "none (its roles are CLI agents)"
            raise NoSuchRole(f"{project} has no model role {role!r}; its model roles: {names}")
        env = self._env()
        route_of(role, route, env, "PUT /api/roles")  # a bad one: no change
        # The run's rules, whether a pass is running or not: no reviewer of the implementer's
        # vendor (a running pass's book refuses it too, below).
        check_roles(self.request_for(spec, {**record.roles, role: route}), env, ready=False)
        with self._lock:  # see run_pass: a pass starting now reads what is stored here
            runner = self._runners.get(project)
            book = None if runner is None else runner.book
            if book is not None:
                book.set_route(role, route, source="api")
            projects.set_roles(self.store, project, {role: route})
        return self.roles(project)
