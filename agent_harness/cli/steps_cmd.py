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
"""
)
@click.argument("plan_file", type=PlanPath(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the whole saved plan as JSON.")
def steps(plan_file: Path, as_json: bool) -> int:
    """Print each step's status, attempts, check and result, and the blocker if any.

    Exits 0 when the plan is done, 3 when it is blocked, 1 while it is still running.
    """
    from rich.table import Table

    from agent_harness.cli.output import console, print_json
    from agent_harness.implement.steps import load_plan

    plan = load_plan(plan_file)
    if as_json:
        print_json(plan.model_dump(mode="json"))
    else:
        table = Table(title=f"{plan.goal} — {plan.status}, revision {plan.revision}")
        for column in ("step", "status", "tries", "check", "result"):
            table.add_column(column, overflow="fold")
        for s in plan.steps:
            row = (s.id, s.status.value, str(s.attempts), s.success_check.describe(), s.result)
            table.add_row(*(cell or "" for cell in row))
        console().print(table)
        if plan.blocker:
            console().print(f"blocked at step {plan.blocking_step}: {plan.blocker}", markup=False)
    return {"done": 0, "blocked": 3}.get(plan.status, 1)
