"""`agent-harness plan`: parse a plan and show its items, or mirror them to a tracker."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_harness.cli.output import PlanPath, console, from_env, print_json, sqlite_file
from agent_harness.cli.tracker_opts import (
    checked_plan_key,
    checked_repo,
    open_tracker,
    tracker_options,
)
from agent_harness.errors import UsageError

if TYPE_CHECKING:
    from agent_harness.config import Settings
    from agent_harness.plan.model import Plan
    from agent_harness.store.database import Store


@click.command(
    epilog="""\b
Examples:
  agent-harness plan PLAN.md                         # table of items + lines not read
  agent-harness plan PLAN.md --json                  # the same as JSON
  agent-harness plan PLAN.md --backlog backlog.json  # write the backlog
  agent-harness plan .kiro/specs/links/tasks.md      # Kiro's numbered tasks (key: links)
  agent-harness plan .taskmaster/tasks/tasks.json    # Taskmaster's tasks (tag master)
  agent-harness plan .cursor/plans/cache_1a2b.plan.md  # Cursor's plan: its todos
  agent-harness plan PLAN.md --repo me/app --forge local            # offline tracker
  agent-harness plan PLAN.md --repo owner/name --dry-run            # what would change
  agent-harness plan PLAN.md --repo owner/name                      # mirror to GitHub
  agent-harness plan PLAN.md --repo owner/name --adopt-duplicate    # repair twin issues
  agent-harness plan TODO.md --add-ids --dry-run     # ids for a plain checklist, shown
  agent-harness plan TODO.md --add-ids               # ... and written into the file
  agent-harness plan docs/PLAN.md --repo owner/name --moved-from PLAN.md  # a moved plan
