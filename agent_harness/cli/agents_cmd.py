"""`agent-harness agents`: the CLI agent presets, their command lines and what they may see."""

from __future__ import annotations

import click


@click.command(
    epilog="""\b
Examples:
  agent-harness agents            # which agents are installed, and how each is run
  agent-harness agents --json     # the same, for scripts
"""
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def agents(as_json: bool) -> int:
    """List the agent presets: vendor, exact command line, stdin, and whether it is on PATH.

    Each agent sees only the basic variables and its own vendor's key(s); see docs/SESSIONS.md.
    """
    import os

    from rich.table import Table

    from agent_harness.agents.presets import describe_presets
    from agent_harness.cli.output import console, print_json

    rows = describe_presets(os.environ.get("PATH"))
    if as_json:
        print_json(rows)
        return 0
    table = Table("agent", "vendor", "installed", "command", "stdin")
    for row in rows:
        installed = "yes" if row["installed"] else f"no — {row['install']}"
        table.add_row(
            *(str(row[k]) for k in ("name", "vendor")),
            installed,
            str(row["command"]),
            str(row["stdin"]),
        )
    console().print(table)
    return 0
