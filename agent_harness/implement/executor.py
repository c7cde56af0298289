"""Plan and execute one work item over direct model calls, with every loop bounded.

The planner writes the item's plan as data (`steps`): a few steps, each with a check a machine
can run. The implementer answers one step at a time with an edit for the patching ladder, and
the verifier is the check itself, never a model's opinion. Failures are told apart by what
fixes them: a transient one retries the step, a permanent one buys a replan, a cap or a bad
key stops the run; the plan is saved after every change, so a killed run resumes where it was.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from agent_harness.errors import ConfigError, HarnessError
from agent_harness.git.runner import GitError, git
from agent_harness.implement.command_env import command_environment
from agent_harness.implement.patching import apply_edit
from agent_harness.implement.plan_answer import PlanAnswerInvalid, parse_plan_answer, read_steps
from agent_harness.implement.prompts import (
    IMPLEMENTER_SYSTEM,
    NO_CHANGES,
    PLANNER_SYSTEM,
    item_brief,
)
from agent_harness.implement.steps import (
    Check,
    Replan,
    Step,
    StepPlan,
    StepStatus,
    load_plan,
    save_plan,
)
from agent_harness.implement.verifier import Verdict, verify
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
# Listing a worktree's files is quick; a git that takes longer than this is stuck.
LIST_FILES_TIMEOUT_S = 30.0


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
class ExecutionResult:
    """How a run ended. A blocked run carries the partial plan and what stopped it."""

    status: RunStatus
    plan: StepPlan
    blocker: str | None
    blocking_step: str | None
    calls: int
    tokens_in: int | None
    tokens_out: int | None
    permanent: bool = False  # blocked for good: another run of this plan cannot get further
    cost_usd: float | None = None  # this run's calls by the price list; None if one is unknown
    over_budget: bool = False  # stopped before a call that might have passed its allowance


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

    def worst_case_usd(
        self,
        role: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int = 1024,
    ) -> float | None:
        """The most such a call could cost; None when its price is not known."""
        ...


class _RunBlocked(Exception):
    # Control flow only: caught in execute() and turned into a blocked ExecutionResult.
    def __init__(
        self, blocker: str, step: str | None, permanent: bool = False, over_budget: bool = False
    ) -> None:
        super().__init__(blocker)
        self.blocker = blocker
        self.step = step
        self.permanent = permanent
        self.over_budget = over_budget


class _ModelTrouble(Exception):
    # A model call failed in a way that ends this try but not the run.
    def __init__(self, reason: str, permanent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


def _tracked_files(worktree: Path, step_id: str | None) -> list[str]:
    """The worktree's files as git sees them (tracked, plus untracked but not ignored).

    A git that cannot answer blocks the run: planning or editing blind would only spend
    model calls on a worktree that is broken.
    """
    try:
        out = git(worktree, "ls-files", "-co", "--exclude-standard", timeout_s=LIST_FILES_TIMEOUT_S)
    except GitError as exc:
        raise _RunBlocked(f"cannot list the worktree's files: {exc.message}", step_id) from None
    return [line for line in out.splitlines() if line]


@dataclass
class _Run:
    item: WorkItem
    worktree: Path
    plan_path: Path
    plan: StepPlan
    env: dict[str, str]  # the item's own checks run in it (a person wrote them)
    command_env: dict[str, str]  # a command the model wrote runs in it, as an agent would
    verify_first: set[str] = field(default_factory=set)


class Executor:
    """Runs work items with a planner and an implementer, bounded by `Budgets`.

    `item_checks` are the item's own check commands (for `item_checks` steps). `check_env` is
    the environment checks run in (default: this process's), always without the API key
    variables of the client's routes, which must not reach code the model wrote. A running
    check's process group is written to `group_file` (the item's `check.group`, which its next
    attempt reads to end a check a killed run left behind).
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
        group_file: Path | None = None,
        planner_role: str = PLANNER,
        implementer_role: str = IMPLEMENTER,
        max_tokens: int = 4096,
    ) -> None:
        self._client = client
        self.spent_usd: float | None = 0.0  # what the calls of the current run cost, by price
        self.budgets = budgets or Budgets()
        self._events = events or (lambda kind, payload: None)
        self._worker = worker
        self._item_checks = tuple(item_checks)
        self._check_env = check_env
        self._group_file = group_file
        self._planner_role = planner_role
        self._implementer_role = implementer_role
        self._max_tokens = max_tokens
        self._allowance: float | None = None  # see execute()
        self._bounded_spend = self._next_worst = 0.0

    # -- entry -----------------------------------------------------------------------------

    def execute(
        self,
        item: WorkItem,
        worktree: Path,
        plan_path: Path,
        *,
        resume: bool = False,
        feedback: str | None = None,
        allowance_usd: float | None = None,
    ) -> ExecutionResult:
        """Plan (or, with `resume`, reload the plan of) `item` and run it to done or blocked.

        `feedback` is what the finished work was sent back for (a failed check, a reviewer's
        no): a finished plan is revised with it, never resumed past it. Running out of any
        budget returns a blocked result with the partial plan; an unreadable plan file on
        resume, a parked endpoint (`EndpointParked`), or an exception from the event sink is
        raised. With `allowance_usd`, no call is made that could take this run's spend past
        it (the result is then blocked, `over_budget`), nor one whose price is not known.
        """
        self.spent_usd = 0.0  # this run's calls (a caller reads it after an exception too)
        self._allowance = allowance_usd
        self._bounded_spend = 0.0  # what the allowance is checked against (see below)
        self._next_worst = 0.0  # the worst case of the call about to be made
        env = self._environment()
        command_env = command_environment(env, Path(plan_path).parent / "command-home")
        run = _Run(item, Path(worktree), Path(plan_path), self._fresh_plan(item), env, command_env)
        sent_back = None
        if resume and run.plan_path.exists():
            saved = load_plan(run.plan_path)
            if saved.item_id == item.id and saved.item_hash == item.content_hash:
                sent_back = feedback if saved.status == "done" else None
                run.plan = saved
                self._resume(run)
            else:
                self._emit(run, "executor.plan_discarded", reason="the item changed since")
        try:
            if not run.plan.steps:
                self._make_plan(run)
            elif sent_back:
                self._revise(run, [], f"The finished work was sent back:\n{sent_back}")
            self._loop(run)
        except _RunBlocked as stop:
            self._blocked(run, stop)
            return replace(
                self._result(run.plan), permanent=stop.permanent, over_budget=stop.over_budget
            )
        return self._result(run.plan)

    def _blocked(self, run: _Run, stop: _RunBlocked) -> None:
        plan = run.plan
        plan.status, plan.blocker, plan.blocking_step = "blocked", stop.blocker, stop.step
        for step in plan.steps:
            if step.status is StepStatus.RUNNING:
                step.status = StepStatus.PENDING  # it got no verdict; a resume retries it
        self._save(run)
        self._emit(
            run, "executor.blocked", blocker=stop.blocker, step=stop.step, permanent=stop.permanent
        )

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
            cost_usd=self.spent_usd,
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
            failed_text = "\n".join(
                f"- {s.id}: {s.description} (check: {s.success_check.describe()})\n"
                f"  failed after {s.attempts} attempt(s): {s.result}"
                for s in failed
            )
            self._revise(run, failed, f"Steps that failed, and why:\n{failed_text}")

    # -- planning --------------------------------------------------------------------------

    def _make_plan(self, run: _Run) -> None:
        files = _tracked_files(run.worktree, None)
        listing = "\n".join(files[:300]) + ("\n…" if len(files) > 300 else "")
        prompt = (
            f"{item_brief(run.item, self._item_checks)}\n\n"
            f"Files in the repository:\n{listing or '(none)'}\n\n"
            "Number the steps from 1."
        )
        steps = self._ask_planner(run, prompt, kept_ids=(), first_number=1, replanning=False)
        run.plan.steps = steps
        self._save(run)
        self._emit(run, "executor.plan", steps=[s.model_dump(mode="json") for s in steps])

    def _revise(self, run: _Run, failed: list[Step], why: str) -> None:
        """Revise the plan: steps that failed, or finished work sent back (`failed` empty),
        get new steps that do it another way. Each revision spends one of `max_replans`;
        with none left the run is blocked for good (another run would find the same)."""
        plan = run.plan
        first = failed[0] if failed else None
        if plan.revision >= self.budgets.max_replans:
            what = f"step {first.id} ({first.description}) failed: {first.result}" if first else why
            raise _RunBlocked(
                f"{what}; no replans left ({self.budgets.max_replans} allowed)",
                first.id if first else None,
                permanent=True,
            )
        kept = [s for s in plan.steps if s.status is StepStatus.DONE]
        first_number = 1 + max((int(s.id) for s in plan.steps if s.id.isdigit()), default=0)
        done_text = "\n".join(f"- {s.id}: {s.description} -> {s.result}" for s in kept)
        prompt = (
            f"{item_brief(run.item, self._item_checks)}\n\n"
            f"Steps already done (keep them; depends_on may name their ids):\n"
            f"{done_text or '(none)'}\n\n{why}\n\n"
            "Write the remaining steps so the item gets done another way: do not repeat what "
            f"failed. Number the new steps from {first_number}."
        )
        kept_ids = [s.id for s in kept]
        try:
            steps = self._ask_planner(
                run, prompt, kept_ids=kept_ids, first_number=first_number, replanning=True
            )
        except _RunBlocked as stop:  # a spent budget stays permanent
            step = first.id if first else stop.step
            raise _RunBlocked(stop.blocker, step, permanent=stop.permanent) from None
        plan.revision += 1
        reasons = [(s.id, s.result or "") for s in failed] or [("sent back", why)]
        plan.replans += [
            Replan(revision=plan.revision, failed_step=i, reason=r) for i, r in reasons
        ]
        plan.steps, plan.status = kept + steps, "running"
        self._save(run)
        self._emit(
            run,
            "executor.replan",
            failed=[s.id for s in failed],
            steps=[s.model_dump(mode="json") for s in steps],
            sent_back=None if failed else why,
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
            command_env=run.command_env,
            timeout_s=self.budgets.check_timeout_s,
            group_file=self._group_file,
        )

    def _implementer_prompt(self, run: _Run, step: Step, feedback: str | None) -> str:
        plan = run.plan
        done = [f"- {s.id}: {s.description}" for s in plan.steps if s.status is StepStatus.DONE]
        parts = [
            item_brief(run.item, self._item_checks),
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
        files = _tracked_files(run.worktree, step.id)
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
        self._keep_within_allowance(role, system, messages, step_id)
        if plan.calls >= self.budgets.max_model_calls:
            raise _RunBlocked(
                f"the model call budget is spent ({plan.calls} of "
                f"{self.budgets.max_model_calls} calls)",
                step_id,
                permanent=True,  # counted over every run of the plan: the next finds it spent
            )
        plan.calls += 1  # counted before the call: a call that fails still cost a call
        self._save(run)  # and kept before it: a run killed during the call counts it too
        try:
            answer = self._client.complete(
                role, messages, worker=self._worker, system=system, max_tokens=self._max_tokens
            )
        except ModelCallFailed as exc:
            kind = exc.failure.kind
            if kind in (FailureKind.CAP, FailureKind.AUTH, FailureKind.WINDOW):
                raise _RunBlocked(exc.message, step_id) from None
            raise _ModelTrouble(exc.message, permanent=not exc.failure.retryable) from None
        except EndpointParked:
            # A spent window or cap: the item waits for the endpoint (the plan is saved, its
            # step left running so a resume checks it first); not a blocked plan.
            raise
        except HarnessError as exc:  # no route, no key, a dead transport: nothing to retry
            raise _RunBlocked(exc.message, step_id) from None
        self.spent_usd = _known_sum(self.spent_usd, answer.cost_usd)
        known = answer.cost_usd
        self._bounded_spend += known if known is not None else self._next_worst
        plan.tokens_in = _known_sum(plan.tokens_in, answer.tokens_in)
        plan.tokens_out = _known_sum(plan.tokens_out, answer.tokens_out)
        return answer

    def _keep_within_allowance(
        self, role: str, system: str, messages: Sequence[Mapping[str, Any]], step_id: str | None
    ) -> None:
        """Check before paying: refuse a call that could take the run past its allowance."""
        if self._allowance is None:
            return
        worst = self._client.worst_case_usd(
            role, messages, system=system, max_tokens=self._max_tokens
        )
        if worst is None:
            raise _RunBlocked(
                f"the {role} model's price is not known, so the budget of "
                f"${self._allowance:.4f} left for this run could not be kept; no call was made",
                step_id,
                permanent=True,
            )
        spent = self._bounded_spend  # a call that reported no usage: at its worst case
        self._next_worst = worst
        if spent + worst > self._allowance + 1e-9:
            raise _RunBlocked(
                f"${spent:.4f} spent of the ${self._allowance:.4f} left for this run, and the "
                f"next {role} call may cost up to ${worst:.4f}",
                step_id,
                over_budget=True,
            )

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
    "ExecutionResult",
    "Executor",
    "ModelCaller",
    "execute",
]


N = TypeVar("N", int, float)


def _known_sum(total: N | None, more: N | None) -> N | None:
    """`total + more`, or None once either is unknown: a sum with a part left unsaid is no
    figure (never counted as if that part were 0)."""
    return None if total is None or more is None else total + more
