"""Build a run from what a person asked for: the plan, repo, agent, reviewer and budgets.

The CLI only parses flags into a `RunRequest`; this module turns it into the parts of a
`run.Pipeline` (store, tracker, work repo, implementer, reviewer) and refuses, before any work
starts, what would fail every item: a missing agent binary, a reviewer of the same vendor, an
unknown model vendor, a `--work` that is not a usable git repository.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import PlanRefused, UsageError
from agent_harness.models.roles import RoleBook
from agent_harness.store.events import RolesChanged, payload_of

if TYPE_CHECKING:
    from agent_harness.agents.presets import AgentPreset
    from agent_harness.config import Settings
    from agent_harness.implement.protocol import Implementer
    from agent_harness.models.routes import Route
    from agent_harness.pipeline.run import Pipeline
    from agent_harness.pipeline.settings import Observer, RunSettings
    from agent_harness.plan.model import Plan, WorkItem
    from agent_harness.review.verdict import Reviewer
    from agent_harness.sessions.protocol import SessionHost
    from agent_harness.store.database import Store
    from agent_harness.tracker.github import GitHubTracker


@dataclass
class RunRequest:
    """Everything `agent-harness run` was asked to do."""

    repo: str  # "" when every [[projects]] entry names its own
    work: Path | None
    plan_path: Path | None  # None: the plans of [[projects]] in the config file
    checks: list[str] = field(default_factory=list)
    agent: str | None = None  # preset name or command template
    implementer: str | None = None  # vendor:model for the direct-API executor
    reviewer: str = ""  # vendor:model, or a CLI agent preset name
    workers: int = 1
    plan_key: str | None = None
    only: list[str] = field(default_factory=list)
    allow_same_vendor: bool = False
    forge: str | None = None
    github_url: str | None = None
    db: str | None = None
    audit_db: str | None = None  # None: audit.sqlite beside the work database
    model: str | None = None
    max_attempts: int | None = None
    agent_timeout_s: float | None = None
    own_login: bool = False  # agents use the user's own HOME and logins, not a throwaway one
    wait_for_others: bool = True  # wait for items other hosts hold before ending
    host_id: str | None = None  # this host's name in its workers' names; None: machine + state dir
    more_plans: list[Path] = field(default_factory=list)  # further plans, one project each
    max_workers: int | None = None  # agents at once over every plan; None: --workers per plan
    session_host: str | None = None  # URL of a remote session host; None: this machine
    merge_when_green: bool | None = None  # None: the configuration's
    max_pr_rounds: int | None = None

    @property
    def plan_paths(self) -> list[Path]:
        return [self.plan_path, *self.more_plans] if self.plan_path else []


@dataclass(frozen=True)
class Target:
    """One project of a run: a plan, on a repository, worked from a clone."""

    plan: Path
    repo: str
    work: Path


def targets(request: RunRequest, settings: Settings) -> list[Target]:
    """The run's projects: each --plan on --repo and --work, or else the config file's
    `[[projects]]` (each may name its own repo and work)."""
    from agent_harness.tracker.github import check_repo_name

    if request.plan_paths:
        wanted = [(path, request.repo, request.work) for path in request.plan_paths]
        where = "--plan"
    elif settings.projects:
        wanted = [
            (Path(p.plan), p.repo or request.repo, Path(p.work) if p.work else request.work)
            for p in settings.projects
        ]
        where = "[[projects]]"
    else:
        raise UsageError(
            "give --plan PLAN.md, or [[projects]] with plan = ... in agent-harness.toml"
        )
    out = []
    for plan, repo, work in wanted:
        if not repo or work is None:
            missing = "--repo" if not repo else "--work"
            raise UsageError(
                f"{where} {plan}: no repository to run it on; give {missing}, or repo and "
                "work in its [[projects]] entry"
            )
        out.append(Target(plan, check_repo_name(repo), work))
    return out


def model_events(store: Store, project: str) -> Any:
    """Every model call becomes an event of the run's project (tokens, latency, failure class),
    and of the item whose attempt made it, if any; pricing and audits read them later. Keys
    never appear in them."""
    from agent_harness.pipeline.parts import ITEM_AT_WORK

    def sink(kind: str, payload: dict[str, Any]) -> None:
        store.append_event(project, ITEM_AT_WORK.get(), payload_of(kind, payload))

    return sink


def _recorded_store(stack: ExitStack, settings: Any, request: RunRequest) -> Store:
    """The work database, closed with `stack`; just before it closes, the run is recorded in
    the audit database (last in, first out)."""
    from agent_harness.config import database_url
    from agent_harness.store.database import open_store

    work_url = database_url(settings, request.db)
    store = open_store(work_url)
    stack.callback(store.close)
    stack.callback(record_in_audit, store, request.audit_db, work_url)
    return store


def record_in_audit(store: Store, audit_db: str | None, work_url: str) -> None:
    """Bring the audit up to date with what a run (or a reconcile) recorded. Observation never
    stops work: when the audit database cannot be written, the drop is counted and `audit
    health` says so."""
    from agent_harness.audit.database import audit_url
    from agent_harness.audit.observe import observe

    observe(store, audit_url(audit_db, work_url))


_EMPTY_SAYS = {
    "--agent": "name a preset (see `agent-harness agents`) or a command template, e.g. "
    "'my-agent --prompt-file {prompt_file}'",
    "--implementer": "name a vendor:model, e.g. openai:gpt-4.1",
}


def _implementer_choice(
    request: RunRequest, env: Mapping[str, str], *, ready: bool = True
) -> AgentPreset | Route:
    """The CLI agent or the model route a run implements with, checked: one of them, known,
    and (`ready`) installed, its key set."""
    from agent_harness.agents.presets import preset_for
    from agent_harness.models.routes import route_from_spec

    for flag, value in (("--agent", request.agent), ("--implementer", request.implementer)):
        if value is not None and not value.strip():  # `--agent "$UNSET"`: said as it is
            raise UsageError(f"{flag} is empty: {_EMPTY_SAYS[flag]}")
    if bool(request.agent) == bool(request.implementer):
        raise UsageError("give exactly one of --agent (a CLI agent) or --implementer vendor:model")
    if request.agent:
        preset = anchored(preset_for(request.agent), Path.cwd())
        _refuse_missing_scripts(preset, request.work)
        return _installed(preset, "agent", env) if ready else preset
    assert request.implementer is not None
    route = route_from_spec(request.implementer, env)
    if ready and not env.get(route.api_key_env):
        raise UsageError(f"implementer {request.implementer} needs {route.api_key_env} set")
    return route


def _reviewer_choice(
    request: RunRequest, env: Mapping[str, str], *, ready: bool = True
) -> AgentPreset | Route:
    """The agent preset or the model route a run reviews with, checked likewise."""
    from agent_harness.agents.presets import PRESETS, preset_for
    from agent_harness.models.routes import route_from_spec

    spec = request.reviewer.strip()
    if not spec:
        raise UsageError(
            "--reviewer is required: vendor:model (e.g. openai:gpt-4.1) or an "
            "agent preset (e.g. codex)"
        )
    if ":" not in spec and spec in PRESETS:
        return _installed(preset_for(spec), "reviewer", env) if ready else preset_for(spec)
    route = route_from_spec(spec, env)
    if ready and not env.get(route.api_key_env):
        raise UsageError(
            f"reviewer {spec} needs its API key: set {route.api_key_env} "
            "(it is never passed to agents)"
        )
    return route


def _installed(preset: AgentPreset, role: str, env: Mapping[str, str]) -> AgentPreset:
    """`preset`, when its program is on the PATH; else how to install it."""
    if shutil.which(preset.binary, path=env.get("PATH")) is None:
        from agent_harness.agents.runner import missing_reason

        raise UsageError(f"{role} '{preset.name}': {missing_reason(preset)}")
    return preset


def check_roles(request: RunRequest, env: Mapping[str, str], *, ready: bool = True) -> None:
    """Refuse a run whose implementer or reviewer cannot work before anything is opened, so a
    refused run leaves no database or forge behind: a role unknown, of one vendor with the
    other (unless allowed), and (`ready`) a program not installed or a key not set."""
    from agent_harness.agents.presets import AgentPreset
    from agent_harness.review.model import route_vendor
    from agent_harness.review.verdict import check_vendors

    made_by = _implementer_choice(request, env, ready=ready)
    reviewed_by = _reviewer_choice(request, env, ready=ready)
    vendors = [c.vendor if isinstance(c, AgentPreset) else route_vendor(c)
               for c in (made_by, reviewed_by)]  # fmt: skip
    check_vendors(vendors[0], vendors[1], request.allow_same_vendor)


def build_implementer(
    project: str,
    request: RunRequest,
    host: SessionHost,
    env: Mapping[str, str],
    settings: Settings,
    store: Store,
    item_checks: Any,
) -> Implementer:
    from agent_harness.agents.presets import AgentPreset
    from agent_harness.implement.api import ApiImplementer
    from agent_harness.implement.cli_agent import CliImplementer

    choice = _implementer_choice(request, env)
    timeout = request.agent_timeout_s or settings.budgets.agent_timeout_s
    if isinstance(choice, AgentPreset):
        return CliImplementer(
            host,
            choice,
            env,
            timeout_s=timeout,
            idle_s=settings.budgets.agent_idle_s,
            model=request.model,
            own_login=request.own_login,
        )
    from agent_harness.models.client import ModelClient

    client = ModelClient(
        {"planner": choice, "implementer": choice},
        env=env,
        parking=store,
        events=model_events(store, project),
    )
    from agent_harness.implement.executor import Budgets
    from agent_harness.secrets.environment import without_secrets

    return ApiImplementer(
        client,
        vendor=choice.vendor,
        name=f"executor:{choice.model}",
        item_checks=item_checks,
        check_env=without_secrets(env),
        budgets=Budgets(max_replans=settings.budgets.max_replans),
    )


def build_reviewer(
    project: str,
    request: RunRequest,
    host: SessionHost,
    env: Mapping[str, str],
    state_dir: Path,
    store: Store,
    worker: str,
) -> Reviewer:
    from agent_harness.agents.presets import AgentPreset

    choice = _reviewer_choice(request, env)
    if isinstance(choice, AgentPreset):
        from agent_harness.review.agent import CliReviewer

        return CliReviewer(host, choice, env, state_dir, own_login=request.own_login)
    from agent_harness.models.client import ModelClient
    from agent_harness.review.model import ModelReviewer

    client = ModelClient(
        {"reviewer": choice}, env=env, parking=store, events=model_events(store, project)
    )
    return ModelReviewer(client, worker=worker)


def anchored(preset: AgentPreset, cwd: Path) -> AgentPreset:
    """A command template whose relative file paths are made absolute.

    Agents run inside the item's worktree, so `python agent/run.py` typed in your checkout
    would point nowhere there; a relative argument naming a file that exists here is meant
    to be that file.
    """
    from dataclasses import replace

    if not preset.template:
        return preset
    parts = []
    for part in preset.template:
        candidate = cwd / part
        is_path = "{" not in part and not part.startswith("-") and ("/" in part or "." in part)
        parts.append(str(candidate.resolve()) if is_path and candidate.is_file() else part)
    binary = parts[0] if parts[0] != preset.template[0] else preset.binary
    return replace(preset, template=tuple(parts), binary=binary)


# Interpreters whose first argument is the script they run (`python agent/run.py ...`); sh and
# bash look a script of a bare name up on PATH when the working folder has none.
_INTERPRETERS = frozenset({"node", "bash", "sh", "ruby", "perl", "php", "deno", "bun", "tsx"})
_PATH_SEARCHING = frozenset({"sh", "bash"})
_FINDS_SUFFIX = frozenset({"node", "deno", "bun", "tsx"})
# Python's options that take no value, which may come before its script (`python -u x.py`).
_PYTHON_FLAGS = frozenset({"-u", "-B", "-O", "-OO", "-E", "-s", "-S", "-I", "-b", "-bb", "-q"})


def _script_of(argv: list[str]) -> str | None:
    """The relative script an interpreter's command line runs; None for any other command."""
    interpreter = Path(argv[0]).name
    rest = argv[1:]
    if re.fullmatch(r"python[0-9.]*", interpreter):
        while rest and rest[0] in _PYTHON_FLAGS:
            rest = rest[1:]
    elif interpreter not in _INTERPRETERS:
        return None
    script = rest[0] if rest else ""
    if not script or script.startswith(("/", "-", "~")) or "{" in script or "://" in script:
        return None
    if interpreter in _FINDS_SUFFIX and not Path(script).suffix:
        return None  # `node agent` runs agent.js as well
    return script


