"""`agent-harness demo`: the whole loop offline, on the embedded forge."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_harness.cli.output import console, print_json
from agent_harness.errors import HarnessError

if TYPE_CHECKING:
    from rich.console import Console

    from agent_harness.demo.run import DemoReport


@click.command(
    epilog="""\b
Examples:
  agent-harness demo                      # state in .agent-harness/demo
  agent-harness demo --dir /tmp/ah-demo --json
  agent-harness demo --inception          # the plan made from a paragraph first
"""
)
@click.option(
    "--dir",
    "workdir",
    type=click.Path(path_type=Path),
    default=Path(".agent-harness/demo"),
    show_default=True,
    help="Where the demo keeps its forge, repository and database (recreated each run).",
)
@click.option(
    "--inception",
    is_flag=True,
    help="Make the plan first: a paragraph, one BLOCKING question, an approval, <dir>/PLAN.md.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def demo(workdir: Path, inception: bool, as_json: bool) -> int:
    """Run the example plan through the whole loop with no network and no account.

    Starts the embedded GitHub-compatible forge on loopback, pushes the example project,
    mirrors examples/PLAN.md to issues (twice: the second pass writes nothing), then runs the
    items with the scripted example agent in terminal sessions and a scripted reviewer,
    merging each approved pull request as a person would, until every item is merged.
    With --inception the plan is made first by `agent-harness inception`'s state machine and a
    scripted planner, from a paragraph through one BLOCKING question.
    """
    from rich.markup import escape

    from agent_harness.cli.demo_view import render_demo

    err = console(stderr=True)
    started = time.monotonic()
    report = _run(workdir, lambda message: err.print(f"[dim]· {escape(message)}[/dim]"), inception)
    audited = _audited(report.audit_db)
    if as_json:
        print_json(
            {
                "workdir": str(report.workdir),
                "repo": report.repo,
                "session_host": report.host,
                "syncs": [sync.as_json() for sync in report.syncs],
                "items": report.final_items(),
                "merged": [{"id": i, "pr": n} for i, n in report.merged],
                "reviews": report.reviews,
                "inception": None
                if report.inception is None
                else {
                    "session": report.inception.session,
                    "plan": str(report.inception.plan_path),
                    "refused": report.inception.refused,
                    "items": list(report.inception.items),
                },
                "ci_runs": report.ci_runs,
                "events": report.passes[-1].events if report.passes else 0,
                "audit": {
                    "database": str(report.audit_db) if report.audit_db else None,
                    "problem": report.audit_problem,
                    **{name: answer.model_dump(mode="json") for name, answer in audited.items()},
                },
            }
        )
    else:
        out = console()
        render_demo(out, report, time.monotonic() - started)
        _render_audit(out, report, audited)
    return 0 if all(row["state"] in ("merged", "done") for row in report.final_items()) else 4


def _run(workdir: Path, step: Any, inception: bool) -> Any:
    from agent_harness.demo.run import run_demo
    from agent_harness.pipeline.settings import RunInterrupted

    try:
        return run_demo(workdir, step=step, inception=inception)
    except RunInterrupted:
        # A run's hint ("run it again to take the items back") is not the demo's: the demo
        # makes its folder anew each time.
        raise DemoInterrupted(
            f"interrupted: the demo stopped; running it again starts over in {workdir}"
        ) from None


def _audited(target: Path | None) -> dict[str, Any]:
    """The demo's audited answers: what it cost and what it delivered."""
    if target is None:
        return {}
    from agent_harness.audit.cost import cost
    from agent_harness.audit.database import open_audit
    from agent_harness.audit.delivery import delivery

    with open_audit(str(target)) as audit:
        return {"cost": cost(audit), "delivery": delivery(audit)}


def _render_audit(out: Console, report: DemoReport, audited: dict[str, Any]) -> None:
    from agent_harness.cli.audit_view import render_cost, render_delivery
    from agent_harness.plan.model import shell_word

    if report.audit_problem:
        out.print(f"The audit could not be written: {report.audit_problem}", markup=False)
        return
    where = shell_word(str(report.audit_db))
    out.print(f"\nThe audit, recorded in {report.audit_db}:", markup=False)
    out.print(f"$ agent-harness audit cost --audit-db {where}", markup=False)
    render_cost(out, audited["cost"])
    out.print(f"$ agent-harness audit delivery --audit-db {where}", markup=False)
    render_delivery(out, audited["delivery"])
    out.print("Ask again any time with the same commands.", markup=False)


class DemoInterrupted(HarnessError):
    """The demo was interrupted (Ctrl-C)."""

    exit_code = 130
