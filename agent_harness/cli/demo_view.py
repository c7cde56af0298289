"""How the demo's result is shown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from agent_harness.cli.output import visible
from agent_harness.cli.plan_view import render_sync
from agent_harness.forge.local import read_web_address
from agent_harness.plan.model import shell_word

if TYPE_CHECKING:
    from rich.console import Console

    from agent_harness.demo.run import DemoReport


def render_demo(out: Console, report: DemoReport, seconds: float) -> None:
    if report.inception is not None:
        made = report.inception
        out.print(
            f"inception session {made.session} wrote {made.plan_path} "
            f"({', '.join(made.items)}) after refusing approval once: {escape(made.refused)}"
        )
    for sync in report.syncs:
        render_sync(out, sync)
    table = Table(title=f"{report.repo}: what happened to each item", title_justify="left")
    for name in ("item", "title", "state", "attempts", "pull request", "PR rounds"):
        table.add_column(name, overflow="fold")
    for row in report.final_items():
        table.add_row(
            row["id"],
            escape(row["title"]),
            row["state"],
            str(row["attempts"]),
            f"#{row['pr_number']}" if row.get("pr_number") else "-",
            ", ".join(f"{r['round']}: {r['trigger']}" for r in row.get("rounds") or []) or "-",
        )
    out.print(table)
    retried = [row["id"] for row in report.final_items() if row["attempts"] > 1]
    events = sum(one.events for one in report.passes)  # each pass counts its own
    out.print(
        f"{len(report.merged)} pull requests merged; items that needed a second attempt: "
        f"{', '.join(retried) or 'none'}; {report.reviews} reviews; "
        f"{sum(r['conclusion'] == 'failure' for r in report.ci_runs)} CI failure(s) sent back; "
        f"{events} events recorded; "
        f"agents ran in {report.host} sessions; {seconds:.1f} s"
    )
    where = report.workdir
    out.print(
        f"Everything is kept in {visible(str(where))}: the forge data, the clone in "
        f"{visible(str(where / 'tally'))} and the event log in "
        f"{visible(str(where / 'harness.sqlite'))}.",
        markup=False,
    )
    data = where / "forge"
    address = read_web_address(data)
    pages = f" (then open {address}/_html/{report.repo})" if address else ""
    out.print(
        f"Browse the pull requests again: agent-harness forge serve --data "
        f"{shell_word(str(data))}{pages}",
        markup=False,
    )
    out.print(
        "See the history of an item: agent-harness work show T2 --db "
        f"{shell_word(str(where / 'harness.sqlite'))}",
        markup=False,
    )