def _refuse_missing_scripts(preset: AgentPreset, work: Path | None) -> None:
    """Refuse a template whose interpreter is to run a relative script found neither here
    (where `anchored` looks) nor in the clone (whose worktrees would have it), nor (for a
    shell, a bare name) on PATH: every attempt would fail the same way, spending the item's
    attempts on a typo. Only the script an interpreter runs is looked for: other arguments
    may name files the agent is to make."""
    argv = list(preset.template or ())
    script = _script_of(argv) if argv else None
    if work is None or script is None or (work / script).is_file():
        return
    searched = Path(argv[0]).name in _PATH_SEARCHING and "/" not in script
    if searched and shutil.which(script, mode=os.F_OK) is not None:
        return
    raise UsageError(
        f"the agent command runs {script}, which is not in {Path.cwd()} nor in the clone "
        f"{work}{' nor on PATH' if searched else ''}: give its path from here, or an absolute "
        "one"
    )


def run_settings_for(request: RunRequest, settings: Settings) -> RunSettings:
    """The run's budgets and switches: flags first, then the layered configuration."""
    from agent_harness.pipeline.settings import RunSettings

    return RunSettings(
        checks=list(request.checks) or list(settings.checks.commands),
        check_timeout_s=settings.checks.timeout_s,
        max_attempts=request.max_attempts or settings.budgets.max_attempts,
        lease_s=settings.budgets.lease_s,
        workers=request.workers,
        protected=list(settings.protected_paths),
        allow_same_vendor=request.allow_same_vendor,
        item_cost_usd=settings.budgets.item_cost_usd,
        run_cost_usd=settings.budgets.run_cost_usd,
        max_call_usd=settings.budgets.max_call_usd,
        only=set(request.only) or None,
        requeue_reverted=settings.reconcile.requeue_reverted,
        revert_window_days=settings.reconcile.revert_window_days,
        check_env_pass=list(settings.checks.env_pass),
        secret_shapes_ignored_in=list(settings.secrets.shapes_ignored_in),
        wait_for_others=request.wait_for_others,
        worker_prefix=request.host_id,
        max_pr_rounds=(
            settings.reconcile.max_pr_rounds
            if request.max_pr_rounds is None
            else request.max_pr_rounds
        ),
        merge_when_green=bool(request.merge_when_green or settings.reconcile.merge_when_green),
    )


