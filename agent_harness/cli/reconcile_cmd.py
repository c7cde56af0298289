"""`agent-harness reconcile`: pull merged / closed / reverted back from the tracker."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_harness.cli.output import console, print_json
from agent_harness.cli.tracker_opts import checked_repo, open_tracker, tracker_options

if TYPE_CHECKING:
    from agent_harness.tracker.reconcile import ReconcileReport


@click.command(
    epilog="""\b
Examples:
  agent-harness reconcile --repo owner/name --dry-run     # what would change
  agent-harness reconcile --repo owner/name               # label issues, move the queue
  agent-harness reconcile --repo owner/name --work ./app  # ... and remove finished worktrees
  agent-harness reconcile --repo me/app --forge local --json
"""
)
@click.option(
    "--repo",
    required=True,
    metavar="OWNER/NAME",
    callback=checked_repo,
    help="Repository to reconcile.",
)
@click.option("--work", type=click.Path(path_type=Path), help="Clone whose worktrees to clean.")
@click.option("--plan-key", metavar="KEY", help="Only pull requests of this plan.")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the transitions as JSON.")
@click.option("--db", metavar="URL", help="Database (default: .agent-harness/harness.sqlite).")
@tracker_options
def reconcile(
    repo: str,
    work: Path | None,
    plan_key: str | None,
    dry_run: bool,
    as_json: bool,
    db: str | None,
    forge: str | None,
    github_url: str | None,
) -> int:
    """Find merged, closed and reverted pull requests of plan items and record them.

    Each change is announced once on the item's issue (one status label, one comment) and moves
    the item in the queue. Works from the tracker alone: an empty database costs one pass over
    all pull requests; later runs read only what changed. Exit 4 when something needs a person.
    """
    from contextlib import ExitStack, suppress

    from agent_harness.cli.output import open_database
    from agent_harness.cli.settings_opts import load_cli_settings
    from agent_harness.errors import UsageError
    from agent_harness.tracker.reconcile import reconcile as run
    from agent_harness.tracker.reconcile import work_repo

    settings = load_cli_settings(flags={"store.db": db}).settings
    tree = work_repo(work, Path(settings.state_dir))
    with ExitStack() as stack:
        store = None
        with suppress(UsageError):  # a dry run reads the queue when there is one, never makes one
            store = stack.enter_context(open_database(db, must_exist=dry_run))
        tracker = stack.enter_context(
            open_tracker(repo, forge, github_url, settings, create=False, dry_run=dry_run)
        )
        report = run(
            tracker,
            store=store,
            plan_key=plan_key,
            dry_run=dry_run,
            requeue_reverted=settings.reconcile.requeue_reverted,
            revert_window_days=settings.reconcile.revert_window_days,
            work=tree,
        )
    if as_json:
        print_json(report.as_json())
    else:
        _render(report)
    return 0 if report.ok else 4


def _render(report: ReconcileReport) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = console()
    verb = "would record" if report.dry_run else "recorded"
    out.print(f"{report.repo}: {verb} {len(report.transitions)} transition(s)")
    table = Table()
    for name in ("item", "state", "PR", "issue", "evidence", "done"):
        table.add_column(name, overflow="fold")
    for t in report.transitions:
        evidence = ", ".join(f"{k}={v}" for k, v in t.evidence.items() if k != "pr")
        issue = f"#{t.issue}" if t.issue else "-"
        row = (t.item, t.state, f"#{t.pr}", issue, escape(evidence), ", ".join(t.done) or "-")
        table.add_row(*row)
    if report.transitions:
        out.print(table)
    mode = "stateless (empty store)" if report.stateless else "incremental"
    out.print(
        f"{mode}: {report.tracked} tracked PR(s), {report.pulls_listed} listed, "
        f"{report.commits_read} commit(s) read, {report.requests} request(s), "
        f"{report.writes} write(s), {report.unknown_reverts} revert(s) of unknown commits"
    )
    for note in report.notes:
        out.print(f"[dim]note:[/dim] {escape(note)}")
    for problem in report.problems:
        out.print(f"[red]problem:[/red] {escape(problem)}")
