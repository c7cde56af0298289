"""`agent-harness plan`: parse a plan and show its items, or mirror them to a tracker."""

from __future__ import annotations

from pathlib import Path

import click

from agent_harness.cli.output import console, print_json


@click.command(
    epilog="""\b
Examples:
  agent-harness plan PLAN.md                    # table of items + lines not read
  agent-harness plan PLAN.md --json             # the same as JSON
  agent-harness plan PLAN.md --backlog backlog.json
  agent-harness plan backlog.json               # a backlog.json is accepted too
"""
)
@click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the parsed plan as JSON.")
@click.option(
    "--backlog",
    "backlog_out",
    type=click.Path(path_type=Path),
    help="Write backlog.json to this file ('-' for stdout).",
)
def plan(plan_file: Path, as_json: bool, backlog_out: Path | None) -> int:
    """Parse PLAN (markdown or backlog.json) and show its work items.

    Items are headings (`### T1: Title`), checkboxes (`- [ ] T1 Title`) or rows of a table
    with an `id` column. Lines that look like items or metadata but could not be read are
    listed with their line numbers. Duplicate ids and dependency cycles are refused (exit 3).
    """
    from agent_harness import backlog

    parsed = backlog.load_plan(plan_file)
    if backlog_out is not None:
        if str(backlog_out) == "-":
            click.echo(backlog.dumps(parsed), nl=False)
            return 0
        backlog.write_backlog(parsed, backlog_out)
    if as_json:
        print_json(backlog.to_backlog(parsed).model_dump(mode="json"))
        return 0
    from agent_harness.cli.plan_view import render_plan

    render_plan(console(), parsed)
    if backlog_out is not None:
        console().print(f"wrote {backlog_out}")
    return 0
