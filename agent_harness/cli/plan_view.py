"""Rich rendering of a parsed plan: the items table and the report of unread lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from agent_harness.cli.output import visible
from agent_harness.plan.model import shell_word, shown_path

if TYPE_CHECKING:
    from rich.console import Console

    from agent_harness.forge.local import LocalRepo
    from agent_harness.plan.ids import IdsAdded
    from agent_harness.plan.model import Plan
    from agent_harness.tracker.adopt import Adoption
    from agent_harness.tracker.sync import SyncReport


# A table is for reading: past these sizes it only costs time (rich lays out every cell), so
# the rest is counted and `--json` has everything.
TABLE_ROWS_MAX = 500
CELL_CHARS_MAX = 200
MISSING_NAMED = 20


def _cut(text: str) -> str:
    text = visible(text)
    return text if len(text) <= CELL_CHARS_MAX else text[: CELL_CHARS_MAX - 1] + "…"


def render_plan(out: Console, plan: Plan) -> None:
    notes = list(plan.notes)
    if plan.items:
        out.print(_items_table(plan))
        _say_more(out, len(plan.items), "item")
    else:
        # An empty table says less than the plain word on why there is nothing in it.
        out.print(escape(f"{shown_path(plan.source)}: {notes.pop(0) if notes else '0 items'}"))
    for note in notes:  # how the file was read, when it was read unusually
        out.print(escape(f"note: {note}"))
    if plan.unread:
        report = Table(title=_count(len(plan.unread), "line") + " not read", title_justify="left")
        report.add_column("line", justify="right")
        report.add_column("reason")
        report.add_column("text", overflow="fold")
        for notice in plan.unread[:TABLE_ROWS_MAX]:
            report.add_row(
                str(notice.line), escape(_cut(notice.reason)), escape(visible(notice.text[:80]))
            )
        out.print(report)
        _say_more(out, len(plan.unread), "line not read", "lines not read")
    done = sum(1 for item in plan.items if item.done)
    missing = [item.id for item in plan.without_check]
    summary = (
        f"{_count(len(plan.items), 'item')} ({done} done), "
        f"{_count(len(plan.unread), 'line')} not read"
    )
    if missing:
        named = ", ".join(missing[:MISSING_NAMED])
        if len(missing) > MISSING_NAMED:
            named += f" and {len(missing) - MISSING_NAMED} more"
        summary += f"; no success check: {named}"
    if not plan.items and not plan.notes:
        summary = "no work items found; " + summary
    out.print(summary)
    from agent_harness.plan.ids import add_ids_hint

    hint = add_ids_hint(plan)
    if hint:
        out.print(escape(hint[0].upper() + hint[1:]))


def render_added_ids(
    out: Console, result: IdsAdded, path: str, written: bool, dry_run: bool
) -> None:
    """What `plan --add-ids` wrote (or, with --dry-run, would write) into the plan."""
    if result.added:
        table = Table(
            title=f"{path}: {_count(len(result.added), 'id')} "
            + ("written" if written else "to write (--dry-run: nothing written)"),
            title_justify="left",
        )
        table.add_column("line", justify="right")
        table.add_column("id")
        table.add_column("text", overflow="fold")
        for added in result.added[:TABLE_ROWS_MAX]:
            table.add_row(str(added.line), added.id, escape(visible(added.text[:80])))
        out.print(table)
        _say_more(out, len(result.added), "id")
    elif not result.unplaced:
        out.print(escape(f"{path}: no checkbox lacks an id; nothing written"))
    if result.unplaced:
        shown = ", ".join(str(n.line) for n in result.unplaced[:MISSING_NAMED])
        boxes = _count(len(result.unplaced), "checkbox", "checkboxes")
        out.print(
            f"{boxes} written in a way --add-ids cannot edit (lines {shown}): write ids there"
        )
    if result.nested:
        from agent_harness.plan.ids import line_numbers

        lines = line_numbers(result.nested)
        nested = _count(len(result.nested), "nested checkbox", "nested checkboxes")
        out.print(f"{nested} (lines {lines}) left as steps of the item they are in")
    for notice in result.left[:TABLE_ROWS_MAX]:
        out.print(escape(f"line {notice.line}: {notice.reason}; left for you to correct"))
    _say_more(out, len(result.left), "line left", "lines left")
    verb = "has" if written or not result.added else "would have"
    out.print(escape(f"{path} {verb} {_count(len(result.plan.items), 'item')}"))


def _items_table(plan: Plan) -> Table:
    table = Table(
        title=escape(f"{shown_path(plan.source)}: {_count(len(plan.items), 'item')}"),
        title_justify="left",
    )
    for name in ("id", "title", "deps", "labels", "milestone", "check", "line"):
        table.add_column(name, overflow="fold")
    for item in plan.items[:TABLE_ROWS_MAX]:
        title = escape(_cut(item.title)) + ("  [dim](done)[/dim]" if item.done else "")
        table.add_row(
            _cut(item.id),
            title,
            _cut(", ".join(item.depends_on)) or "-",
            escape(_cut(", ".join(item.labels))) or "-",
            escape(_cut(item.milestone or "-")),
            "[green]✓[/green]" if item.success_check else "[red]✗[/red]",
            str(item.line),
        )
    return table


def _say_more(out: Console, total: int, noun: str, nouns: str = "") -> None:
    if total > TABLE_ROWS_MAX:
        rest = total - TABLE_ROWS_MAX
        word = noun if rest == 1 else (nouns or noun + "s")
        out.print(f"… and {rest} more {word} (not drawn; --json lists every one)", markup=False)


def _count(n: int, noun: str, nouns: str = "") -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {nouns or noun + 's'}"


def render_sync(out: Console, report: SyncReport) -> None:
    verb = "would be" if report.dry_run else "were"
    heading = f"{report.repo} (plan key {report.plan_key})"
    if report.dry_run:
        heading += ": [yellow]dry run, nothing written[/yellow]"
    out.print(heading)
    table = Table()
    titled = report.dry_run and any(c.title is not None for c in report.created + report.updated)
    for name in (
        ("item", "issue", "title", "result", "changes")
        if titled
        else ("item", "issue", "result", "changes")
    ):
        table.add_column(name, overflow="fold")
    would = "would be " if report.dry_run else ""
    groups = (
        (f"{would}created", report.created, "green"),
        (f"{would}updated", report.updated, "cyan"),
        ("orphaned (left alone)", report.orphaned, "yellow"),
    )
    rows = [(label, change, colour) for label, changes, colour in groups for change in changes]
    for label, change, colour in rows[:TABLE_ROWS_MAX]:  # a table of 20,000 rows takes minutes
        number = f"#{change.number}" if change.number else "(new)"
        title = [escape(_cut(visible(change.title or "")))] if titled else []
        table.add_row(
            escape(_cut(change.id)),
            number,
            *title,
            f"[{colour}]{label}[/{colour}]",
            escape(_cut("; ".join(change.changes))),
        )
    if table.row_count:
        out.print(table)
        _say_more(out, len(rows), "change")
        if titled:
            out.print("[dim]each issue's body, as it would be written: add --json[/dim]")
    for problem in report.problems:
        out.print(f"[red]problem:[/red] {escape(visible(problem))}")
    for notice in report.notices:
        out.print(f"[yellow]note:[/yellow] {escape(visible(notice))}")
    extras = []
    if report.labels_created:
        extras.append(f"labels {verb} created: {', '.join(report.labels_created)}")
    if report.milestones_created:
        extras.append(f"milestones {verb} created: {', '.join(report.milestones_created)}")
    if report.skipped_done:
        named = ", ".join(_cut(item) for item in report.skipped_done[:MISSING_NAMED])
        if len(report.skipped_done) > MISSING_NAMED:
            named += f" and {len(report.skipped_done) - MISSING_NAMED} more"
        extras.append(f"done in the plan, no issue made: {named}")
    for line in extras:
        out.print(escape(line))
    out.print(
        f"{len(report.created)} created, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.orphaned)} orphaned"
        f"{' (dry run)' if report.dry_run else ''}; "
        f"{report.requests} requests, {report.writes} writes"
    )


def render_adoptions(out: Console, adoptions: Sequence[Adoption], dry_run: bool) -> None:
    """One line per item whose duplicate issues were (or would be) set aside."""
    verb = "would keep" if dry_run else "kept"
    for adoption in adoptions:
        others = ", ".join(f"#{n}" for n in adoption.labelled)
        out.print(
            f"{adoption.item_id}: {verb} #{adoption.kept}; {others} labelled duplicate",
            markup=False,
        )


def local_forge_lines(repo: LocalRepo) -> list[str]:
    """Plain lines (no wrapping, to copy and paste) on a repository of the local forge: the
    `origin` to push the user's own history to while it is empty, and where its pages are."""
    if not repo.exists:
        return [
            f"local forge: dry run: {repo.full_name} would be created, empty, in "
            f"{repo.data_dir}; nothing was written"
        ]
    if repo.empty:
        lines = [
            f"local forge: {repo.full_name} is empty; from your clone, put your history in it:",
            f"  git remote add origin {repo.clone_url}",
            f"  (a clone with an origin already: git remote set-url origin {repo.clone_url})",
            "  git push -u origin HEAD",
        ]
    else:
        lines = [f"local forge: {repo.full_name} clones from {repo.clone_url}"]
    if repo.page_url:
        lines.append(
            f"its pages: agent-harness forge serve --data {shell_word(str(repo.data_dir))}, "
            "then open "
            f"{repo.page_url}"
        )
    return lines
