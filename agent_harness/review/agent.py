"""A reviewer that is a CLI agent preset (e.g. `--reviewer codex`), run in a terminal session.

The agent gets the review prompt in a scratch directory holding only the diff, never the
worktree or the implementer's transcript, and must print the JSON verdict. Its answer is read
from the CLI's own structured output when it has one (Claude Code's `result` event, Codex's
final `agent_message`), else from the plain output. A reviewer that did not answer (its
provider refused, limited or failed it, it timed out, it printed nothing) raises the same
classified errors a model reviewer's call does: a failure is never taken for a "no".
"""

from __future__ import annotations

import random
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agent_harness.agents.output import CliReport, final_texts, read_cli_report, usage_of
from agent_harness.errors import HarnessError
from agent_harness.git.runner import run_git
from agent_harness.models.agent_output import agent_wait_until
from agent_harness.models.client import ModelCallFailed
from agent_harness.models.failures import Failure, FailureKind
from agent_harness.models.parking import UNTIL_CLEARED, EndpointParked
from agent_harness.review.verdict import ReviewReply

if TYPE_CHECKING:
    from agent_harness.agents.presets import AgentPreset
    from agent_harness.agents.runner import AgentOutcome
    from agent_harness.sessions.protocol import SessionHost


# Limits the reviewer's provider will lift by itself: the review waits for them.
_WAIT_KINDS = frozenset({FailureKind.BURST, FailureKind.WINDOW})
# A review whose folder is this much older than the reviewer's timeout has no run watching it:
# a watched one is ended at the timeout.
ABANDONED_AFTER_S = 60.0


class CliReviewer:
    """A `review.Reviewer` that asks a CLI agent in a session for the verdict."""

    def __init__(
        self,
        host: SessionHost,
        preset: AgentPreset,
        env_source: Mapping[str, str],
        state_dir: Path,
        *,
        timeout_s: float = 600.0,
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
        self.env_source = env_source
        self.state_dir = state_dir
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.clock = clock
        self._swept = threading.Lock()
        self._swept_once = False

    @property
    def vendor(self) -> str:
        return self.preset.vendor

    def ask(self, prompt: str, system: str) -> ReviewReply:
        from agent_harness.agents.runner import AgentState, run_cli_agent

        self._close_abandoned()
        # Several workers review at once: every review gets its own session and scratch dir.
        review_id = uuid.uuid4().hex[:12]
        scratch = self.state_dir / "reviews" / f"review-{review_id}"
        session = f"ah-review-{self.preset.name}-{review_id}"
        workspace = scratch / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        (scratch / "session").write_text(session, encoding="utf-8")
        # Codex runs only inside a git repository (or with a flag other CLIs lack). A workspace
        # git cannot set up fails the review with git's reason, before any agent is started.
        run_git(workspace, "init", "-q", "--template=")  # no template: the user's may set a program
        text = f"{system}\n\n{prompt}\n\nAnswer with the JSON verdict only."
        ran = run_cli_agent(
            self.host,
            self.preset,
            session=session,
            workdir=workspace,
            prompt=text,
            state_dir=scratch,
            home=self.state_dir / "reviews" / "agent-home" / self.preset.name,
            env_source=self.env_source,
            timeout_s=self.timeout_s,
            idle_s=self.timeout_s,
            poll_s=self.poll_s,
            model=self.model,
            own_login=self.own_login,
            wall_clock=self.clock,
        )
        outcome, output = ran.outcome, ran.output
        shutil.rmtree(workspace, ignore_errors=True)
        report = read_cli_report(output)
        answers = final_texts(output)
        # A CLI without structured output answers in plain text, and never reports an error.
        text = "\n".join(answers) if answers else ("" if report.error else output)
        if AgentState(outcome.state) is not AgentState.DONE or not text.strip():
            raise self._did_not_answer(outcome, report)
        tokens_in, tokens_out, cost = usage_of(output)
        return ReviewReply(text, tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost)

    def _close_abandoned(self) -> None:
        """End the reviews a run that died left behind (once per reviewer): their agents, left
        running with nobody to read the answer, are stopped, and their workspaces and
        temporary folders removed. Their logs stay, as every review's do. Only a review
        older than the timeout plus `ABANDONED_AFTER_S` counts: a run still watching one
        would have ended it by then."""
        with self._swept:
            if self._swept_once:
                return
            self._swept_once = True
            from agent_harness.agents.setup import own_tmp_fallback, own_tmp_path, remove_own_tmp

            cutoff = time.time() - self.timeout_s - ABANDONED_AFTER_S
            for scratch in sorted((self.state_dir / "reviews").glob("review-*")):
                workspace = scratch / "workspace"
                try:
                    if not workspace.is_dir() or scratch.stat().st_mtime > cutoff:
                        continue
                    named = (scratch / "session").read_text(encoding="utf-8").strip()
                except (OSError, UnicodeDecodeError):
                    continue  # from before sessions were noted: its name is not known
                try:
                    self.host.kill(named)
                except (HarnessError, OSError):
                    continue  # a garbled name, a remote host out of reach: the next run's
                remove_own_tmp(own_tmp_path(scratch, named, self.env_source.get("TMPDIR")))
                remove_own_tmp(own_tmp_fallback(scratch, named))
                shutil.rmtree(workspace, ignore_errors=True)

    @property
    def parking_key(self) -> str:
        """Where this reviewer's spent window or cap is parked for every worker."""
        return f"agent:{self.preset.name}"

    def _did_not_answer(self, outcome: AgentOutcome, report: CliReport) -> Exception:
        """The classified error for a reviewer that gave no answer at all: its provider's
        failure when the output names one, else a server-like failure (it timed out, crashed
        or printed nothing), which waits and asks again rather than counting as a "no"."""
        from agent_harness.agents.runner import AgentState

        failure = outcome.failure
        state = AgentState(outcome.state)
        if failure is None:
            kind, code = FailureKind.SERVER, state.value
            if state is AgentState.MISSING_BINARY:
                kind = FailureKind.BAD_REQUEST  # no wait brings a missing program
            elif state is AgentState.DONE and report.error is None:
                code = "no_output"
            reason = outcome.reason if report.error is None else f"{outcome.reason}: {report.error}"
            failure = Failure(kind, self.preset.name, None, reason, raw_code=code)
        if failure.kind is FailureKind.CAP:
            # Spent credit: parked (by the run, in its store) until a person clears it.
            until = failure.reset_at or UNTIL_CLEARED
            return EndpointParked(self.parking_key, until, failure.describe(), failure)
        if failure.kind in _WAIT_KINDS:
            until = agent_wait_until(failure, self.clock(), self.rng)
            return EndpointParked(self.parking_key, until, failure.describe(), failure)
        return ModelCallFailed(failure, "reviewer", self.model or self.preset.name, 1)
