"""`agent-harness worktrees`: list the per-item worktrees with their size; prune finished ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from agent_harness.cli.output import checked_name, console, print_json

if TYPE_CHECKING:
    from agent_harness.git.cleanup import WorktreeInfo

F = TypeVar("F", bound=Callable[..., Any])


def _options(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)
    func = click.option(
        "--project",
        metavar="KEY",
        callback=checked_name,
        help="Queue project (default: the only one).",
    )(func)
    func = click.option("--db", metavar="URL", help="Database holding the item states.")(func)
    func = click.option(
        "--work",
        type=click.Path(path_type=Path),
        default=Path("."),
        show_default=True,
        help="The clone the worktrees belong to.",
    )(func)
    return func


@click.group(
    invoke_without_command=True,
    epilog="""\b
Examples:
  agent-harness worktrees --work ./app          # size, state, safe to remove?, TOTAL
  agent-harness worktrees --work ./app --json
  agent-harness worktrees prune --work ./app --dry-run
""",
)
@_options
@click.pass_context
def worktrees(
    ctx: click.Context, work: Path, db: str | None, project: str | None, as_json: bool
) -> int:
    """List the worktrees the harness keeps for items, with size on disk and whether each is
    safe to remove (item merged or closed, nothing uncommitted, every commit on the remote)."""
    if ctx.invoked_subcommand is not None:
        return 0
    infos = _inspect(work, db, project)
    if as_json:
        total = sum(i.size_bytes for i in infos)
        print_json({"worktrees": [i.as_json() for i in infos], "total_bytes": total})
    else:
        _render(infos, "worktrees")
    return 0


@worktrees.command(
    epilog="""\b
Examples:
  agent-harness worktrees prune --work ./app --dry-run   # what would go
  agent-harness worktrees prune --work ./app
"""
)
@_options
@click.option("--dry-run", is_flag=True, help="Show what would be removed; remove nothing.")
def prune(work: Path, db: str | None, project: str | None, as_json: bool, dry_run: bool) -> int:
    """Remove the worktrees (and local branches) that are safe to remove; keep and list the rest."""
    from agent_harness.git.cleanup import prune as run
    from agent_harness.tracker.reconcile import work_repo

    state_dir = _state_dir()
    work = _clone(work, state_dir)
    repo = work_repo(work, state_dir)
    assert repo is not None
    report = run(repo, _inspect(work, db, project), dry_run=dry_run)
    if as_json:
        print_json(
            {
                "dry_run": dry_run,
                "removed": [i.as_json() for i in report.removed],
                "kept": [i.as_json() for i in report.kept],
                "freed_bytes": report.freed_bytes,
            }
        )
    else:
        _render(report.removed, "would remove" if dry_run else "removed")
        _render(report.kept, "kept")
    return 0


def _clone(work: Path, state_dir: Path) -> Path:
    """`--work` as given; left at `.` where no clone is (the folder `run` ran in, beside the
    clone), the clone the state folder's worktrees were made from."""
    if work != Path(".") or (work / ".git").exists():
        return work
    from agent_harness.git.clone_checks import clone_of, worktree_links

    clones = {
        clone_of(admin)
        for _name, admin in worktree_links(state_dir / "worktrees")
        if admin.parent.name == "worktrees" and admin.parents[1].name == ".git"
    }
    # Worktrees of several clones (plans of other repositories): which one is meant is asked.
    return clones.pop() if len(clones) == 1 else work


def _state_dir() -> Path:
    from agent_harness.config import load_settings

    return Path(load_settings().settings.state_dir)


def _inspect(work: Path, db: str | None, project: str | None) -> list[WorktreeInfo]:
    from agent_harness.cli.output import open_database, sqlite_file
    from agent_harness.config import database_url, load_settings
    from agent_harness.errors import UsageError
    from agent_harness.git.cleanup import list_worktrees
    from agent_harness.git.naming import plan_namespace
    from agent_harness.plan.model import shown_path
    from agent_harness.queue import items as queue
    from agent_harness.tracker.reconcile import work_repo

    settings = load_settings(flags={"store.db": db}).settings
    state_dir = Path(settings.state_dir)
    if not state_dir.is_dir():  # a look writes nothing: no state folder, no database made
        raise UsageError(
            f"no harness state at {shown_path(str(state_dir))}: nothing has run here yet (run this "
            "where `agent-harness run` ran, or name its state folder: "
            "AGENT_HARNESS_STATE_DIR=DIR, or state_dir in the settings; the demo's is "
            ".agent-harness/demo/state)"
        )
    repo = work_repo(_clone(work, state_dir), state_dir)
    assert repo is not None
    states: dict[str, str] = {}
    namespace = ""
    file = sqlite_file(database_url(settings, db))
    if file is None or file.exists():
        with open_database(db, must_exist=True) as store:
            if queue.projects(store):
                key = queue.resolve_project(store, project)
                states = {r.id: r.state.value for r in queue.list_items(store, key)}
                namespace = plan_namespace(key.rsplit(":", 1)[-1])
    return list_worktrees(repo, states, namespace=namespace)


def _render(infos: list[WorktreeInfo], title: str) -> None:
    from rich.table import Table

    total = sum(i.size_bytes for i in infos)
    table = Table(title=f"{title}: {len(infos)}", title_justify="left")
    for name in ("item", "size", "state", "safe", "why", "path"):
        table.add_column(name, overflow="fold")
    for i in infos:
        safe = "[green]yes[/green]" if i.safe else "[red]no[/red]"
        table.add_row(i.item_id, _size(i.size_bytes), i.state or "?", safe, i.reason, str(i.path))
    table.add_row("TOTAL", _size(total), "", "", "", "")
    console().print(table)


def _size(n: int) -> str:
    amount = float(n)
    for unit in ("B", "KiB", "MiB"):
        if amount < 1024:
            return f"{n} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"
