"""`agent-harness steps`: show a saved step plan of the direct-API executor and where it got to."""

from __future__ import annotations

from pathlib import Path

import click

from agent_harness.cli.output import PlanPath


@click.command(
    epilog="""\b
Examples:
  agent-harness steps .agent-harness/items/T1/plan.json
  agent-harness steps .agent-harness/items/T1/plan.json --json | jq '.steps[].status'
  agent-harness steps .agent-harness/items/backend--T1/plan.json   # plan key `backend`
"""
)
@click.argument("plan_file", type=PlanPath(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the whole saved plan as JSON.")
def steps(plan_file: Path, as_json: bool) -> int:
    """Print each step's status, attempts, check and result, and the blocker if any.

    Exits 0 when the plan is done, 3 when it is blocked, 1 while it is still running.
    """
    from rich.table import Table
    from rich.text import Text

    from agent_harness.cli.output import console, print_json, visible
    from agent_harness.cli.plan_view import TABLE_ROWS_MAX
    from agent_harness.implement.steps import load_plan

    plan = load_plan(plan_file)
    if as_json:
        print_json(plan.model_dump(mode="json"))
    else:
        # Text, not markup: a result that says `[bold]` is shown as written, never styled, and
        # control characters are spelt out.
        title = f"{visible(plan.goal)} — {plan.status}, revision {plan.revision}"
        table = Table(title=Text(title))
        for column in ("step", "status", "tries", "check", "result"):
            table.add_column(column, overflow="fold")
        for s in plan.steps[:TABLE_ROWS_MAX]:
            row = (s.id, s.status.value, str(s.attempts), s.success_check.describe(), s.result)
            table.add_row(*(Text(visible(cell or "")) for cell in row))
        out = console()
        out.print(table)
        if len(plan.steps) > TABLE_ROWS_MAX:
            more = len(plan.steps) - TABLE_ROWS_MAX
            out.print(f"… and {more} more steps (not drawn; --json lists every one)", markup=False)
        if plan.blocker:
            said = f"blocked at step {visible(str(plan.blocking_step))}: {visible(plan.blocker)}"
            out.print(said, markup=False)
    return {"done": 0, "blocked": 3}.get(plan.status, 1)
