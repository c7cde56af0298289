"""`agent-harness classify`: name the limit or failure a CLI agent's output reports."""

from __future__ import annotations

from typing import TextIO

import click


@click.command(
    epilog="""\b
Examples:
  claude -p "fix it" --output-format stream-json | agent-harness classify --agent claude
  codex exec --json "fix it" | agent-harness classify --agent codex
  agent-harness classify --agent codex codex-run.log --json
  agent-harness classify --agent gemini --exit-code 173 gemini-run.log
  aider --message "fix it" | agent-harness classify --agent aider
"""
)
@click.argument("log", type=click.File("r", encoding="utf-8", errors="replace"), default="-")
@click.option(
    "--agent",
    default="claude",
    show_default=True,
    help="claude, codex, gemini, aider, opencode, or any name.",
)
@click.option(
    "--exit-code",
    type=int,
    default=None,
    help="The agent's exit status, where it says something (Gemini CLI's is the HTTP status "
    "modulo 256: 173 is a 429).",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def classify(log: TextIO, agent: str, exit_code: int | None, as_json: bool) -> int:
    """Read an agent's output (a file or stdin) and say which failure it reports, what the
    failure policy does about it, and when a limit resets.

    Classes: burst, window, cap, overload, server, refusal, auth, context_too_long,
    bad_request (docs/PROVIDERS.md lists each CLI's outputs). Exits 0 when the output reports
    no failure, 4 when it does.
    """
    import time
    from datetime import UTC, datetime

    from agent_harness.cli.output import console, print_json, visible
    from agent_harness.failures import action_for
    from agent_harness.models.agent_output import agent_wait_base, classify_agent_output
    from agent_harness.models.failures import FailureKind

    def stamp(moment: float | None) -> str | None:
        return None if moment is None else datetime.fromtimestamp(moment, UTC).isoformat()

    now = time.time()
    failure = classify_agent_output(agent, log.read(), now=now, exit_code=exit_code)
    reset = failure.reset_at if failure else None
    reset_text = stamp(reset)
    # When a run would start the agent again: after a burst or a window, without the jitter.
    waits = failure is not None and failure.kind in (FailureKind.BURST, FailureKind.WINDOW)
    again = agent_wait_base(failure, now) if failure is not None and waits else None
    if as_json:
        print_json(
            None
            if failure is None
            else {
                "kind": failure.kind.value,
                "policy": action_for(failure.kind.value).value,
                "agent": failure.vendor,
                "message": failure.message,
                "reset_at": reset,
                "reset_at_utc": reset_text,
                "retry_after": failure.retry_after,
                "runs_again_at_utc": stamp(again),
                "raw_code": failure.raw_code,
            }
        )
    elif failure is None:
        console().print("no limit or failure reported")
    else:
        until = f"; resets {reset_text} (in {max(0, round(reset - now))}s)" if reset else ""
        console().print(f"{visible(failure.describe())}{until}", markup=False)
        console().print(f"policy: {action_for(failure.kind.value).value}", markup=False)
        if again is not None:
            console().print(
                f"a run starts the agent again from {stamp(again)} (in {round(again - now)}s)",
                markup=False,
            )
    return 0 if failure is None else 4
