"""Plan and execute one work item over direct model calls, with every loop bounded.

The planner writes the item's plan as data: a few steps, each with a check a machine can run.
The implementer answers one step at a time with an edit for the diff-apply ladder, and the
verifier is the check itself, never a model's opinion. Failures are told apart by what fixes
them: a transient one retries the step, a permanent one buys a replan, a cap or bad key stops
the run. The plan is saved after every change, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from agent_harness.errors import ConfigError, HarnessError, InputError
from agent_harness.implement.patching import apply_edit
from agent_harness.models.client import ModelCallFailed
from agent_harness.models.failures import FailureKind
from agent_harness.models.parking import EndpointParked
from agent_harness.secrets.environment import without_secrets
from agent_harness.secrets.process import process_env

if TYPE_CHECKING:
    from agent_harness.models.wire import Completion
    from agent_harness.plan.model import WorkItem

EventSink = Callable[[str, dict[str, Any]], None]
RunStatus = Literal["done", "blocked"]

PLANNER = "planner"
IMPLEMENTER = "implementer"
NO_CHANGES = "NO CHANGES"
# Output of a failed check handed back to the implementer; the tail is where the error is.
FEEDBACK_CHARS = 2000


# ---------------------------------------------------------------------------------------------
# The plan as data


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


CheckKind = Literal["command", "file_exists", "regex", "item_checks"]


class Check(BaseModel):
    """How the verifier knows a step worked, without asking a model.

    `command`: a shell command run in the worktree must exit 0. `file_exists`: `path` exists.
    `regex`: `pattern` (Python syntax, multiline) matches the file at `path`. `item_checks`:
    every check command configured for the item exits 0.
    """

    kind: CheckKind
    command: str | None = None
    path: str | None = None
    pattern: str | None = None

    def describe(self) -> str:
        if self.kind == "command":
            return f"`{self.command}` exits 0"
        if self.kind == "file_exists":
            return f"{self.path} exists"
        if self.kind == "regex":
            return f"/{self.pattern}/ matches in {self.path}"
        return "the item's checks pass"


class Step(BaseModel):
    """One step of a plan. `attempts` counts verdicts (tries that ran to an outcome)."""

    id: str
    description: str
    success_check: Check
    status: StepStatus = StepStatus.PENDING
    attempts: int = 0
    result: str | None = Field(default=None, description="What it did, or why it failed.")
    depends_on: list[str] = Field(default_factory=list)


class Replan(BaseModel):
    """Why a plan was revised: the step that failed and the reason it gave."""

    revision: int
    failed_step: str
    reason: str


class StepPlan(BaseModel):
    """A work item's plan and where it got to; this is what `plan.json` holds."""

    goal: str
    steps: list[Step] = Field(default_factory=list)
    revision: int = Field(default=0, description="Replans made so far.")
    item_id: str = ""
    item_hash: str = ""
    status: Literal["running", "done", "blocked"] = "running"
    blocker: str | None = None
    blocking_step: str | None = None
    calls: int = Field(default=0, description="Model calls made for this plan, all runs.")
    tokens_in: int | None = Field(default=0, description="None once any answer left it unsaid.")
    tokens_out: int | None = 0
    replans: list[Replan] = Field(default_factory=list)

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def next_runnable(self) -> Step | None:
        done = {s.id for s in self.steps if s.status is StepStatus.DONE}
        for step in self.steps:
            if step.status is StepStatus.PENDING and all(d in done for d in step.depends_on):
                return step
        return None

    def dependents_of(self, step_id: str) -> list[Step]:
        """Every step that needs `step_id`, directly or through another step."""
        blocked = {step_id}
        found: list[Step] = []
        for step in self.steps:  # dependencies only point backwards, so one pass suffices
            if step.id not in blocked and blocked.intersection(step.depends_on):
                blocked.add(step.id)
                found.append(step)
        return found


