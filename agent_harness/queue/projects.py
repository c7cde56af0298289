"""Registered projects: what a supervising server runs (repository, plan, clone, checks, roles),
whether it is told to run them, and how the queue stands for every project at a glance.

A project is registered STOPPED; only `start` (of a supervising server) makes workers for it.
Its id is the queue's project name, `owner/repo:plankey`, so the items and events of a
project run by `agent-harness run` and of the same one registered here are one history.
Every path a registration names is checked here: the work dir must be the top of a git clone
(inside the allowed root, when one is set) and the plan must be a file inside that clone.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from agent_harness.errors import HarnessError, UsageError
from agent_harness.plan.dependencies import refuse_unmet
from agent_harness.plan.model import PLAN_KEY_PATTERN, Plan, WorkItem, default_plan_key
from agent_harness.queue.items import repo_case_folded
from agent_harness.store.database import Store

_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
# Up to 100 of these characters, but not `.` or `..` (no repository is named so): said without
# a lookahead, which JSON Schema's readers need not know.
_NAME = (
    r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}"
    r"|\.\.[A-Za-z0-9._-]{1,98})"
)
_KEY = PLAN_KEY_PATTERN.strip("^$")
OWNER_PATTERN = rf"^{_OWNER}$"
NAME_PATTERN = rf"^{_NAME}$"
REPO_PATTERN = rf"^{_OWNER}/{_NAME}$"
PROJECT_PATTERN = rf"^{_OWNER}/{_NAME}:{_KEY}$"
ITEM_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class ControlState(StrEnum):
    STOPPED = "stopped"  # registered; no worker of this server takes its items
    RUNNING = "running"  # this server's worker pool works its items


# A path segment that is not '..' (nor holds a NUL, or for a plan a backslash): what
# `check_paths` refuses is refused by the description too.
_SEGMENT = r"(?:[^/.\u0000][^/\u0000]*|\.(?:[^/.\u0000][^/\u0000]*)?|\.\.[^/\u0000]+)"
_PLAN_SEGMENT = _SEGMENT.replace(r"\u0000", r"\u0000\\")
WORK_DIR_PATTERN = rf"^/{_SEGMENT}?(?:/{_SEGMENT}?)*$"
PLAN_PATH_PATTERN = rf"^{_PLAN_SEGMENT}(?:/{_PLAN_SEGMENT}?)*$"


def _a_number(value: Any) -> Any:
    """A count is a JSON number: `true` is none (lax validation read it as 1), nor is `"5"`.
    A whole number written `5.0` stays one, as JSON Schema's `integer` says."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("a count must be a number, not a string or true/false")
    return value


Count = Annotated[int, BeforeValidator(_a_number)]


