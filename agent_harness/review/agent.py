"""A reviewer that is a CLI agent preset (e.g. `--reviewer codex`), run in a terminal session.

The agent gets the review prompt in a scratch directory holding only the diff, never the
worktree or the implementer's transcript, and must print the JSON verdict. Its answer is read
from the CLI's own structured output when it has one (Claude Code's `result` event, Codex's
final `agent_message`), else from the plain output.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agent_harness.agents.output import final_texts, usage_of
from agent_harness.git.runner import run_git
from agent_harness.review.verdict import ReviewReply

if TYPE_CHECKING:
    from agent_harness.agents.presets import AgentPreset
    from agent_harness.sessions.protocol import SessionHost


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
    ) -> None:
        self.model = model
        self.own_login = own_login
        self.host = host
        self.preset = preset
        self.env_source = env_source
        self.state_dir = state_dir
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.clock = clock

    @property
    def vendor(self) -> str:
        return self.preset.vendor

    def ask(self, prompt: str, system: str) -> ReviewReply:
        from agent_harness.agents.runner import AgentState, run_cli_agent

        # Several workers review at once: every review gets its own session and scratch dir.
        review_id = uuid.uuid4().hex[:12]
        scratch = self.state_dir / "reviews" / f"review-{review_id}"
        workspace = scratch / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        # Codex runs only inside a git repository (or with a flag other CLIs lack). A workspace
        # git cannot set up fails the review with git's reason, before any agent is started.
        run_git(workspace, "init", "-q")
        text = f"{system}\n\n{prompt}\n\nAnswer with the JSON verdict only."
        ran = run_cli_agent(
            self.host,
            self.preset,
            session=f"ah-review-{self.preset.name}-{review_id}",
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
        )
        outcome, output = ran.outcome, ran.output
        answers = final_texts(output)
        tokens_in, tokens_out, cost = usage_of(output)
        shutil.rmtree(workspace, ignore_errors=True)
        if AgentState(outcome.state) is not AgentState.DONE and not answers:
            return ReviewReply(text=f"(the reviewer agent ended: {outcome.reason})")
        return ReviewReply(
            text="\n".join(answers) if answers else output,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost,
            model=None,
        )