@dataclass(frozen=True)
class Budgets:
    """Every loop's bound. `max_model_calls` counts calls over all runs of the plan."""

    max_attempts: int = 2  # verdicts per step per run before its failure counts as permanent
    max_replans: int = 2
    max_model_calls: int = 30
    min_steps: int = 3
    max_steps: int = 7
    check_timeout_s: float = 300.0
    context_chars: int = 40_000  # file contents shown to the implementer per step

    def __post_init__(self) -> None:
        at_least_one = ("max_attempts", "max_model_calls", "min_steps", "max_steps")
        for name in at_least_one:
            if getattr(self, name) < 1:
                raise ConfigError(f"executor budget {name} must be at least 1")
        if self.max_replans < 0:
            raise ConfigError("executor budget max_replans must not be negative")
        if self.min_steps > self.max_steps:
            raise ConfigError("executor budget min_steps is larger than max_steps")


@dataclass(frozen=True)
class Verdict:
    """The verifier's answer. `permanent` means retrying the same step cannot help."""

    passed: bool
    reason: str
    permanent: bool = False


@dataclass(frozen=True)
class ExecutionResult:
    """How a run ended. A blocked run carries the partial plan and what stopped it."""

    status: RunStatus
    plan: StepPlan
    blocker: str | None
    blocking_step: str | None
    calls: int
    tokens_in: int | None
    tokens_out: int | None


class ModelCaller(Protocol):
    """What the executor needs of a model client (`ModelClient` is one)."""

    def complete(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        worker: str,
        system: str | None = None,
        max_tokens: int = 1024,
    ) -> Completion: ...


# ---------------------------------------------------------------------------------------------
# Errors and stops


class PlanFileUnreadable(InputError):
    """A saved step plan could not be read."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(f"cannot read the step plan {path}: {why}")


class PlanAnswerInvalid(HarnessError):
    """The planner's answer is not a plan the executor can run."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("; ".join(self.reasons))


class _RunBlocked(Exception):
    # Control flow only: caught in execute() and turned into a blocked ExecutionResult.
    def __init__(self, blocker: str, step: str | None) -> None:
        super().__init__(blocker)
        self.blocker = blocker
        self.step = step