@contextmanager
def pipeline_for(
    request: RunRequest,
    settings: Settings,
    open_tracker: Callable[[], AbstractContextManager[GitHubTracker]],
    observer: Observer | None = None,
    env: Mapping[str, str] | None = None,
    plan: Plan | None = None,
) -> Iterator[tuple[Pipeline, Plan]]:
    """The pipeline of a run of one plan (see `pipelines_for`). `plan`, when given, is run
    instead of the one read from `request.plan_path` (a served project's, with the items
    added to it)."""
    with pipelines_for(
        request, settings, lambda _repo: open_tracker(), observer, env, plan=plan
    ) as run:
        yield run.built[0]


def _plans(
    request: RunRequest, settings: Settings, given: Plan | None = None
) -> list[tuple[Target, str, Plan]]:
    """Each project with its plan key and plan (`given` instead of the file's, for a run of
    one plan); refuses keys two plans of one repository share and --only ids no plan has."""
    from agent_harness.plan.backlog import load_plan
    from agent_harness.plan.ids import no_items_message
    from agent_harness.plan.model import plan_key_for

    chosen = targets(request, settings)
    if given is not None and len(chosen) != 1:
        raise UsageError("a plan given in place of its file is for a run of one plan")
    if len(chosen) > 1 and request.plan_key:
        raise UsageError(
            "--plan-key names one plan's issues; with several plans, each plan's key is "
            "its file name"
        )
    loaded = [
        (
            target,
            plan_key_for(str(target.plan), request.plan_key or settings.tracker.plan_key),
            load_plan(target.plan) if given is None else given,
        )
        for target in chosen
    ]
    for _target, _key, plan in loaded if given is None else ():
        if not plan.items:  # a run of it would end at once, having said nothing of why
            raise PlanRefused(no_items_message(plan))
    if len(chosen) > 1:
        keys = [f"{target.repo}:{key}" for target, key, _plan in loaded]
        twice = sorted({key for key in keys if keys.count(key) > 1})
        if twice:
            raise UsageError(
                f"two plans are the project {twice[0]} (a plan's key is its file name): "
                "rename one, so each plan has its own issues"
            )
    known = {item.id for _target, _key, plan in loaded for item in plan.items}
    unknown = sorted(set(request.only) - known)
    if unknown:
        shown = ", ".join(repr(name)[1:-1] for name in unknown)  # a control character spelt out
        raise UsageError(f"--only names items not in the plan: {shown}")
    return loaded