class ProjectSpec(BaseModel):
    """What to run: the repository, the plan, the clone, the checks and the roles."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str = Field(
        pattern=REPO_PATTERN, max_length=140, description="Repository on the tracker, OWNER/NAME."
    )
    work_dir: str = Field(
        min_length=1,
        max_length=1024,
        pattern=WORK_DIR_PATTERN,
        description="Absolute path of the top of a git clone of the repository on the server.",
    )
    plan: str = Field(
        min_length=1,
        max_length=512,
        pattern=PLAN_PATH_PATTERN,
        description="The plan file, relative to work_dir (markdown or backlog.json); no '..'.",
    )
    plan_key: str | None = Field(
        default=None,
        pattern=PLAN_KEY_PATTERN,
        description="Scopes the plan's issues; default: the plan file's stem.",
    )
    checks: tuple[str, ...] = Field(
        default=(),
        max_length=32,
        description="Check commands run in each worktree, cheapest first.",
    )
    agent: str | None = Field(
        default=None,
        max_length=200,
        description="Implementer role: a CLI agent preset (claude, codex, ...) or template.",
    )
    implementer: str | None = Field(
        default=None,
        max_length=200,
        description="Implementer role as a model, vendor:model (the direct-API executor).",
    )
    reviewer: str = Field(
        min_length=1, max_length=200, description="Reviewer role: vendor:model or agent preset."
    )
    model: str | None = Field(
        default=None, max_length=200, description="Model passed to the CLI agent preset."
    )
    workers: Count = Field(default=1, ge=1, le=64, description="Workers of this project's pool.")
    # The bounds stand before the number's validator, so the description states them as
    # `minimum` and `maximum` (after it, on the union, they came out as `ge` and `le`, which
    # JSON Schema does not know).
    max_attempts: Annotated[int, Field(ge=1, le=100), BeforeValidator(_a_number)] | None = Field(
        default=None, description="Attempts per item."
    )
    forge: Literal["local"] | None = Field(
        default=None, description="'local' for the embedded forge; null for GitHub."
    )

    @field_validator("work_dir")
    @classmethod
    def _one_spelling(cls, value: str) -> str:
        """`/srv/app/` and `/srv//app` are `/srv/app`: one clone is registered under one path."""
        return posixpath.normpath(value)

    @property
    def key(self) -> str:
        return self.plan_key or default_plan_key(PurePosixPath(self.plan))

    @property
    def project_id(self) -> str:
        return f"{self.repo}:{self.key}"


@dataclass(frozen=True)
class ProjectRecord:
    id: str
    spec: ProjectSpec
    control: ControlState
    added: tuple[WorkItem, ...]  # items added through the API, outside the plan file
    roles: dict[str, str]  # role -> "vendor:model", set live over the API; kept for restarts
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class ProjectOverview:
    """One project as the queue knows it: registered here or only run by `agent-harness run`."""

    id: str
    counts: dict[str, int]
    registered: ProjectRecord | None


class UnknownProject(HarnessError):
    """No such project."""

    exit_code = 2

    def __init__(self, project: str) -> None:
        self.project = project
        super().__init__(f"no project {project} is registered")


class ProjectExists(HarnessError):
    """A project with this id is registered already."""

    def __init__(self, project: str, as_: str | None = None) -> None:
        self.project = project
        if as_ is None or as_ == project:
            super().__init__(f"project {project} is registered already")
        else:  # GitHub's owner and repository names ignore case: one repository, two queues
            super().__init__(
                f"project {project} is registered already, as {as_} (repository names ignore case)"
            )


class ItemsExist(UsageError):
    """Items to add whose ids the project's plan already has (the API's 409)."""


class BadProjectPath(UsageError):
    """A path of a registration the server may not use."""


def check_project_id(text: str) -> str:
    if not re.fullmatch(PROJECT_PATTERN, text):
        raise UsageError(f"project '{text[:200]}' must be OWNER/NAME:PLANKEY")
    return text


def check_paths(spec: ProjectSpec, allowed_root: Path | None) -> tuple[Path, Path]:
    """The clone and the plan file a registration names, resolved; BadProjectPath when the
    work dir is not the top of a git clone (under `allowed_root`, if set) or the plan leaves it,
    or when either cannot be looked at (a symlink loop, a name too long): they answered 500."""
    try:
        return _checked_paths(spec, allowed_root)
    except RuntimeError as exc:  # Python 3.11 says a symlink loop so, newer ones as OSError
        raise BadProjectPath(f"work_dir or plan cannot be followed: {exc}") from None
    except OSError as exc:
        raise BadProjectPath(
            f"work_dir or plan cannot be looked at: {exc.strerror or exc}"
        ) from None


def _checked_paths(spec: ProjectSpec, allowed_root: Path | None) -> tuple[Path, Path]:
    from agent_harness.git.runner import run_git

    raw = Path(spec.work_dir)
    if not raw.is_absolute() or ".." in raw.parts:
        raise BadProjectPath(f"work_dir '{spec.work_dir}' must be an absolute path without '..'")
    work = raw.resolve()
    if allowed_root is not None and not work.is_relative_to(allowed_root.resolve()):
        raise BadProjectPath(f"work_dir '{spec.work_dir}' is outside {allowed_root}")
    if not work.is_dir():
        raise BadProjectPath(f"work_dir '{spec.work_dir}' is not a directory")
    top = run_git(work, "rev-parse", "--show-toplevel", check=False)
    if not top.ok or Path(top.stdout.strip()).resolve() != work:
        raise BadProjectPath(f"work_dir '{spec.work_dir}' is not the top of a git clone")
    plan_rel = PurePosixPath(spec.plan)
    if plan_rel.is_absolute() or ".." in plan_rel.parts or "\\" in spec.plan:
        raise BadProjectPath(f"plan '{spec.plan}' must be a path inside work_dir, without '..'")
    plan = (work / plan_rel).resolve()
    if not plan.is_relative_to(work):
        raise BadProjectPath(f"plan '{spec.plan}' leads outside work_dir")
    if ".git" in plan.relative_to(work).parts:
        raise BadProjectPath(f"plan '{spec.plan}' is inside .git, not a file of the clone")
    if not plan.is_file():
        raise BadProjectPath(f"plan '{spec.plan}' is not a file in work_dir")
    return work, plan


_COLUMNS = "id, spec_json, control, added_json, roles_json, created_at, updated_at"


def _record(row: Sequence[Any]) -> ProjectRecord:
    return ProjectRecord(
        id=str(row[0]),
        spec=ProjectSpec.model_validate_json(row[1]),
        control=ControlState(row[2]),
        added=tuple(WorkItem.model_validate(item) for item in json.loads(row[3])),
        roles={str(k): str(v) for k, v in json.loads(row[4]).items()},
        created_at=float(row[5]),
        updated_at=float(row[6]),
    )


def check_spec(spec: ProjectSpec, allowed_root: Path | None) -> None:
    """Refuse a project no pass could run: not exactly one implementer, or paths it may not
    use (see `check_paths`)."""
    if bool(spec.agent) == bool(spec.implementer):
        # Registered, its pool failed every pass with the same refusal.
        raise UsageError(
            "give exactly one of agent (a CLI agent preset) or implementer (vendor:model)"
        )
    check_paths(spec, allowed_root)


def register(store: Store, spec: ProjectSpec, *, allowed_root: Path | None = None) -> ProjectRecord:
    """Record a project, STOPPED. Its roles and paths are checked first (`check_spec`)."""
    check_spec(spec, allowed_root)
    now = store.clock()
    same = repo_case_folded(spec.project_id)
    with store.transaction() as tx:
        for (known,) in tx.all("SELECT id FROM projects"):
            if repo_case_folded(str(known)) == same:
                raise ProjectExists(spec.project_id, str(known))
        inserted = tx.execute(
            f"INSERT INTO projects ({_COLUMNS}) VALUES (?, ?, ?, '[]', '{{}}', ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (spec.project_id, spec.model_dump_json(), ControlState.STOPPED, now, now),
        )
    if not inserted:
        raise ProjectExists(spec.project_id)
    return get_project(store, spec.project_id)


def get_project(store: Store, project: str) -> ProjectRecord:
    with store.transaction(write=False) as tx:
        row = tx.one(f"SELECT {_COLUMNS} FROM projects WHERE id = ?", (project,))
    if row is None:
        raise UnknownProject(project)
    return _record(row)


def registered_as(store: Store, project: str) -> str:
    """How `project` was registered, its repository's name in any case, as registering
    compares them (GitHub's names ignore case): `ME/APP:PLAN` is `me/app:PLAN`; `project`
    itself when no project is registered so."""
    same = repo_case_folded(project)
    with store.transaction(write=False) as tx:
        if tx.one("SELECT id FROM projects WHERE id = ?", (project,)) is not None:
            return project
        known = [str(row[0]) for row in tx.all("SELECT id FROM projects ORDER BY id")]
    return next((name for name in known if repo_case_folded(name) == same), project)


def registered(store: Store) -> list[ProjectRecord]:
    with store.transaction(write=False) as tx:
        rows = tx.all(f"SELECT {_COLUMNS} FROM projects ORDER BY id")
    return [_record(row) for row in rows]


def set_control(store: Store, project: str, state: ControlState) -> ProjectRecord:
    with store.transaction() as tx:
        changed = tx.execute(
            "UPDATE projects SET control = ?, updated_at = ? WHERE id = ?",
            (state, store.clock(), project),
        )
    if not changed:
        raise UnknownProject(project)
    return get_project(store, project)


def set_roles(store: Store, project: str, routes: dict[str, str]) -> ProjectRecord:
    """Keep these role routes for the project (merged over those kept before), so every later
    run of it starts with them."""
    record = get_project(store, project)
    kept = {**record.roles, **routes}
    with store.transaction() as tx:
        tx.execute(
            "UPDATE projects SET roles_json = ?, updated_at = ? WHERE id = ?",
            (json.dumps(kept, sort_keys=True), store.clock(), project),
        )
    return get_project(store, project)


@dataclass(frozen=True)
class Added:
    added: tuple[str, ...]  # kept now; the project's next pass queues them with its plan
    unchanged: tuple[str, ...]  # kept already, exactly as given (a repeated request)


def add_items(store: Store, project: str, new: Iterable[WorkItem]) -> Added:
    """Keep items that are in no plan file for the project. Its pool's next pass mirrors them
    to issues and queues them with the plan's (a pass already running works only the plan it
    started with). Ids the plan uses, or an addition with other content, are refused.

    What is kept is read and written in one transaction, its row locked: two requests at once
    each add theirs (read apart from the write, the later one wrote over the earlier's)."""
    plan = read_plan(store, project)  # UnknownProject before anything else
    wanted = list(new)
    ids = [item.id for item in wanted]
    if len(set(ids)) != len(ids):
        raise UsageError("the same id twice in one request")
    taken = {item.id for item in plan.items}
    with store.transaction() as tx:
        row = tx.one(
            f"SELECT {_COLUMNS} FROM projects WHERE id = ?{store.dialect.lock_rows}", (project,)
        )
        if row is None:
            raise UnknownProject(project)
        kept = {item.id: item for item in _record(row).added}
        same = [item.id for item in wanted if kept.get(item.id) == item]
        other = sorted(item.id for item in wanted if item.id in kept and item.id not in same)
        if other:
            raise ItemsExist(f"{', '.join(other)} already in {project} with other content")
        fresh = [item for item in wanted if item.id not in kept]
        clash = sorted({item.id for item in fresh} & (taken - set(kept)))
        if clash:
            raise ItemsExist(f"{', '.join(clash)} already in {project}: pick other ids")
        refuse_unmet([*plan.items, *fresh], project, project)
        if fresh:
            added = [*kept.values(), *fresh]
            tx.execute(
                "UPDATE projects SET added_json = ?, updated_at = ? WHERE id = ?",
                (json.dumps([i.model_dump(mode="json") for i in added]), store.clock(), project),
            )
    return Added(tuple(item.id for item in fresh), tuple(same))


def overview(store: Store) -> list[ProjectOverview]:
    """Every project: those with queued items and those registered, with counts by state,
    in one read."""
    with store.transaction(write=False) as tx:
        counted = tx.all("SELECT project, state, COUNT(*) FROM items GROUP BY project, state")
        rows = tx.all(f"SELECT {_COLUMNS} FROM projects ORDER BY id")
    counts: dict[str, dict[str, int]] = {}
    for project, state, n in counted:
        counts.setdefault(str(project), {})[str(state)] = int(n)
    records = {str(row[0]): _record(row) for row in rows}
    names = sorted(set(counts) | set(records))
    return [ProjectOverview(name, counts.get(name, {}), records.get(name)) for name in names]


def describe(store: Store, project: str) -> ProjectOverview:
    """One project as `overview` shows it; UnknownProject when neither queued nor registered."""
    with store.transaction(write=False) as tx:
        counted = tx.all(
            "SELECT state, COUNT(*) FROM items WHERE project = ? GROUP BY state", (project,)
        )
        row = tx.one(f"SELECT {_COLUMNS} FROM projects WHERE id = ?", (project,))
    if row is None and not counted:
        raise UnknownProject(project)
    counts = {str(state): int(n) for state, n in counted}
    return ProjectOverview(project, counts, None if row is None else _record(row))


def read_plan(store: Store, project: str) -> Plan:
    """A registered project's plan: its file's items, then the items added outside it."""
    from agent_harness.plan.backlog import load_plan

    record = get_project(store, project)
    _, plan_path = check_paths(record.spec, None)
    plan = load_plan(plan_path)
    if not record.added:
        return plan
    return plan.model_copy(update={"items": (*plan.items, *record.added)})
