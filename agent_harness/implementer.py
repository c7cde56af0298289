"""Who writes the code for an item: a CLI agent in a terminal session, or the direct-API executor.

Both sit behind one small Protocol, so the run pipeline treats them alike: it hands over the
worktree and the prompt and gets back an `ImplementResult` that says, in classified terms, how
the attempt ended (done, crashed, timed out, waiting on a rate-limit reset, refused, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent_harness.plan import WorkItem
    from agent_harness.providers import Failure
    from agent_harness.session_executor import AgentPreset
    from agent_harness.session_host import SessionHost
    from agent_harness.worktrees import Worktree

StateCallback = Callable[[str, str], None]


@dataclass(frozen=True)
class ImplementResult:
    """How one implementation attempt ended."""

    ok: bool  # the implementer finished normally; whether it changed anything is checked later
    state: str  # done | crashed | timeout | rate_limited | missing_binary | refused | blocked
    reason: str
    failure: Failure | None = None
    wait_until: float | None = None  # epoch seconds; set when a spent window should be waited out
    permanent: bool = False  # retrying will not help (a spent cap, a missing binary, ...)
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    output_tail: str = ""


class Implementer(Protocol):
    """Anything that can try to do a work item in a worktree."""

    name: str
    vendor: str

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
    ) -> ImplementResult: ...


class CliImplementer:
    """A CLI agent (Claude Code, Codex, ... or any command template) in a terminal session."""

    def __init__(
        self,
        host: SessionHost,
        preset: AgentPreset,
        env_source: Mapping[str, str],
        *,
        timeout_s: float,
        idle_s: float = 120.0,
        poll_s: float = 0.2,
        model: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.host = host
        self.preset = preset
        self.name = preset.name
        self.vendor = preset.vendor
        self.env_source = env_source
        self.timeout_s = timeout_s
        self.idle_s = idle_s
        self.poll_s = poll_s
        self.clock = clock

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
    ) -> ImplementResult:
        from agent_harness.providers import FailureKind
        from agent_harness.session_executor import AgentState, run_agent

        outcome = run_agent(
            self.host,
            self.preset,
            session=session,
            worktree=tree.path,
            prompt=prompt,
            state_dir=state_dir,
            env_source=self.env_source,
            timeout_s=self.timeout_s,
            idle_s=self.idle_s,
            poll_s=self.poll_s,
            model=self.model,
            on_state=lambda state, detail: on_state(str(state), detail),
        )
        state = AgentState(outcome.state)
        failure = outcome.failure
        if state is not AgentState.WAITING_FOR_INPUT:
            # The program has ended; its screen lives on in the log, the session need not.
            self.host.kill(session)

        def result(ok: bool, name: str, **extra: object) -> ImplementResult:
            return ImplementResult(
                ok=ok,
                state=name,
                reason=outcome.reason,
                failure=failure,
                output_tail=outcome.output_tail,
                wait_until=extra.get("wait_until"),  # type: ignore[arg-type]
                permanent=bool(extra.get("permanent", False)),
            )

        if state is AgentState.DONE:
            return result(True, "done")
        if state is AgentState.MISSING_BINARY:
            return result(False, "missing_binary", permanent=True)
        if state is AgentState.RATE_LIMITED and failure is not None:
            if failure.kind is FailureKind.CAP:
                return result(False, "rate_limited", permanent=True)
            wait = failure.reset_at or (self.clock() + (failure.retry_after or 60.0))
            return result(False, "rate_limited", wait_until=wait)
        if state is AgentState.TIMEOUT:
            return result(False, "timeout")
        if failure is not None and failure.kind in (
            FailureKind.REFUSAL,
            FailureKind.AUTH,
            FailureKind.CONTEXT_TOO_LONG,
        ):
            return result(False, "refused", permanent=True)
        return result(False, "crashed")


class ApiImplementer:
    """The direct-API executor: a planner and an implementer model editing the worktree."""

    def __init__(
        self,
        client: Any,
        *,
        vendor: str,
        name: str = "executor",
        item_checks: Callable[[WorkItem], list[str]] = lambda _item: [],
        check_env: Mapping[str, str] | None = None,
        budgets: Any = None,
    ) -> None:
        self.client = client
        self.vendor = vendor
        self.name = name
        self.item_checks = item_checks
        self.check_env = check_env
        self.budgets = budgets

    def implement(
        self,
        item: WorkItem,
        tree: Worktree,
        prompt: str,
        *,
        session: str,
        state_dir: Path,
        on_state: StateCallback,
    ) -> ImplementResult:
        from agent_harness.executor import Executor
        from agent_harness.model_client import EndpointParked, ModelCallFailed
        from agent_harness.providers import FailureKind

        state_dir.mkdir(parents=True, exist_ok=True)
        executor = Executor(
            self.client,
            budgets=self.budgets,
            events=lambda kind, payload: on_state(kind, str(payload.get("step", ""))),
            worker=session,
            item_checks=self.item_checks(item),
            check_env=self.check_env,
        )
        try:
            result = executor.execute(item, tree.path, state_dir / "plan.json", resume=True)
        except EndpointParked as exc:
            return ImplementResult(False, "rate_limited", str(exc), wait_until=exc.until)
        except ModelCallFailed as exc:
            kind = exc.failure.kind
            if kind is FailureKind.WINDOW:
                return ImplementResult(
                    False,
                    "rate_limited",
                    exc.message,
                    failure=exc.failure,
                    wait_until=exc.failure.reset_at,
                )
            never_retry = kind in (
                FailureKind.CAP,
                FailureKind.REFUSAL,
                FailureKind.AUTH,
                FailureKind.CONTEXT_TOO_LONG,
                FailureKind.BAD_REQUEST,
            )
            return ImplementResult(
                False,
                "refused" if never_retry else "crashed",
                exc.message,
                failure=exc.failure,
                permanent=never_retry,
            )
        if result.status == "done":
            return ImplementResult(
                True,
                "done",
                f"plan done in {result.calls} model calls",
                tokens_in=result.tokens_in,
                tokens_out=result.tokens_out,
            )
        return ImplementResult(
            False,
            "blocked",
            f"executor blocked at step {result.blocking_step}: {result.blocker}",
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
        )