@dataclass
class Launched:
    """A run's pipelines, one per plan, and the role routes their model clients share."""

    built: list[tuple[Pipeline, Plan]]
    roles: RoleBook


@contextmanager
def pipelines_for(
    request: RunRequest,
    settings: Settings,
    open_tracker: Callable[[str], AbstractContextManager[GitHubTracker]],
    observer: Observer | None = None,
    env: Mapping[str, str] | None = None,
    config_file: Path | None = None,
    plan: Plan | None = None,
    forge_home: Path | None = None,
) -> Iterator[Launched]:
    """Everything a run needs, one pipeline per plan (one project each; the plans share one
    database, and a tracker client per repository and a work repo per clone), opened in
    order and closed in reverse. `open_tracker(repo)` opens the tracker the person chose
    (GitHub, or the embedded forge): the caller decides, so this module never reaches for
    the command line or the forge. `forge_home`: the state folder the embedded forge keeps
    its repositories under, where it is not the run's (a server's, shared by its projects)."""
    from agent_harness.git.worktrees import WorkRepo
    from agent_harness.models.client import ModelClient
    from agent_harness.models.roles import read_roles, route_of
    from agent_harness.secrets.process import process_env

    env = process_env() if env is None else dict(env)
    plans = _plans(request, settings, plan)
    state_dir = Path(settings.state_dir).resolve()
    works: dict[Path, WorkRepo] = {}
    for target, _key, _plan in plans:
        if target.work.resolve() not in works:
            where = functools.partial(
                clone_url_of, request, forge_home or state_dir, target.repo, env
            )
            works[target.work.resolve()] = WorkRepo(target.work, state_dir, clone_url=where)
    check_roles(request, env)
    with ExitStack() as stack:
        store = _recorded_store(stack, settings, request)
        trackers: dict[str, GitHubTracker] = {}
        for target, _key, _plan in plans:
            if target.repo not in trackers:
                trackers[target.repo] = stack.enter_context(open_tracker(target.repo))
        host = _session_host(stack, request, settings, env, state_dir)
        built: list[tuple[Pipeline, Plan]] = []
        projects = [f"{trackers[target.repo].repo}:{key}" for target, key, _plan in plans]
        roles = _role_book(env, store, observer, projects, request, built)
        roles.watch(config_file)
        first_on: dict[object, Pipeline] = {}  # one lock per clone and per tracker client
        for target, key, plan in plans:
            tracker, work = trackers[target.repo], works[target.work.resolve()]
            pipeline = _pipeline(
                request, settings, env, plan, key, tracker, store, work, host, observer
            )
            pipeline.parts.git_lock = first_on.setdefault(work, pipeline).parts.git_lock
            pipeline.parts.tracker_lock = first_on.setdefault(tracker, pipeline).parts.tracker_lock
            for part in (pipeline.implementer, pipeline.parts.reviewer):
                client = getattr(part, "client", None)
                if isinstance(client, ModelClient):
                    roles.add_client(client)
            built.append((pipeline, plan))
        for role, entry in read_roles(config_file).items() if config_file else ():
            route_of(role, entry, env, str(config_file))  # a bad [roles] entry stops it now
        yield Launched(built, roles)


