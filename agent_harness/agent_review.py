"""A reviewer that is a CLI agent preset (e.g. `--reviewer codex`), run in a terminal session.

The agent gets the review prompt in a scratch directory holding only the diff, never the
worktree or the implementer's transcript, and must print the JSON verdict. Its answer is read
from the CLI's own structured output when it has one (Claude Code's `result` event, Codex's
final `agent_message`), else from the plain output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.review import ReviewReply

if TYPE_CHECKING:
    from agent_harness.session_executor import AgentPreset
    from agent_harness.session_host import SessionHost


def json_events(output: str) -> Iterator[dict[str, Any]]:
    """The JSON objects among an agent CLI's output lines (stream-json, --json); the rest of
    the output (progress, stderr) is skipped."""
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event


def final_texts(output: str) -> list[str]:
    """The agent's final words from JSONL output (Claude Code stream-json, Codex --json)."""
    texts: list[str] = []
    for event in json_events(output):
        if event.get("type") == "result" and isinstance(event.get("result"), str):
            texts.append(event["result"])
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") == "agent_message":
            text = item.get("text")
            if isinstance(text, str):
                texts.append(text)
    return texts


def usage_of(output: str) -> tuple[int | None, int | None, float | None]:
    """Tokens in/out and cost the CLI reported about itself; None where it did not say.

    Claude Code's final `result` event carries the run's totals; Codex reports usage per
    turn, which adds up."""
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    for event in json_events(output):
        usage = event.get("usage")
        total = event.get("type") == "result"
        if isinstance(usage, dict):
            got_in = usage.get("input_tokens")
            got_out = usage.get("output_tokens")
            if isinstance(got_in, int):
                tokens_in = got_in if total else (tokens_in or 0) + got_in
            if isinstance(got_out, int):
                tokens_out = got_out if total else (tokens_out or 0) + got_out
        if isinstance(event.get("total_cost_usd"), int | float):
            cost = float(event["total_cost_usd"])
    return tokens_in, tokens_out, cost


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
        from agent_harness.implementer import run_cli_agent
        from agent_harness.session_executor import AgentState

        # Several workers review at once: every review gets its own session and scratch dir.
        review_id = uuid.uuid4().hex[:12]
        scratch = self.state_dir / "reviews" / f"review-{review_id}"
        workspace = scratch / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        # Codex runs only inside a git repository (or with a flag other CLIs lack).
        subprocess.run(["git", "init", "-q", str(workspace)], capture_output=True, check=False)
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
