"""`agent-harness demo`: the whole loop offline, on the embedded forge."""

from __future__ import annotations

from pathlib import Path

import click

from agent_harness.cli.output import console, print_json


@click.command(
    epilog="""\b
Examples:
  agent-harness demo                      # state in .agent-harness/demo
  agent-harness demo --dir /tmp/ah-demo --json
"""
)
@click.option(
    "--dir",
    "workdir",
    type=click.Path(path_type=Path),
    default=Path(".agent-harness/demo"),
    show_default=True,
    help="Where the demo keeps its forge and repositories (recreated each run).",
)
@click.option("--plan", "plan_path", type=click.Path(path_type=Path), help="Another plan to use.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def demo(workdir: Path, plan_path: Path | None, as_json: bool) -> int:
    """Run the example plan through the harness with no network and no account.

    Starts the embedded GitHub-compatible forge on loopback, mirrors examples/PLAN.md to
    issues, then mirrors it again to show that an unchanged plan costs no writes.
    """
    from agent_harness.cli.plan_view import render_sync
    from agent_harness.demo import run_demo

    err = console(stderr=True)
    report = run_demo(workdir, plan_path, step=lambda message: err.print(f"[dim]· {message}[/dim]"))
    if as_json:
        print_json(
            {
                "workdir": str(report.workdir),
                "repo": report.repo,
                "syncs": [sync.as_json() for sync in report.syncs],
            }
        )
        return 0
    out = console()
    for sync in report.syncs:
        render_sync(out, sync)
    out.print(f"state kept in {report.workdir} (forge data, issues); run again to start over")
    return 0
