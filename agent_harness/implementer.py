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
from typing import TYPE_CHECKING, Protocol

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
        clock: Callable[[], float] = time.time,
    ) -> None:
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
            on_state=lambda state, detail: on_state(str(state), detail),
        )
        state = AgentState(outcome.state)
        failure = outcome.failure

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
