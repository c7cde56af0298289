"""Who writes the code for an item: a CLI agent in a terminal session, or the direct-API executor.

Both sit behind one small Protocol, so the run pipeline treats them alike: it hands over the
worktree and the prompt and gets back an `ImplementResult` that says, in classified terms, how
the attempt ended (done, crashed, timed out, waiting on a rate-limit reset, refused, ...).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_harness.agents.output import CliReport, read_cli_report
from agent_harness.agents.presets import CUSTOM
from agent_harness.agents.runner import AgentOutcome, AgentState, run_cli_agent
from agent_harness.failures import FailureClass, ends_the_item
from agent_harness.git.runner import GitError, git
from agent_harness.implement.protocol import EventCallback, ImplementResult, StateCallback
from agent_harness.models.agent_output import agent_wait_until
from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.parking import UNTIL_CLEARED
from agent_harness.secrets.redact import redact

if TYPE_CHECKING:
    from agent_harness.agents.presets import AgentPreset
    from agent_harness.git.worktrees import Worktree
    from agent_harness.plan.model import WorkItem
    from agent_harness.sessions.protocol import SessionHost


# Listing changes in one worktree is quick; a git that takes longer than this is stuck.
TREE_CHECK_TIMEOUT_S = 60.0


def _tree_changed(tree: Worktree) -> bool:
    """Whether the agent left any change in its worktree (files or commits).

    Raises `GitError` when git cannot tell: a broken worktree is not evidence of work.
    """
    status = git(tree.path, "status", "--porcelain", timeout_s=TREE_CHECK_TIMEOUT_S)
    head = git(tree.path, "rev-parse", "HEAD", timeout_s=TREE_CHECK_TIMEOUT_S)
    return bool(status.strip()) or head.strip() != tree.base_sha


def _with_last_words(reason: str, output_tail: str) -> str:
    """A failure's reason with the agent's last line of prose, which usually says why."""
    lines = (line.strip() for line in reversed(output_tail.splitlines()))
    last = next((line for line in lines if line), "")
    if last and not last.startswith("{") and last not in reason:
        reason = f"{reason}: {last[:200]}"
    return redact(reason)  # what an agent prints may hold a key: the reason is shown and kept


@dataclass(frozen=True)
class _Ending:
    """How an agent run is judged, before the usage figures are added."""

    ok: bool
    state: str
    reason: str
    wait_until: float | None = None
    permanent: bool = False


# Limits an agent could not get past that lift by themselves: the item waits for them.
_WAIT_KINDS = frozenset({FailureKind.BURST, FailureKind.WINDOW})


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
        rng: random.Random | None = None,
    ) -> None:
        self.rng = rng or random.Random()
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
        feedback: str | None = None,
        on_event: EventCallback | None = None,
        resume: bool = False,
        allowance_usd: float | None = None,
    ) -> ImplementResult:
        del allowance_usd  # paid by the run, not call by call: checked before it started
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
            wall_clock=self.clock,
            adopt_ended=resume,
        )
        outcome = ran.outcome
        report = read_cli_report(ran.output)
        try:
            ending = self._judge(outcome, report, tree)
        except GitError as exc:
            reason = f"cannot tell whether {self.name} changed anything: {exc.message}"
            ending = _Ending(False, "crashed", reason)
        return ImplementResult(
            ok=ending.ok,
            state=ending.state,
            reason=ending.reason,
            failure=outcome.failure,
            output_tail=outcome.output_tail,
            wait_until=ending.wait_until,
            permanent=ending.permanent,
            tokens_in=report.tokens_in,
            tokens_out=report.tokens_out,
            cost_usd=report.cost_usd,
        )

    def _judge(self, outcome: AgentOutcome, report: CliReport, tree: Worktree) -> _Ending:
        """Classify the run from its end state, the failure read from its output, and the
        agent's own report; checking the worktree only where the report casts doubt."""
        state = AgentState(outcome.state)
        failure = outcome.failure
        if state is AgentState.DONE:
            return self._judge_done(outcome, report, tree)
        if self._work_over_words(outcome, tree):
            # A command of the person's own, read with every CLI's sentences: a limit it printed
            # and then exited 0 from, having done work, is judged by the work (the checks and
            # the reviewer read it). Taken at its word, one such line parked every item.
            said = failure.describe() if failure is not None else "a limit"
            return _Ending(True, "done", f"{self.name} finished (exit 0) with changes; it "
                           f"also printed {said}, not taken as how it ended")  # fmt: skip
        reason = _with_last_words(outcome.reason, outcome.output_tail)
        if state is AgentState.MISSING_BINARY:
            permanent = ends_the_item(FailureClass.MISSING_PROGRAM)
            return _Ending(False, "missing_binary", reason, permanent=permanent)
        if state is AgentState.CRASHED and report.error is not None and failure is None:
            reason = f"{outcome.reason}: {report.error}"
        if failure is not None and (
            failure.kind in _WAIT_KINDS or failure.final or failure.kind is FailureKind.CAP
        ):
            return self._stopped_at(failure, reason)
        if state is AgentState.TIMEOUT:
            return _Ending(False, "timeout", reason)
        return _Ending(False, "crashed", reason)

    def _work_over_words(self, outcome: AgentOutcome, tree: Worktree) -> bool:
        """Whether a custom agent's exit 0 with a changed worktree outweighs a limit it printed
        (a known CLI's own limit reports are read as they are meant)."""
        custom = self.preset.name == CUSTOM
        limited = AgentState(outcome.state) is AgentState.RATE_LIMITED
        return custom and limited and outcome.exit_code == 0 and _tree_changed(tree)

    def _judge_done(self, outcome: AgentOutcome, report: CliReport, tree: Worktree) -> _Ending:
        """Exit 0 is success only when no report says otherwise, or the worktree shows work."""
        failure = outcome.failure
        if not (report.denials or failure or report.error) or _tree_changed(tree):
            return _Ending(True, "done", outcome.reason)
        if report.denials:
            # Exit 0 with nothing done: the CLI's permissions or sandbox stopped every edit,
            # and running it again as configured would stop them again.
            reason = f"{self.name} was not allowed to work: {'; '.join(report.denials[:5])}"
            permanent = ends_the_item(FailureClass.PERMISSION_DENIED)
            return _Ending(False, "refused", reason, permanent=permanent)
        if failure is not None:
            return self._stopped_at(
                failure, f"{self.name} exited 0 but reported: {failure.describe()}"
            )
        return _Ending(False, "crashed", f"{self.name} exited 0 but reported: {report.error}")

    def _stopped_at(self, failure: Failure, reason: str) -> _Ending:
        """The run ended at a provider failure: wait for a limit to lift (no attempt spent),
        end the item when the policy says another try cannot help, else try again."""
        if failure.kind is FailureKind.CAP:
            # Spent credit: no retry helps before its reset or a person raising it.
            return _Ending(
                False, "rate_limited", reason, wait_until=failure.reset_at or UNTIL_CLEARED
            )
        if failure.final:
            return _Ending(False, "refused", reason, permanent=True)
        if failure.kind in _WAIT_KINDS:
            wait = agent_wait_until(failure, self.clock(), self.rng)
            return _Ending(False, "rate_limited", reason, wait_until=wait)
        return _Ending(False, "crashed", reason)