"""
)
@click.argument("plan_file", metavar="PLAN", type=PlanPath(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--backlog",
    "backlog_out",
    type=click.Path(path_type=Path),
    help="Write backlog.json to this file ('-' for stdout).",
)
@click.option(
    "--repo",
    metavar="OWNER/NAME",
    callback=checked_repo,
    help="Mirror the items to this repository's issues.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="With --repo or --add-ids: show what would change, write nothing.",
)
@click.option(
    "--add-ids",
    is_flag=True,
    help="Write an id into each checkbox that has none (`- [ ] Add a cache` becomes "
    "`- [ ] T7 Add a cache`), numbered after the ids the file mentions, so a plain checklist's "
    "tasks become items. A checkbox nested in one that gets an id stays a step of it. Only "
    "those lines change, and nothing else is done.",
)
@click.option(
    "--id-prefix",
    metavar="PREFIX",
    help="With --add-ids: what the written ids start with (upper case, e.g. TASK-). "
    "Default: the one the plan's ids share (C for C1, C2), else T.",
)
@click.option(
    "--adopt-duplicate",
    is_flag=True,
    help="With --repo: where an item has several marked issues, keep the oldest and label "
    "the others 'duplicate' (they stop claiming the item; none is closed), then sync.",
)
@click.option(
    "--moved-from",
    metavar="OLD_PATH",
    help="With --repo: the plan was moved here from OLD_PATH (its path in the repository, as "
    "a refusal names it); its issues are taken over, and name the new path from then on.",
)
@click.option(
    "--plan-key",
    metavar="KEY",
    callback=checked_plan_key,
    help="Scopes this plan's issues so several plans can share a repo (default: file stem; "
    "a Kiro spec's .kiro/specs/SPEC/tasks.md: SPEC).",
)
@click.option(
    "--db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_DB"),
    help="With --repo: the runs' database (env AGENT_HARNESS_DB; default the state directory's "
    "SQLite file, if there is one). The sync waits for any run syncing the same plan there, so "
    "two syncs never each open an issue for one item.",
)
@tracker_options
def plan(
    plan_file: Path,
    as_json: bool,
    backlog_out: Path | None,
    repo: str | None,
    dry_run: bool,
    add_ids: bool,
    id_prefix: str | None,
    adopt_duplicate: bool,
    moved_from: str | None,
    plan_key: str | None,
    db: str | None,
    forge: str | None,
    github_url: str | None,
) -> int:
    """Parse PLAN (markdown, backlog.json or Taskmaster's tasks.json) and show its items, or
    sync them with --repo.

    Items are headings (`### T1: Title`), checkboxes (`- [ ] T1 Title`) or rows of a table
    with an `id` column; a file of numbered tasks only (Kiro's tasks.md: `- [ ] 2.1 Title`)
    is read by its numbers, and one whose front matter lists `todos` (Cursor's .plan.md) by
    those. Lines that look like items or metadata but could not be read are listed with
    their line numbers. Duplicate ids and dependency cycles are refused (exit 3).

    With --repo, each item becomes one issue, found again by a hidden marker (never by title):
    re-running updates changed items, touches nothing else, and never closes or reopens an
    issue. Problems with single items are listed and give exit code 4; the rest is kept. A
    key whose issues another plan file of the repository made is refused (exit 3), and so
    is a plan whose tasks moved to other ids since their issues were made.
    """
    from agent_harness.plan import backlog

    sync_flags = (adopt_duplicate, plan_key, forge, github_url, db, moved_from)
    if add_ids:
        alone = not (repo or backlog_out or any(sync_flags))
        return _add_ids(plan_file, id_prefix, dry_run, as_json, alone)
    if id_prefix is not None:
        raise UsageError("--id-prefix needs --add-ids")
    parsed = backlog.load_plan(plan_file)
    if backlog_out is not None and str(backlog_out) == "-":
        click.echo(backlog.dumps(parsed), nl=False)
        return 0
    if backlog_out is not None:
        backlog.write_backlog(parsed, backlog_out)
    if repo:
        _warn_if_empty(parsed)
        return _sync(parsed, repo, _SyncOptions(dry_run, *sync_flags, as_json=as_json))
    _refuse_without_repo(dry_run, *sync_flags)
    if as_json:
        print_json(backlog.to_backlog(parsed).model_dump(mode="json"))
        return 0
    from agent_harness.cli.plan_view import render_plan

    render_plan(console(), parsed)
    if backlog_out is not None:
        console().print(f"wrote {backlog_out}")
    return 0


def _refuse_without_repo(*given: object) -> None:
    if any(given):
        raise UsageError(
            "--dry-run, --adopt-duplicate, --moved-from, --forge, --github-url, --plan-key and "
            "--db need --repo"
        )


def _warn_if_empty(parsed: Plan) -> None:
    """Said before anything is opened; the sync of a plan with no items goes on (harmlessly)."""
    if not parsed.items:
        from agent_harness.plan.ids import no_items_message

        click.echo(f"warning: {no_items_message(parsed)}", err=True)


def _warn_of_unread(parsed: Plan, dry_run: bool) -> None:
    """Said once a plan with items synced: the lines it could not read (a label GitHub would
    refuse, an unknown dependency) were left out, which only `plan FILE` used to list."""
    if parsed.items and parsed.unread:
        from agent_harness.plan.model import shell_word

        first = parsed.unread[0]
        lines = "1 line" if len(parsed.unread) == 1 else f"{len(parsed.unread)} lines"
        click.echo(
            f"warning: {lines} of {parsed.source} not read, "
            f"{'would be synced' if dry_run else 'synced'} without them (line "
            f"{first.line}: {first.reason}); `agent-harness plan {shell_word(parsed.source)}` "
            "lists them",
            err=True,
        )


def _add_ids(plan_file: Path, prefix: str | None, dry_run: bool, as_json: bool, alone: bool) -> int:
    from agent_harness.cli.plan_view import render_added_ids
    from agent_harness.plan.ids import add_ids
    from agent_harness.plan.source import read_plan_text, write_plan_text

    if not alone:
        raise UsageError("--add-ids only writes ids into PLAN; read them, then sync with --repo")
    if str(plan_file) == "-":
        raise UsageError("--add-ids rewrites a plan file; standard input ('-') cannot be")
    text = read_plan_text(plan_file)
    if plan_file.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        raise UsageError(
            f"--add-ids writes ids into a markdown plan's checkboxes; {plan_file} is JSON, "
            "whose tasks carry ids already"
        )
    result = add_ids(text, str(plan_file), prefix)
    written = bool(result.added) and not dry_run
    if written:
        write_plan_text(plan_file, result.text)
    if as_json:
        print_json(
            {
                "path": str(plan_file),
                "written": written,
                "added": [{"line": a.line, "id": a.id, "text": a.text} for a in result.added],
                "nested": [n.model_dump() for n in result.nested],
                "left": [n.model_dump() for n in result.left],
                "unplaced": [n.model_dump() for n in result.unplaced],
                "items": len(result.plan.items),
            }
        )
    else:
        render_added_ids(console(), result, str(plan_file), written, dry_run)
    return 0


@dataclass(frozen=True)
class _SyncOptions:
    dry_run: bool
    adopt_duplicate: bool
    plan_key: str | None
    forge: str | None
    github_url: str | None
    db: str | None
    moved_from: str | None
    as_json: bool = False


def _runs_store(settings: Settings, opts: _SyncOptions) -> Store | None:
    """The runs' database, whose plan-sync lock a sync that writes takes as a run does; None
    for a dry run, or when there is none (a SQLite file is not made for this). Opened before
    the tracker, so a database that cannot be opened leaves nothing made."""
    from agent_harness.config import database_url
    from agent_harness.store.database import open_store

    url = database_url(settings, opts.db)
    path = sqlite_file(url)
    if opts.dry_run or (path is not None and not path.exists()):
        return None
    return open_store(url)


@contextlib.contextmanager
def _sync_lock(store: Store | None, repo: str, key: str) -> Iterator[None]:
    from agent_harness.store.hostlock import held_by_this_host, plan_sync_lock

    if store is None:
        yield
        return
    with held_by_this_host(store, plan_sync_lock(repo, key)):
        yield


def _local_repo(settings: Any, full_name: str) -> Any:
    from agent_harness.forge.local import describe_repo

    return describe_repo(Path(settings.state_dir), full_name)


def _adopt_hint(source: str, repo: str, forge: str | None, key: str) -> str:
    """The command that adopts twin issues, exactly as it is to be typed."""
    from agent_harness.plan.model import plan_key_for, shell_word

    local = " --forge local" if forge == "local" else ""
    named = "" if source != "-" and key == plan_key_for(source, None) else f" --plan-key {key}"
    command = f"agent-harness plan {shell_word(source)} --repo {repo}{local}{named}"
    return f"to keep the oldest of each: {command} --adopt-duplicate"


def _sync(parsed: object, repo: str, opts: _SyncOptions) -> int:
    from agent_harness.cli.plan_view import render_adoptions, render_sync
    from agent_harness.cli.settings_opts import load_cli_settings
    from agent_harness.plan.model import Plan, plan_key_for
    from agent_harness.tracker.adopt import adopt_duplicates
    from agent_harness.tracker.sync import refuse_taken_key, sync_plan

    assert isinstance(parsed, Plan)
    settings = load_cli_settings().settings
    key = plan_key_for(parsed.source, opts.plan_key or settings.tracker.plan_key)
    err = console(stderr=True)
    adoptions = []
    store = _runs_store(settings, opts)
    tracker_cm = open_tracker(
        repo, opts.forge, opts.github_url, settings, create=False, dry_run=opts.dry_run
    )
    with (
        contextlib.closing(store) if store is not None else contextlib.nullcontext(),
        tracker_cm as tracker,
        _sync_lock(store, tracker.repo, key),
        err.status("syncing…") as status,
    ):
        if opts.adopt_duplicate:  # only once the plan may sync under the key
            refuse_taken_key(parsed, tracker, key, opts.moved_from)
            adoptions = adopt_duplicates(tracker, key, dry_run=opts.dry_run)
        report = sync_plan(
            parsed,
            tracker,
            key,
            dry_run=opts.dry_run,
            progress=lambda stage, done, total: status.update(f"{stage} {done}/{total}"),
            moved_from=opts.moved_from,
        )
        full_name = tracker.repo
    local = _local_repo(settings, full_name) if opts.forge == "local" else None
    if opts.as_json:
        data = report.as_json()
        data["adopted"] = [
            {"id": a.item_id, "kept": a.kept, "labelled_duplicate": list(a.labelled)}
            for a in adoptions
        ]
        if local is not None:
            data["local_forge"] = local.as_json()
        print_json(data)
    else:
        render_adoptions(console(), adoptions, opts.dry_run)
        render_sync(console(), report)
        if report.twins:
            click.echo(_adopt_hint(parsed.source, full_name, opts.forge, key))
    sys.stdout.flush()
    _warn_of_unread(parsed, opts.dry_run)
    if local is not None:  # last, where it is read: what to do next with the repository
        from agent_harness.cli.plan_view import local_forge_lines

        sys.stdout.flush()
        for line in local_forge_lines(local):
            click.echo(line, err=True)
    return 0 if report.ok else 4
