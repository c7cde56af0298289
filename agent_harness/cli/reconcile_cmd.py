"""`agent-harness reconcile`: pull merged / closed / reverted back from the tracker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_harness.cli.output import console, print_json
from agent_harness.cli.tracker_opts import (
    checked_plan_key,
    checked_repo,
    open_tracker,
    tracker_options,
)

if TYPE_CHECKING:
    from agent_harness.pipeline.rounds import WatchReport
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
@click.option(
    "--plan-key",
    metavar="KEY",
    callback=checked_plan_key,
    help="Only pull requests of this plan.",
)
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the transitions as JSON.")
@click.option("--db", metavar="URL", help="Database (default: .agent-harness/harness.sqlite).")
@click.option(
    "--merge-when-green", is_flag=True, help="Merge approved, green, conflict-free PRs of ours."
)
@click.option(
    "--max-pr-rounds",
    type=click.IntRange(0, 100),
    help="Rounds an open PR may send its item back (default 3).",
)
@tracker_options
def reconcile(
    repo: str,
    work: Path | None,
    plan_key: str | None,
    dry_run: bool,
    as_json: bool,
    db: str | None,
    merge_when_green: bool,
    max_pr_rounds: int | None,
    forge: str | None,
    github_url: str | None,
) -> int:
    """Find merged, closed and reverted pull requests of plan items and record them.

    Each change is announced once on the item's issue (one status label, one comment) and moves
    the item in the queue. Works from the tracker alone: an empty database costs one pass over
    all pull requests; later runs read only what changed. Exit 4 when something needs a person.
    """
    import functools
    from contextlib import ExitStack, suppress

    from agent_harness.cli.output import open_database
    from agent_harness.cli.settings_opts import load_cli_settings
    from agent_harness.config import database_url
    from agent_harness.errors import UsageError
    from agent_harness.pipeline.launch import record_in_audit
    from agent_harness.tracker.reconcile import reconcile as run
    from agent_harness.tracker.reconcile import work_repo

    settings = load_cli_settings(flags={"store.db": db}).settings
    tree = work_repo(work, Path(settings.state_dir))
    with ExitStack() as stack:
        # The tracker first: a repository that is not there makes no database here either.
        tracker = stack.enter_context(
            open_tracker(
                repo, forge, github_url, settings, create=False, dry_run=dry_run, only_read=True
            )
        )
        store = None
        made = None if dry_run else _made_here(database_url(settings, db))
        with suppress(UsageError):  # a dry run reads the queue when there is one, never makes one
            store = stack.enter_context(open_database(db, must_exist=dry_run))
        asked = settings.reconcile
        one_pass = functools.partial(
            run, tracker, store=store, plan_key=plan_key, dry_run=dry_run, work=tree,
            requeue_reverted=asked.requeue_reverted, revert_window_days=asked.revert_window_days,
        )  # fmt: skip
        report = one_pass()
        report.notes += [made] if made else []
        watched = None
        if store is not None:
            watched = _watch(
                tracker, store, report, plan_key, tree, merge_when_green, max_pr_rounds, dry_run
            )
            if not dry_run:  # what it recorded (a merge, a revert) reaches the audit now
                _record_merges(report, watched, one_pass, tracker)
                record_in_audit(store, None, database_url(settings, db))
    return _shown(report, watched, as_json)


def _made_here(url: str) -> str | None:
    """What to say when the SQLite file `url` names is not there yet, so that opening it makes
    it: in CI, as meant; in the wrong folder, a surprise. Said either way."""
    from agent_harness.cli.output import missing_sqlite_file

    file = missing_sqlite_file(url)
    if file is None:
        return None
    return (
        f"no database was at {file}, so this pass made one and read the tracker alone: a run's "
        "queue is updated by reconcile run where it ran, or with its --db"
    )


def _record_merges(
    report: ReconcileReport,
    watched: WatchReport,
    one_pass: Callable[[], ReconcileReport],
    tracker: Any,
) -> None:
    """What this pass merged (merge-when-green) is recorded by it, not left for the next."""
    if any(m["merged"] for m in watched.merged):
        again = one_pass()
        report.transitions += again.transitions
        report.cleaned += again.cleaned
        report.requests, report.writes = tracker.tally.requests, tracker.tally.writes


def _shown(report: ReconcileReport, watched: WatchReport | None, as_json: bool) -> int:
    """Say what the pass did; its exit code."""
    if as_json:
        print_json(report.as_json() | {"pull_rounds": watched.as_json() if watched else None})
    else:
        _render(report)
        if watched is not None:
            _render_rounds(watched)
    # An item whose round budget ran out failed: that needs a person, as a revert does.
    return 0 if report.ok and not (watched and watched.failed) else 4


def _watch(
    tracker: Any,
    store: Any,
    report: ReconcileReport,
    plan_key: str | None,
    tree: Any,
    merge_when_green: bool,
    max_pr_rounds: int | None,
    dry_run: bool = False,
) -> WatchReport:
    """After reconcile: answer our open pull requests (failed CI, reviews, conflicts); with
    `dry_run`, say what would be answered."""
    from agent_harness.config import load_settings
    from agent_harness.pipeline.rounds import watch_all

    configured = load_settings().settings.reconcile
    watched = watch_all(
        tracker,
        store,
        report.changed_open,
        plan_key=plan_key,
        max_rounds=configured.max_pr_rounds if max_pr_rounds is None else max_pr_rounds,
        merge_when_green=merge_when_green or configured.merge_when_green,
        repo=tree,
        dry_run=dry_run,
    )
    report.requests = tracker.tally.requests
    report.writes = tracker.tally.writes
    return watched


def _render_rounds(watched: WatchReport) -> None:
    out = console()
    for r in watched.rounds:
        done = f"would {r['would']}" if r.get("would") else "sent back"
        out.print(f"{r['item']}: PR #{r['pr']} round {r['round']} ({r['trigger']}): {done}")
    for s in watched.stopped:
        out.print(f"{s['item']}: PR #{s['pr']} rounds stopped: {s['reason']}", markup=False)
    for m in watched.merged:
        said = "merged" if m["merged"] else f"not merged ({m['detail']})"
        out.print(f"{m['item']}: PR #{m['pr']} {said}")
    for f in watched.failed:
        out.print(f"{f['item']}: failed: {f['reason']}", markup=False)
    for left in watched.left:
        out.print(f"{left['item']}: PR #{left['pr']} {left['reason']}", markup=False)
    out.print(f"open pull requests read: {len(watched.read)}")


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
