"""Who writes the code for an item: a CLI agent in a terminal session, or the direct-API executor.

Both sit behind one small Protocol, so the run pipeline treats them alike: it hands over the
worktree and the prompt and gets back an `ImplementResult` that says, in classified terms, how
the attempt ended (done, crashed, timed out, waiting on a rate-limit reset, refused, ...).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agent_harness.agents.output import read_cli_report
from agent_harness.agents.runner import run_cli_agent
from agent_harness.implement.protocol import ImplementResult, StateCallback

if TYPE_CHECKING:
    from agent_harness.agents.presets import AgentPreset
    from agent_harness.git.worktrees import Worktree
    from agent_harness.plan.model import WorkItem
    from agent_harness.sessions.protocol import SessionHost


def _tree_changed(tree: Worktree) -> bool:
    """Whether the agent left any change in its worktree (files or commits)."""
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=tree.path, capture_output=True, text=True
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tree.path, capture_output=True, text=True
    )
    return bool(status.stdout.strip()) or head.stdout.strip() != tree.base_sha


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
        own_login: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.own_login = own_login
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
        from agent_harness.agents.runner import AgentState
        from agent_harness.models.failures import FailureKind

        ran = run_cli_agent(
            self.host,
            self.preset,
            session=session,
            workdir=tree.path,
            prompt=prompt,
            state_dir=state_dir,
            home=Path(state_dir) / "agent-home" / self.preset.name,
            env_source=self.env_source,
            timeout_s=self.timeout_s,
            idle_s=self.idle_s,
            poll_s=self.poll_s,
            model=self.model,
            own_login=self.own_login,
            on_state=lambda state, detail: on_state(str(state), detail),
        )
        outcome, output = ran.outcome, ran.output
        state = AgentState(outcome.state)
        failure = outcome.failure
        report = read_cli_report(output)
        reason = outcome.reason
        if state is not AgentState.DONE:
            # A failure's reason carries the agent's last words: usually they say why.
            last = next(
                (
                    line.strip()
                    for line in reversed(outcome.output_tail.splitlines())
                    if line.strip()
                ),
                "",
            )
            if last and not last.startswith("{") and last not in reason:
                reason = f"{reason}: {last[:200]}"

        def result(ok: bool, name: str, **extra: object) -> ImplementResult:
            return ImplementResult(
                ok=ok,
                state=name,
                reason=reason,
                failure=failure,
                output_tail=outcome.output_tail,
                wait_until=extra.get("wait_until"),  # type: ignore[arg-type]
                permanent=bool(extra.get("permanent", False)),
                tokens_in=report.tokens_in,
                tokens_out=report.tokens_out,
                cost_usd=report.cost_usd,
            )

        if state is AgentState.DONE and report.denials and not _tree_changed(tree):
            # Exit 0 with nothing done: the CLI's permissions or sandbox stopped every edit,
            # and running it again as configured would stop them again.
            reason = f"{self.name} was not allowed to work: {'; '.join(report.denials[:5])}"
            return result(False, "refused", permanent=True)
        if state is AgentState.DONE and report.error is not None and not _tree_changed(tree):
            reason = f"{self.name} exited 0 but reported: {report.error}"
            return result(False, "crashed")
        if state is AgentState.CRASHED and failure is None and report.error_status == 429:
            # An API-key login gets no reset time in the output, only the 429: wait a while.
            reason = f"{self.name} hit a rate limit: {report.error}"
            return result(False, "rate_limited", wait_until=self.clock() + 60.0)
        if state is AgentState.CRASHED and report.error is not None:
            reason = f"{outcome.reason}: {report.error}"
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