def clone_url_of(
    request: RunRequest, state_dir: Path, repo: str, env: Mapping[str, str]
) -> str | None:
    """Where `repo` is cloned from on the tracker the run uses, for the hint to a clone with
    no origin yet; None where it cannot be told (an API address of no known shape). On the
    local forge the repository is made now, if it is not there, so the push the hint asks
    for answers."""
    from urllib.parse import urlsplit

    from agent_harness.tracker.github import resolve_api_url

    if request.forge == "local":
        from agent_harness.forge.local import describe_repo, make_repo

        make_repo(state_dir, repo)  # the address said must answer a push
        return describe_repo(state_dir, repo).clone_url
    try:
        api = urlsplit(resolve_api_url(request.github_url, env))
    except UsageError:  # said when the tracker is opened; the hint needs no URL of its own
        return None
    if api.hostname == "api.github.com":
        return f"https://github.com/{repo}.git"
    if api.path.rstrip("/") == "/api/v3":  # GitHub Enterprise Server
        return f"{api.scheme}://{api.netloc.rpartition('@')[2]}/{repo}.git"
    return None


def refuse_other_forge(work: Path, state_dir: Path) -> None:
    """A clone whose `origin` is the local forge of another state folder was set up by a run
    started elsewhere: that forge holds its issues and pull requests. Refused before anything
    is made here (a second forge would be empty, and the hint to point the clone at it would
    leave the first one's work behind). For `run --forge local` as a person types it; the
    API's projects have state folders of their own under the forge's."""
    from agent_harness.forge.local import state_dir_of
    from agent_harness.git.naming import local_path
    from agent_harness.git.runner import run_git
    from agent_harness.plan.model import shell_word

    if not work.is_dir():
        return  # said where the clone is opened
    asked = run_git(work, "remote", "get-url", "--push", "origin", check=False)
    found = local_path(asked.stdout.strip()) if asked.ok else None
    home = state_dir_of(found) if found is not None else None
    if home is None or home.resolve() == state_dir.resolve():
        return
    where = (
        f"run it from {shell_word(str(home.parent))}"
        if home.name == ".agent-harness"
        else f"set state_dir to {shell_word(str(home))}"
    )
    raise UsageError(
        f"--work {work} pushes to the local forge in {home}, not to this folder's "
        f"({state_dir.resolve()}): {where}, where its issues and pull requests are"
    )


