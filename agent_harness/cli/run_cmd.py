"""`agent-harness run`: work a plan's items into reviewed pull requests."""

from __future__ import annotations

import re
from pathlib import Path

import click

from agent_harness.cli.output import console, from_env, print_json
from agent_harness.cli.tracker_opts import checked_plan_key, checked_repo, tracker_options

HOST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


def checked_host_id(value: str | None) -> str | None:
    """A host id names workers (HOST/w1), so it may hold no '/' and stays short and plain."""
    if value is not None and not HOST_ID.match(value):
        raise click.BadParameter(
            f"{value!r}: use up to 40 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit (e.g. build-2)",
            param_hint="--host-id",
        )
    return value


@click.command(
    epilog="""\b
Examples:
  agent-harness run --repo owner/name --work ./target --plan PLAN.md \\
      --check 'pytest -q' --agent claude --reviewer openai:gpt-4.1 --workers 3
  agent-harness run --repo me/app --forge local --work . --plan PLAN.md \\
      --agent 'mytool --prompt-file {prompt_file}' --reviewer codex --only T3 --yes
  agent-harness run --repo me/app --forge local --work . --plan A.md --plan B.md \\
      --workers 2 --max-workers 3 --agent claude --reviewer codex
  agent-harness run ... --json > events.jsonl        # events as JSON lines
  agent-harness run ... --merge-when-green --max-pr-rounds 2
\b
Exit codes: 0 every item ended well (or waits on nothing); 4 an item failed or was skipped,
or needs a person (its issue could not be made); 75 none did, but some wait for a time (a
spent cap, a limit's reset, a parked endpoint): run again later; 5 an agent touched the
default branch.
"""
)
@click.option(
    "--repo",
    metavar="OWNER/NAME",
    callback=checked_repo,
    help="Repository on the tracker (needed unless each [[projects]] entry names one).",
)
@click.option(
    "--work",
    "work",
    type=click.Path(path_type=Path),
    help="Your clone of the repository; worktrees are made from it.",
)
@click.option(
    "--plan",
    "plan_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="The plan (markdown, backlog.json or Taskmaster's tasks.json). Repeat it to run "
    "several plans in one fleet, "
    "one project each (key: the file name), fair between them. Without it: the config "
    "file's [[projects]].",
)
@click.option(
    "--check",
    "checks",
    multiple=True,
    metavar="CMD",
    help="A check command run in the worktree (repeatable; cheapest first).",
)
@click.option(
    "--agent",
    metavar="PRESET|TEMPLATE",
    help="CLI agent: claude, codex, gemini, aider, opencode, or a command template.",
)
@click.option(
    "--implementer",
    metavar="VENDOR:MODEL",
    help="Use the direct-API executor with this model instead of a CLI agent.",
)
@click.option(
    "--reviewer",
    required=True,
    metavar="VENDOR:MODEL|PRESET",
    help="The reviewer: a model (openai:gpt-4.1) or an agent preset (codex).",
)
@click.option("--model", help="Model for the CLI agent preset (passed as its --model).")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Agents at once per plan.",
)
@click.option(
    "--max-workers",
    type=click.IntRange(1, 256),
    help="Agents at once over all plans; a free slot goes to each plan in turn.",
)
@click.option("--only", "only", multiple=True, metavar="ID", help="Run only these items.")
@click.option(
    "--plan-key",
    metavar="KEY",
    callback=checked_plan_key,
    help="Plan key of the issues (default: file stem; a Kiro spec's .kiro/specs/SPEC/tasks.md: "
    "SPEC).",
)
@click.option("--max-attempts", type=click.IntRange(1, 100), help="Attempts per item.")
@click.option("--agent-timeout", "agent_timeout", type=float, help="Seconds per agent run.")
@click.option(
    "--allow-same-vendor",
    is_flag=True,
    help="Let a reviewer of the implementer's vendor review (flagged in the PR).",
)
@click.option(
    "--own-login",
    is_flag=True,
    help="Let CLI agents use your own HOME and login (default: a throwaway home per "
    "item, with only the vendor's API key passed in).",
)
@click.option(
    "--db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_DB"),
    help="Database URL (env AGENT_HARNESS_DB).",
)
@click.option(
    "--session-host",
    metavar="URL",
    help="Run agents on a remote session host (token in AGENT_HARNESS_SESSION_TOKEN); it must "
    "see this machine's paths (the worktrees).",
)
@click.option(
    "--audit-db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_AUDIT_DB"),
    help="Audit database the run is recorded in (default audit.sqlite beside the database; "
    "env AGENT_HARNESS_AUDIT_DB). If it cannot be written, the run goes on and the drop is "
    "counted.",
)
@click.option("--approve", is_flag=True, help="Show the items that would run and ask first.")
@click.option("--yes", is_flag=True, help="With --approve: do not ask (unattended runs).")
@click.option("--json", "as_json", is_flag=True, help="Emit events as JSON lines.")
@click.option(
    "--merge-when-green",
    is_flag=True,
    help="Merge an approved, green, conflict-free pull request of ours (branch protection, "
    "405 and 409 are reported, never retried blindly).",
)
@click.option(
    "--max-pr-rounds",
    type=click.IntRange(0, 100),
    help="Rounds an open pull request may send its item back (default 3).",
)
@click.option(
    "--host-id",
    callback=lambda _ctx, _param, value: checked_host_id(value),
    help="This host's name in the workers' names (HOST/w1) and in `work`; several hosts on "
    "one PostgreSQL queue each take their own. Default: the machine's name and state dir.",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="End when this host has nothing left to claim, instead of waiting for items another "
    "host holds (to take them over if its leases lapse).",
)
@tracker_options
def run(**options: object) -> int:
    """Work the plan's ready items: worktree, agent, checks, review, pull request.

    Each item is claimed under a lease, worked in its own worktree on branch
    agent-harness/<id>-<slug>, checked (cheapest first), reviewed by a model of another vendor,
    and delivered as a pull request that closes its issue. Kill it at any time and run it
    again: nothing finished is redone and no second pull request is opened.
    """
    from agent_harness.cli.run_view import execute_run

    return execute_run(options, console(), console(stderr=True), print_json)
