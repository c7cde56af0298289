"""`agent-harness control`: pause, drain or resume a running run's workers, or show them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from agent_harness.cli.output import checked_name, console, from_env, print_json

if TYPE_CHECKING:
    from agent_harness.queue.control import Control
    from agent_harness.store.database import Store


@click.command(
    epilog="""\b
Examples:
  agent-harness control                          # what each project was asked, what it does
  agent-harness control pause                    # every project a run works now
  agent-harness control drain --project me/app:B # finish what is in flight, then end
  agent-harness control resume --json            # carry on; print the new state as JSON
"""
)
@click.argument("verb", required=False, type=click.Choice(["pause", "drain", "resume"]))
@click.option(
    "--project",
    metavar="PROJECT",
    callback=checked_name,
    help="Only this project (owner/repo:plan), running or not (asked ahead of its next run); "
    "default: every project a run works now, and for resume also any still paused.",
)
@click.option(
    "--db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_DB"),
    help="Database the run uses (default .agent-harness/harness.sqlite; env AGENT_HARNESS_DB).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the state as JSON.")
def control(verb: str | None, project: str | None, db: str | None, as_json: bool) -> int:
    """Steer a running `agent-harness run` through its database, or show its state.

    pause: claim nothing new; work in flight carries on. drain: finish the work in flight,
    claim nothing new, and let the run end. resume: claim again. A run follows within a
    second; work in flight is never interrupted. With no verb, show each project's asked
    state and what its running workers last reported.
    """
    from agent_harness.cli.output import open_database
    from agent_harness.queue.control import VERBS, get_control, set_control

    with open_database(db, must_exist=True) as store:
        if verb is None:
            controls = get_control(store, project)
        else:
            new = _unheld(store, project)
            controls = set_control(
                store, VERBS[verb], project, by="agent-harness control", ahead=True
            )
            if new:
                click.echo(f"warning: {new}", err=True)
    if as_json:
        print_json([c.model_dump(mode="json") for c in controls])
        return 0
    _render(controls, verb)
    return 0


def _unheld(store: Store, project: str | None) -> str | None:
    """A project asked ahead of its first run is taken as named, so a typo (`me/app:plan` for
    `me/app:PLAN`) would pause nothing: said, with the projects this database holds, each time
    until the project has items or is registered (what was asked of it makes it no more real)."""
    from agent_harness.queue.items import projects
    from agent_harness.queue.projects import registered

    held = projects(store)
    if project is None or project in held or project in {p.id for p in registered(store)}:
        return None
    holds = ", ".join(held) or "none yet"
    return (
        f"{project} is no project this database holds yet (it holds {holds}); asked ahead of "
        "its first run"
    )


def _render(controls: list[Control], verb: str | None) -> None:
    from rich.table import Table

    from agent_harness.queue.control import LIVE_REPORT_S

    out = console()
    if not controls:
        out.print("no project in this database yet")
        return
    table = Table(title_justify="left")
    for name in ("project", "asked", "workers do", "in flight", "handled", "last report"):
        table.add_column(name, overflow="fold")
    now = time.time()
    for c in controls:
        pool = c.pool
        table.add_row(
            c.project,
            str(c.asked),
            str(pool.state) if pool else "- (no run has reported)",
            str(pool.in_flight) if pool else "-",
            str(pool.handled) if pool else "-",
            f"{max(0.0, now - pool.at):.0f} s ago" if pool else "-",
        )
        if len(c.hosts) > 1:  # hosts sharing the database: each one's own word under the sum
            for each in c.hosts:
                table.add_row(
                    f"  host {each.host or '?'}",
                    "",
                    str(each.pool.state),
                    str(each.pool.in_flight),
                    str(each.pool.handled),
                    f"{max(0.0, now - each.pool.at):.0f} s ago",
                )
    out.print(table)
    if verb is not None:
        live = any(c.pool is not None and now - c.pool.at < LIVE_REPORT_S for c in controls)
        follows = (
            "a running run follows within a second"
            if live
            else ("no run works it now: its next run starts so")
        )
        out.print(f"asked: {verb}; {follows}")