def _session_host(
    stack: ExitStack,
    request: RunRequest,
    settings: Settings,
    env: Mapping[str, str],
    state_dir: Path,
) -> SessionHost:
    """The remote session host the person named, else this machine's (closed with the run)."""
    from agent_harness.sessions.default import default_host, remote_host

    if request.session_host:
        remote = remote_host(request.session_host, env)
        stack.callback(remote.close)
        return remote
    return default_host(state_dir, settings.sessions.host)


def _role_book(
    env: Mapping[str, str],
    store: Store,
    observer: Observer | None,
    projects: list[str],
    request: RunRequest,
    built: list[tuple[Pipeline, Plan]],
) -> RoleBook:
    """The run's role routes; a change is a `roles_changed` event of every project, and a
    change that would make the reviewer the implementer's vendor is refused, as at start."""
    from agent_harness.review.model import route_vendor
    from agent_harness.review.verdict import check_vendors

    def keep_vendors_apart(routes: Mapping[str, Route]) -> None:
        reviewer = routes.get("reviewer")
        if reviewer is None or not built:
            return
        implementer = routes.get("implementer")
        made_by = route_vendor(implementer) if implementer else built[0][0].implementer.vendor
        check_vendors(made_by, route_vendor(reviewer), request.allow_same_vendor)

    def announce(change: RolesChanged) -> None:
        for project in projects:
            store.append_event(project, None, change)
        if observer is not None:
            observer(change.kind, "", change)

    return RoleBook(env, announce, keep_vendors_apart)


def _pipeline(
    request: RunRequest,
    settings: Settings,
    env: Mapping[str, str],
    plan: Plan,
    key: str,
    tracker: GitHubTracker,
    store: Store,
    repo: Any,
    host: SessionHost,
    observer: Observer | None,
) -> Pipeline:
    from agent_harness.pipeline.run import Pipeline
    from agent_harness.plan.model import check_command

    state_dir = Path(settings.state_dir).resolve()
    run_settings = run_settings_for(request, settings)

    def item_checks(item: WorkItem) -> list[str]:
        # The run's checks as the pipeline runs them (flags, else the config file), and
        # the item's own success check: the direct-API executor checks what CI will.
        own = check_command(item.success_check)
        return [*run_settings.checks, *([own] if own else [])]

    project = f"{tracker.repo}:{key}"
    implementer = build_implementer(project, request, host, env, settings, store, item_checks)
    reviewer = build_reviewer(project, request, host, env, state_dir, store, worker="reviewer")
    return Pipeline(
        plan=plan,
        plan_key=key,
        tracker=tracker,
        store=store,
        repo=repo,
        implementer=implementer,
        reviewer=reviewer,
        settings=run_settings,
        state_dir=state_dir,
        env=env,
        observer=observer,
        known_secrets=tracker.secret_values(),
    )