class _ModelTrouble(Exception):
    # A model call failed in a way that ends this try but not the run.
    def __init__(self, reason: str, permanent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


# ---------------------------------------------------------------------------------------------
# Reading the planner's answer


_FENCED = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[^\n]*\n(.*?)```", re.DOTALL)


def _json_candidates(text: str) -> list[Any]:
    """JSON values in a model's answer: fenced blocks first, then any object or array in prose."""
    found: list[Any] = []
    for match in _FENCED.finditer(text):
        with contextlib.suppress(ValueError):
            found.append(json.loads(match.group(2)))
    decoder = json.JSONDecoder()
    index = 0
    while index < len(text):
        if text[index] in "{[":
            try:
                value, end = decoder.raw_decode(text, index)
            except ValueError:
                index += 1
                continue
            found.append(value)
            index = end  # a value's insides are not candidates of their own
        else:
            index += 1
    return found


def parse_plan_answer(text: str) -> list[Mapping[str, Any]]:
    """The raw steps of a planner answer: `{"steps": [...]}` or a bare list, fenced or amid
    prose. Raises `PlanAnswerInvalid` when there is none."""
    for value in _json_candidates(text):
        # Some models wrap the plan once more, e.g. {"plan": {"steps": [...]}}.
        wrapped = (
            [v for v in value.values() if isinstance(v, dict)] if isinstance(value, dict) else []
        )
        for candidate in [value, *wrapped]:
            steps = candidate.get("steps") if isinstance(candidate, dict) else candidate
            if isinstance(steps, list) and steps and all(isinstance(s, dict) for s in steps):
                return steps
    if not text.strip():
        raise PlanAnswerInvalid(["the answer was empty"])
    raise PlanAnswerInvalid(
        ['the answer holds no JSON object with a non-empty "steps" list of step objects']
    )


def _safe_relative(path: str, worktree: Path) -> str | None:
    """Why `path` cannot be checked inside the worktree, or None when it can."""
    if not path.strip():
        return "names no path"
    if Path(path).is_absolute():
        return f"names the absolute path {path!r}; paths are relative to the repository root"
    root = worktree.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        return f"names {path!r}, which is outside the repository"
    return None


def read_check(raw: Any, worktree: Path, have_item_checks: bool) -> Check | str:
    """A planner's check as a `Check`, or the reason it is not observable."""
    if raw is None or raw == "" or raw == {}:
        return "has no success check"
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("$ ") and text[2:].strip():
            raw = {"kind": "command", "command": text[2:].strip()}
        elif text.lower() in ("item_checks", "the item's checks pass"):
            raw = {"kind": "item_checks"}
        else:
            return (
                f"has the check {text[:80]!r}, which is prose, not something a machine can run "
                "(use a command, file_exists, regex or item_checks object)"
            )
    if not isinstance(raw, dict):
        return "has a check that is neither an object nor a string"
    kind = raw.get("kind") or raw.get("type")
    if kind is None:
        if "command" in raw:
            kind = "command"
        elif "pattern" in raw:
            kind = "regex"
        elif "path" in raw:
            kind = "file_exists"
    if kind == "command":
        command = raw.get("command")
        if not isinstance(command, str) or not command.strip():
            return "has a command check with no command"
        return Check(kind="command", command=command.strip())
    if kind in ("file_exists", "regex"):
        path = raw.get("path")
        if not isinstance(path, str):
            return f"has a {kind} check with no path"
        problem = _safe_relative(path, worktree)
        if problem:
            return f"has a {kind} check that {problem}"
        if kind == "file_exists":
            return Check(kind="file_exists", path=path)
        pattern = raw.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            return "has a regex check with no pattern"
        try:
            re.compile(pattern, re.MULTILINE)
        except re.error as exc:
            return f"has a regex check whose pattern does not compile ({exc})"
        return Check(kind="regex", path=path, pattern=pattern)
    if kind == "item_checks":
        if not have_item_checks:
            return "uses item_checks, but this item has no check commands configured"
        return Check(kind="item_checks")
    return f"has a check of unknown kind {kind!r}"


def read_steps(
    raw_steps: Sequence[Mapping[str, Any]],
    worktree: Path,
    *,
    kept_ids: Sequence[str] = (),
    first_number: int = 1,
    min_steps: int = 3,
    max_steps: int = 7,
    have_item_checks: bool = False,
) -> list[Step]:
    """Turn a planner's raw steps into `Step`s numbered from `first_number`.

    Every problem is collected, so the planner hears all of them at once; any problem raises
    `PlanAnswerInvalid`. `depends_on` may name the answer's own ids or `kept_ids` (done steps);
    left out, a step depends on the one before it, the cautious reading.
    """
    problems: list[str] = []
    if not min_steps <= len(raw_steps) <= max_steps:
        problems.append(f"the plan has {len(raw_steps)} steps; write {min_steps} to {max_steps}")
    local: dict[str, str] = {}
    for position, raw in enumerate(raw_steps):
        label = str(raw.get("id", position + 1)).strip() or str(position + 1)
        if label in local:
            problems.append(f"step id {label!r} is used twice")
        local[label] = str(first_number + position)
    steps: list[Step] = []
    for position, raw in enumerate(raw_steps):
        new_id = str(first_number + position)
        label = str(raw.get("id", position + 1)).strip() or str(position + 1)
        description = raw.get("description") or raw.get("title") or raw.get("step")
        if not isinstance(description, str) or not description.strip():
            problems.append(f"step {label} has no description")
            description = ""
        check_raw = raw.get("success_check", raw.get("check"))
        check = read_check(check_raw, worktree, have_item_checks)
        if isinstance(check, str):
            problems.append(f"step {label} {check}")
        deps_raw = raw.get("depends_on")
        earlier = {local[k] for k in list(local)[:position]} | set(kept_ids)
        depends: list[str] = []
        if deps_raw is None:
            if position > 0:
                depends = [str(first_number + position - 1)]
        elif not isinstance(deps_raw, list):
            problems.append(f"step {label} has depends_on that is not a list")
        else:
            for dep in deps_raw:
                name = str(dep).strip()
                resolved = local.get(name, name if name in kept_ids else None)
                if resolved is None:
                    problems.append(f"step {label} depends on unknown step {name!r}")
                elif resolved not in earlier:
                    problems.append(f"step {label} depends on {name!r}, which is not before it")
                elif resolved not in depends:
                    depends.append(resolved)
        if not isinstance(check, str):
            steps.append(
                Step(
                    id=new_id,
                    description=description.strip(),
                    success_check=check,
                    depends_on=depends,
                )
            )
    if problems:
        raise PlanAnswerInvalid(problems)
    return steps


# ---------------------------------------------------------------------------------------------
# The verifier


def _tail(text: str, limit: int = FEEDBACK_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def run_command(command: str, worktree: Path, env: Mapping[str, str], timeout_s: float) -> Verdict:
    """Run one check command through the shell; exit 0 passes.

    The command gets its own process group so a timeout kills what it started too. Exit 126
    and 127 (not executable, not found) are permanent: the check itself is broken.
    """
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=worktree,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return Verdict(False, f"`{command}` could not start: {exc.strerror}", permanent=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        shown = _tail(out.decode("utf-8", "replace"))
        return Verdict(False, f"`{command}` did not finish in {timeout_s:g}s. Output:\n{shown}")
    output = _tail(out.decode("utf-8", "replace"))
    if proc.returncode == 0:
        return Verdict(True, f"`{command}` exited 0")
    permanent = proc.returncode in (126, 127)
    why = " (the command cannot run)" if permanent else ""
    return Verdict(
        False,
        f"`{command}` exited {proc.returncode}{why}. Output:\n{output or '(none)'}",
        permanent=permanent,
    )


def verify(
    check: Check,
    worktree: Path,
    *,
    item_checks: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300.0,
) -> Verdict:
    """Decide a step mechanically from its check; no model is asked."""
    environment = process_env() if env is None else env
    if check.kind == "command":
        return run_command(check.command or "", worktree, environment, timeout_s)
    if check.kind == "item_checks":
        if not item_checks:
            return Verdict(False, "the item has no check commands configured", permanent=True)
        for command in item_checks:
            verdict = run_command(command, worktree, environment, timeout_s)
            if not verdict.passed:
                return verdict
        return Verdict(True, f"all {len(item_checks)} item check(s) passed")
    path = check.path or ""
    target = worktree / path
    if check.kind == "file_exists":
        if target.exists():
            return Verdict(True, f"{path} exists")
        return Verdict(False, f"{path} does not exist")
    try:
        text = target.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return Verdict(False, f"{path} cannot be read ({exc.strerror or 'missing'})")
    if re.search(check.pattern or "", text, re.MULTILINE):
        return Verdict(True, f"/{check.pattern}/ matches in {path}")
    return Verdict(False, f"/{check.pattern}/ does not match anywhere in {path}")


# ---------------------------------------------------------------------------------------------
# Persistence


def save_plan(plan: StepPlan, path: Path) -> None:
    """Write the plan so a reader sees the old file or the new one, never half of either."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(plan.model_dump_json(indent=2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_plan(path: Path) -> StepPlan:
    try:
        return StepPlan.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanFileUnreadable(path, exc.strerror or str(exc)) from exc
    except ValidationError as exc:
        raise PlanFileUnreadable(path, f"not a step plan ({exc.error_count()} problems)") from exc


# ---------------------------------------------------------------------------------------------
# Prompts


PLANNER_SYSTEM = """\
You plan one work item for a coding agent that edits a git repository. Answer with JSON only:
{"steps": [{"id": "1", "description": "...", "check": {...}, "depends_on": []}, ...]}

Write 3 to 7 steps. Each step is one change the implementer can make in a single edit, and
each has a check that a machine runs in the repository root to know the step worked:
  {"kind": "command", "command": "<shell command; exit 0 means done>"}
  {"kind": "file_exists", "path": "<path relative to the repository root>"}
  {"kind": "regex", "path": "<relative path>", "pattern": "<Python regex found in the file>"}
  {"kind": "item_checks"}   (the item's own check commands pass; only if any are listed)
A check in prose ("looks good", "code is clean") is refused. depends_on lists the ids of
earlier steps this one needs; a step whose dependency fails is never run.
"""

IMPLEMENTER_SYSTEM = f"""\
You carry out one step of a plan in a git repository. Answer with the edit only, as one of:
a unified diff; SEARCH/REPLACE blocks, each after a line naming its file; or whole files, each
as a line naming the path followed by a fenced block with the complete new content.
Change only what the step needs. If the step needs no change, answer {NO_CHANGES}.
"""


def _item_brief(item: WorkItem, item_checks: Sequence[str]) -> str:
    lines = [f"Work item {item.id}: {item.title}"]
    if item.body.strip():
        lines += ["", item.body.strip()]
    if item.success_check:
        lines += ["", f"The item is done when: {item.success_check}"]
    if item.files:
        lines += ["", "It may change only: " + ", ".join(item.files)]
    if item_checks:
        lines += ["", "Its check commands (item_checks): " + "; ".join(item_checks)]
    return "\n".join(lines)


def _tracked_files(worktree: Path) -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"],
            cwd=worktree,
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in out.decode("utf-8", "replace").splitlines() if line]


# ---------------------------------------------------------------------------------------------
# The loop


@dataclass
class _Run:
    item: WorkItem
    worktree: Path
    plan_path: Path
    plan: StepPlan
    env: dict[str, str]
    verify_first: set[str] = field(default_factory=set)


class Executor:
    """Runs work items with a planner and an implementer, bounded by `Budgets`.

    `item_checks` are the item's own check commands (for `item_checks` steps). `check_env` is
    the environment checks run in (default: this process's), always without the API key
    variables of the client's routes, which must not reach code the model wrote.
    """

    def __init__(
        self,
        client: ModelCaller,
        *,
        budgets: Budgets | None = None,
        events: EventSink | None = None,
        worker: str = "executor",
        item_checks: Sequence[str] = (),
        check_env: Mapping[str, str] | None = None,
        planner_role: str = PLANNER,
        implementer_role: str = IMPLEMENTER,
        max_tokens: int = 4096,
    ) -> None:
        self._client = client
        self.budgets = budgets or Budgets()
        self._events = events or (lambda kind, payload: None)
        self._worker = worker
        self._item_checks = tuple(item_checks)
        self._check_env = check_env
        self._planner_role = planner_role
        self._implementer_role = implementer_role
        self._max_tokens = max_tokens

    # -- entry -----------------------------------------------------------------------------

    def execute(
        self, item: WorkItem, worktree: Path, plan_path: Path, *, resume: bool = False
    ) -> ExecutionResult:
        """Plan (or, with `resume`, reload the plan of) `item` and run it to done or blocked.

        Running out of any budget returns a blocked result with the partial plan; only an
        unreadable plan file on resume, or an exception from the event sink, is raised.
        """
        worktree = Path(worktree)
        plan_path = Path(plan_path)
        run = _Run(item, worktree, plan_path, self._fresh_plan(item), self._environment())
        if resume and plan_path.exists():
            saved = load_plan(plan_path)
            if saved.item_id == item.id and saved.item_hash == item.content_hash:
                run.plan = saved
                self._resume(run)
            else:
                self._emit(run, "executor.plan_discarded", reason="the item changed since")
        try:
            if not run.plan.steps:
                self._make_plan(run)
            self._loop(run)
        except _RunBlocked as stop:
            plan = run.plan
            plan.status, plan.blocker, plan.blocking_step = "blocked", stop.blocker, stop.step
            for step in plan.steps:
                if step.status is StepStatus.RUNNING:
                    step.status = StepStatus.PENDING  # it got no verdict; a resume retries it
            self._save(run)
            self._emit(run, "executor.blocked", blocker=stop.blocker, step=stop.step)
        return self._result(run.plan)

    def _fresh_plan(self, item: WorkItem) -> StepPlan:
        goal = f"{item.id}: {item.title}"
        return StepPlan(goal=goal, item_id=item.id, item_hash=item.content_hash)

    def _environment(self) -> dict[str, str]:
        # Steps run commands a model wrote: never with the tracker token or any other secret.
        env = without_secrets(process_env() if self._check_env is None else self._check_env)
        routes = getattr(self._client, "routes", None)
        if isinstance(routes, Mapping):
            for route in routes.values():
                env.pop(str(getattr(route, "api_key_env", "")), None)
        return env

    def _resume(self, run: _Run) -> None:
        plan = run.plan
        plan.status, plan.blocker, plan.blocking_step = "running", None, None
        for step in plan.steps:
            if step.status is StepStatus.RUNNING:
                # Killed mid-step: its edit may have landed, so the check decides first.
                step.status = StepStatus.PENDING
                run.verify_first.add(step.id)
        self._save(run)
        done = [s.id for s in plan.steps if s.status is StepStatus.DONE]
        self._emit(run, "executor.resumed", done=done)

    def _result(self, plan: StepPlan) -> ExecutionResult:
        status: RunStatus = "done" if plan.status == "done" else "blocked"
        return ExecutionResult(
            status,
            plan,
            plan.blocker,
            plan.blocking_step,
            plan.calls,
            plan.tokens_in,
            plan.tokens_out,
        )

    def _loop(self, run: _Run) -> None:
        plan = run.plan
        while True:
            step = plan.next_runnable()
            if step is not None:
                self._run_step(run, step)
                continue
            failed = [s for s in plan.steps if s.status is StepStatus.FAILED]
            if not failed:
                plan.status = "done"
                self._save(run)
                self._emit(run, "executor.done", steps=len(plan.steps))
                return
            first = failed[0]
            if plan.revision >= self.budgets.max_replans:
                raise _RunBlocked(
                    f"step {first.id} ({first.description}) failed: {first.result}; "
                    f"no replans left ({self.budgets.max_replans} allowed)",
                    first.id,
                )
            self._replan(run, failed)

    # -- planning --------------------------------------------------------------------------

    def _make_plan(self, run: _Run) -> None:
        files = _tracked_files(run.worktree)
        listing = "\n".join(files[:300]) + ("\n…" if len(files) > 300 else "")
        prompt = (
            f"{_item_brief(run.item, self._item_checks)}\n\n"
            f"Files in the repository:\n{listing or '(none)'}\n\n"
            "Number the steps from 1."
        )
        steps = self._ask_planner(run, prompt, kept_ids=(), first_number=1, replanning=False)
        run.plan.steps = steps
        self._save(run)
        self._emit(run, "executor.plan", steps=[s.model_dump(mode="json") for s in steps])

    def _replan(self, run: _Run, failed: list[Step]) -> None:
        plan = run.plan
        kept = [s for s in plan.steps if s.status is StepStatus.DONE]
        first_number = 1 + max((int(s.id) for s in plan.steps if s.id.isdigit()), default=0)
        done_text = "\n".join(f"- {s.id}: {s.description} -> {s.result}" for s in kept)
        failed_text = "\n".join(
            f"- {s.id}: {s.description} (check: {s.success_check.describe()})\n"
            f"  failed after {s.attempts} attempt(s): {s.result}"
            for s in failed
        )
        prompt = (
            f"{_item_brief(run.item, self._item_checks)}\n\n"
            f"Steps already done (keep them; depends_on may name their ids):\n"
            f"{done_text or '(none)'}\n\n"
            f"Steps that failed, and why:\n{failed_text}\n\n"
            "Write the remaining steps so the item gets done another way: do not repeat what "
            f"failed. Number the new steps from {first_number}."
        )
        try:
            steps = self._ask_planner(
                run,
                prompt,
                kept_ids=[s.id for s in kept],
                first_number=first_number,
                replanning=True,
            )
        except _RunBlocked as stop:
            raise _RunBlocked(stop.blocker, failed[0].id) from None
        plan.revision += 1
        plan.replans += [
            Replan(revision=plan.revision, failed_step=s.id, reason=s.result or "") for s in failed
        ]
        plan.steps = kept + steps
        self._save(run)
        self._emit(
            run,
            "executor.replan",
            failed=[s.id for s in failed],
            steps=[s.model_dump(mode="json") for s in steps],
        )

    def _ask_planner(
        self,
        run: _Run,
        prompt: str,
        *,
        kept_ids: Sequence[str],
        first_number: int,
        replanning: bool,
    ) -> list[Step]:
        """Ask for a plan; a bad answer or a passing model hiccup gets one more ask."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        problem = ""
        for ask in (1, 2):
            try:
                answer = self._call(run, self._planner_role, PLANNER_SYSTEM, messages, None)
            except _ModelTrouble as trouble:
                if trouble.permanent or ask == 2:
                    raise _RunBlocked(f"planning failed: {trouble.reason}", None) from None
                problem = trouble.reason
                continue
            try:
                return read_steps(
                    parse_plan_answer(answer.text),
                    run.worktree,
                    kept_ids=kept_ids,
                    first_number=first_number,
                    min_steps=1 if replanning else self.budgets.min_steps,
                    max_steps=self.budgets.max_steps,
                    have_item_checks=bool(self._item_checks),
                )
            except PlanAnswerInvalid as exc:
                problem = exc.message
                self._emit(run, "executor.plan_rejected", reasons=list(exc.reasons), ask=ask)
                messages = [
                    *messages,
                    {"role": "assistant", "content": answer.text},
                    {
                        "role": "user",
                        "content": f"That plan was refused: {problem}. Answer again with the "
                        "whole plan as JSON only.",
                    },
                ]
        raise _RunBlocked(f"plan refused after 2 answers: {problem}", None)

    # -- one step --------------------------------------------------------------------------

    def _run_step(self, run: _Run, step: Step) -> None:
        plan = run.plan
        if step.id in run.verify_first:
            run.verify_first.discard(step.id)
            verdict = self._verify(run, step.success_check)
            if verdict.passed:
                self._finish(run, step, f"already passed its check on resume: {verdict.reason}")
                return
        verdict = Verdict(False, "not tried")
        model_stuck = False
        for tries in range(1, self.budgets.max_attempts + 1):
            step.status = StepStatus.RUNNING
            self._save(run)
            self._emit(run, "executor.step_started", step=step.id, attempt=step.attempts + 1)
            try:
                verdict = self._attempt(run, step, feedback=step.result if tries > 1 else None)
                model_stuck = False
            except _ModelTrouble as trouble:
                verdict = Verdict(False, trouble.reason, trouble.permanent)
                model_stuck = not trouble.permanent
            step.attempts += 1
            if verdict.passed:
                self._finish(run, step, verdict.reason)
                return
            step.result = verdict.reason
            if verdict.permanent or tries == self.budgets.max_attempts:
                break
            step.status = StepStatus.PENDING
            self._save(run)
            self._emit(
                run,
                "executor.step_retry",
                step=step.id,
                attempt=step.attempts,
                reason=verdict.reason,
            )
        if model_stuck:
            # Replanning would only call the same struggling endpoint again: stop and say so.
            raise _RunBlocked(f"step {step.id}: the model kept failing: {verdict.reason}", step.id)
        step.status = StepStatus.FAILED
        skipped = plan.dependents_of(step.id)
        for dependent in skipped:
            dependent.status = StepStatus.SKIPPED
            dependent.result = f"skipped: it needs step {step.id}, which failed"
        self._save(run)
        self._emit(
            run,
            "executor.step_failed",
            step=step.id,
            attempt=step.attempts,
            reason=verdict.reason,
            permanent=verdict.permanent,
        )
        for dependent in skipped:
            self._emit(run, "executor.step_skipped", step=dependent.id, because=step.id)

    def _finish(self, run: _Run, step: Step, result: str) -> None:
        step.status, step.result = StepStatus.DONE, result
        self._save(run)
        self._emit(run, "executor.step_done", step=step.id, attempt=step.attempts, result=result)

    def _attempt(self, run: _Run, step: Step, feedback: str | None) -> Verdict:
        prompt = self._implementer_prompt(run, step, feedback)
        answer = self._call(
            run,
            self._implementer_role,
            IMPLEMENTER_SYSTEM,
            [{"role": "user", "content": prompt}],
            step.id,
        )
        applied_note = "no change made"
        if answer.text.strip() != NO_CHANGES:
            applied = apply_edit(run.worktree, answer.text)
            if not applied.applied:
                return Verdict(False, f"the edit did not apply: {applied.reason}")
            applied_note = f"edited {', '.join(applied.files)} (rung {applied.rung})"
        verdict = self._verify(run, step.success_check)
        if verdict.passed:
            return Verdict(True, f"{applied_note}; {verdict.reason}")
        return Verdict(
            False, f"{applied_note}, but the check failed: {verdict.reason}", verdict.permanent
        )

    def _verify(self, run: _Run, check: Check) -> Verdict:
        return verify(
            check,
            run.worktree,
            item_checks=self._item_checks,
            env=run.env,
            timeout_s=self.budgets.check_timeout_s,
        )

    def _implementer_prompt(self, run: _Run, step: Step, feedback: str | None) -> str:
        plan = run.plan
        done = [f"- {s.id}: {s.description}" for s in plan.steps if s.status is StepStatus.DONE]
        parts = [
            _item_brief(run.item, self._item_checks),
            "Steps done so far:\n" + ("\n".join(done) or "(none)"),
            f"Your step ({step.id}): {step.description}\n"
            f"It is done when: {step.success_check.describe()}",
        ]
        if feedback:
            parts.append(f"Your previous attempt at this step failed: {feedback}")
        parts.append(self._file_context(run, step))
        return "\n\n".join(parts)

    def _file_context(self, run: _Run, step: Step) -> str:
        """The files the step most likely touches, within `context_chars`."""
        files = _tracked_files(run.worktree)
        wanted: list[str] = []
        text = (
            f"{step.description} {step.success_check.path or ''} {step.success_check.command or ''}"
        )
        for path in files:
            named = path in text
            scoped = any(fnmatch.fnmatch(path, glob) for glob in run.item.files)
            if (named or scoped) and path not in wanted:
                wanted.append(path)
        budget = self.budgets.context_chars
        shown: list[str] = []
        for path in wanted:
            try:
                content = (run.worktree / path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if len(content) > budget:
                continue
            budget -= len(content)
            shown.append(f"{path}\n```\n{content}```")
        listing = "\n".join(files[:200]) or "(none)"
        body = "\n\n".join(shown) if shown else "(no file is obviously involved)"
        return f"Files in the repository:\n{listing}\n\nCurrent contents:\n{body}"

    # -- the model -------------------------------------------------------------------------

    def _call(
        self,
        run: _Run,
        role: str,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        step_id: str | None,
    ) -> Completion:
        plan = run.plan
        if plan.calls >= self.budgets.max_model_calls:
            raise _RunBlocked(
                f"the model call budget is spent ({plan.calls} of "
                f"{self.budgets.max_model_calls} calls)",
                step_id,
            )
        plan.calls += 1  # counted before the call: a call that fails still cost a call
        try:
            answer = self._client.complete(
                role, messages, worker=self._worker, system=system, max_tokens=self._max_tokens
            )
        except ModelCallFailed as exc:
            kind = exc.failure.kind
            if kind in (FailureKind.CAP, FailureKind.AUTH, FailureKind.WINDOW):
                raise _RunBlocked(exc.message, step_id) from None
            raise _ModelTrouble(exc.message, permanent=not exc.failure.retryable) from None
        except EndpointParked as exc:
            raise _RunBlocked(exc.message, step_id) from None
        except HarnessError as exc:  # no route, no key, a dead transport: nothing to retry
            raise _RunBlocked(exc.message, step_id) from None
        plan.tokens_in = (
            None
            if plan.tokens_in is None or answer.tokens_in is None
            else plan.tokens_in + answer.tokens_in
        )
        plan.tokens_out = (
            None
            if plan.tokens_out is None or answer.tokens_out is None
            else plan.tokens_out + answer.tokens_out
        )
        return answer

    # -- record ----------------------------------------------------------------------------

    def _save(self, run: _Run) -> None:
        save_plan(run.plan, run.plan_path)

    def _emit(self, run: _Run, kind: str, **payload: Any) -> None:
        self._events(kind, {"item": run.item.id, "revision": run.plan.revision, **payload})


def execute(
    item: WorkItem,
    worktree: Path,
    plan_path: Path,
    *,
    client: ModelCaller,
    budgets: Budgets | None = None,
    events: EventSink | None = None,
    item_checks: Sequence[str] = (),
    resume: bool = False,
    worker: str = "executor",
) -> ExecutionResult:
    """Plan and run `item` in `worktree`, saving the plan at `plan_path`; see `Executor`."""
    executor = Executor(
        client, budgets=budgets, events=events, item_checks=item_checks, worker=worker
    )
    return executor.execute(item, worktree, plan_path, resume=resume)


__all__ = [
    "Budgets",
    "Check",
    "ExecutionResult",
    "Executor",
    "ModelCaller",
    "PlanAnswerInvalid",
    "PlanFileUnreadable",
    "Replan",
    "Step",
    "StepPlan",
    "StepStatus",
    "Verdict",
    "execute",
    "load_plan",
    "parse_plan_answer",
    "read_check",
    "read_steps",
    "save_plan",
    "verify",
]
