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
    # Commands are printed below the table, each on one line: a table cell would fold or cut
    # them at the terminal's width, and a cut install command cannot be pasted.
    table = Table("agent", "vendor", "installed", "stdin")
    for row in rows:
        table.add_row(
            str(row["name"]),
            str(row["vendor"]),
            "yes" if row["installed"] else "no",
            str(row["stdin"]),
        )
    out = console()
    out.print(table)
    width = max(len(str(row["name"])) for row in rows)
    out.print("How each is run:")
    for row in rows:
        out.print(f"  {row['name']!s:<{width}}  {row['command']}", markup=False)
    missing = [row for row in rows if not row["installed"]]
    if missing:
        out.print("To install what is missing:")
        for row in missing:
            out.print(f"  {row['name']!s:<{width}}  {row['install']}", markup=False)
    return 0
