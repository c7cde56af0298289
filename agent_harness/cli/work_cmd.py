"""`agent-harness work`: what the queue holds, one item's history, and re-queueing an item."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from agent_harness.cli.output import (
    PlanPath,
    checked_name,
    checked_names,
    console,
    from_env,
    print_json,
)

F = TypeVar("F", bound=Callable[..., Any])


def _common(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(func)
    func = click.option(
        "--project",
        metavar="PROJECT",
        callback=checked_name,
        help="Queue to look at, e.g. owner/repo:plan (needed when the database holds several).",
    )(func)
    return click.option(
        "--db",
        metavar="URL",
        callback=from_env("AGENT_HARNESS_DB"),
        help="Database: a path, sqlite:///path or postgresql://... "
        "(default .agent-harness/harness.sqlite; env AGENT_HARNESS_DB).",
    )(func)


def _merged(ctx: click.Context, db: str | None, project: str | None, as_json: bool) -> Any:
    """Options given before the subcommand count too; those after it win."""
    outer = ctx.find_object(dict) or {}
    return (
        db or outer.get("db"),
        project or outer.get("project"),
        as_json or bool(outer.get("json")),
    )


@click.group(
    invoke_without_command=True,
    epilog="""\b
Examples:
  agent-harness work                                # counts by state, live and stale claims
  agent-harness work --project me/app:PLAN --json   # the same for one project, as JSON
  agent-harness work show T4                        # every event of item T4
  agent-harness work retry T4                       # re-queue T4 and the items it blocked
  agent-harness work unpark https://api.openai.com/v1  # its spent cap was raised
  agent-harness work verify                         # is every event as it was written?
  agent-harness work enqueue PLAN.md --project me/app:PLAN
""",
)
@_common
@click.pass_context
def work(ctx: click.Context, db: str | None, project: str | None, as_json: bool) -> int:
    """Show the work queue: items by state, live claims (worker, expiry), stale claims, the
    items waiting and why, and the failed ones with their reasons (`--json` lists every item).

    A stale claim is a lease that expired and has not been claimed again yet: the next
    worker takes it over, no person needs to clear it.
    """
    ctx.obj = {"db": db, "project": project, "json": as_json}
    if ctx.invoked_subcommand is not None:
        return 0
    from agent_harness.cli.output import open_database
    from agent_harness.queue import items as queue
    from agent_harness.queue.control import get_control

    with open_database(db, must_exist=True) as store:
        name = queue.resolve_project(store, project)
        view = queue.status(store, name)
        activity = _activity(store, name, [c.item_id for c in view.live])
        records = queue.list_items(store, name, with_deps=True)
        [asked] = get_control(store, name)
        # Leases run on the database's clock (PostgreSQL's, for a fleet): a host whose own clock
        # is off would show live leases expired and dead ones live.
        now = store.clock()
    waiting = [r for r in records if r.state == "waiting"]
    failed = [r for r in records if r.state == "failed"]
    blocked = _blocked(records)
    if as_json:
        data = _status_json(view, now)
        data["activity"] = activity
        data["control"] = asked.model_dump(mode="json", include={"asked", "asked_at", "asked_by"})
        data["waiting"] = [{"id": r.id, "until": r.not_before, "reason": r.reason} for r in waiting]
        data["blocked"] = [{"id": item_id, "reason": why} for item_id, why in blocked]
        data["items"] = [
            {"id": r.id, "title": r.title, "state": r.state.value, "attempts": r.attempts,
             "reason": r.reason, "depends_on": list(r.depends_on)}
            for r in records
        ]  # fmt: skip
        print_json(data)
    else:
        _render_status(view, now, activity, waiting)
        if asked.asked.value != "running":  # a paused queue's pending items wait for a person
            by = f" by {asked.asked_by}" if asked.asked_by else ""
            console().print(
                f"{asked.asked.value}{by}: no item is claimed until `agent-harness control resume`",
                markup=False,
            )
        for r in records:  # an open pull request a person holds (a brake, their commit)
            if r.state == "pr_open" and r.reason:
                console().print(f"pr_open: {r.id}: {r.reason}", markup=False)
        _say_some([f"pending: {item_id} {why}" for item_id, why in blocked],
                  "more waiting on dependencies")  # fmt: skip
        _say_some([f"failed: {r.id}: {r.reason or 'no reason recorded'}" for r in failed],
                  "more failed (`--json` lists every item)")  # fmt: skip
    return 0


def _say_some(lines: list[str], more: str) -> None:
    """The first FAILED_SHOWN of `lines`, then how many more there are."""
    for line in lines[:FAILED_SHOWN]:
        console().print(line, markup=False)
    if len(lines) > FAILED_SHOWN:
        console().print(f"… and {len(lines) - FAILED_SHOWN} {more}", markup=False)


FAILED_SHOWN = 20  # failed (or blocked) items named one per line under the counts, at most


def _blocked(records: list[Any]) -> list[tuple[str, str]]:
    """Pending items a dependency holds back, each with what it waits for (they counted only
    as pending: `work` promised the items waiting and why)."""
    from agent_harness.pipeline.report import dependency_wait

    by_id = {record.id: record for record in records}
    found = []
    for record in records:
        why = dependency_wait(record.depends_on, by_id) if record.state == "pending" else None
        if why:
            found.append((record.id, why))
    return found


def _activity(store: Any, project: str, items: list[str]) -> dict[str, str]:
    """What each claimed item is doing now, from its latest events (e.g. waiting for input)."""
    from agent_harness.pipeline.history import ItemHistory

    return {item: ItemHistory.read(store, project, item).activity() for item in items}


@work.command(
    epilog="""\b
Examples:
  agent-harness work show T4
  agent-harness work show T4 --project me/app:PLAN --json
"""
)
@click.argument("item_id", metavar="ID", callback=checked_name)
@_common
@click.pass_context
def show(
    ctx: click.Context, item_id: str, db: str | None, project: str | None, as_json: bool
) -> int:
    """Show one item as it stands and its full event history, oldest first."""
    from agent_harness.cli.output import open_database
    from agent_harness.queue import items as queue
    from agent_harness.store.chain import verify_item

    db, project, as_json = _merged(ctx, db, project, as_json)
    with open_database(db, must_exist=True) as store:
        name = queue.resolve_item_project(store, project, [item_id])
        record, events = queue.history(store, name, item_id)
        chain = verify_item(store, name, item_id) if events else None
    if as_json:
        data: dict[str, Any] = {
            "item": _record_json(record),
            "events": [e.as_json() for e in events],
        }
        data["integrity"] = _chain_json(chain) if chain else None
        print_json(data)
        return 0 if chain is None or chain.intact else 1
    if chain is not None and not chain.intact:
        console(stderr=True).print(
            f"warning: this history does not hold: {chain.breaks[0].describe()} "
            "(agent-harness work verify checks the whole log)",
            markup=False,
            soft_wrap=True,
        )
    out = console()
    out.print(
        f"[bold]{record.id}[/] {record.title} — {record.state.value}, attempt "
        f"{record.attempts}/{record.max_attempts}" + (f", {record.reason}" if record.reason else "")
    )
    for event in events:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.ts))
        details = " ".join(f"{k}={v}" for k, v in sorted(event.payload.as_dict().items()))
        out.print(f"{event.id:>6}  {stamp}  {event.kind:<14} {details}", markup=False)
    return 0 if chain is None or chain.intact else 1


@work.command(
    epilog="""\b
Examples:
  agent-harness work verify                   # is the event history as it was written?
  agent-harness work verify --json
  agent-harness work verify --restore         # re-create dropped append-only triggers first
"""
)
@click.option(
    "--restore",
    is_flag=True,
    help="Re-create the append-only triggers if they were dropped, disabled or altered (and, "
    "on PostgreSQL, move a copied log's transaction ids below this server's), then check the "
    "history.",
)
@_common
@click.pass_context
def verify(
    ctx: click.Context, restore: bool, db: str | None, project: str | None, as_json: bool
) -> int:
    """Check that every event is as it was written: each one is sealed by a hash chained to the
    one before, so an edited, deleted or slipped-in event is named here.

    Exits 0 when the history holds, 1 when it does not. The history itself cannot be
    repaired; --restore only puts back the triggers that refuse changes from now on (and, on
    PostgreSQL, moves the transaction ids of a log copied from another server below this
    server's, so the log is followed in order again).
    """
    from agent_harness.cli.output import open_database
    from agent_harness.store.chain import verify_chain

    db, _project, as_json = _merged(ctx, db, project, as_json)
    with open_database(db, must_exist=True, check_protection=False) as store:
        restored = store.restore_protection() if restore else []
        unprotected = store.unprotected()
        chain = verify_chain(store)
    data = _chain_json(chain)
    data["restored"] = restored
    data["unprotected"] = unprotected
    if as_json:
        print_json(data)
    else:
        out = console()
        for problem in restored:
            out.print(f"restored: {problem}", markup=False, soft_wrap=True)
        for problem in unprotected:
            out.print(
                f"not protected: {problem} (run with --restore)", markup=False, soft_wrap=True
            )
        for found in chain.breaks:
            out.print(f"broken: {found.describe()}", markup=False, soft_wrap=True)
        verdict = "holds" if chain.intact else "does NOT hold"
        out.print(
            f"{chain.checked} sealed events checked, {chain.unsealed} written since the last "
            f"seal; the history {verdict}",
            markup=False,
            soft_wrap=True,
        )
    return 0 if chain.intact and not unprotected else 1


def _chain_json(chain: Any) -> dict[str, Any]:
    return {
        "intact": chain.intact,
        "checked": chain.checked,
        "unsealed": chain.unsealed,
        "breaks": [{"event": b.event_id, "problem": b.problem} for b in chain.breaks],
        "head": chain.head,
    }


@work.command(
    epilog="""\b
Examples:
  agent-harness work retry T4
  agent-harness work retry T4 T7 T9              # all three, or none if one is refused
  agent-harness work retry T4 --fresh            # and discard its old branch and worktree
  agent-harness work retry T4 --project me/app:PLAN --json
"""
)
@click.argument("item_ids", metavar="ID...", nargs=-1, required=True, callback=checked_names)
@click.option(
    "--fresh",
    is_flag=True,
    help="Discard the item's old branch and worktree (kept aside by default); the pushed "
    "branch and its pull request stay on the tracker.",
)
@_common
@click.pass_context
def retry(
    ctx: click.Context,
    item_ids: tuple[str, ...],
    fresh: bool,
    db: str | None,
    project: str | None,
    as_json: bool,
) -> int:
    """Re-queue failed, skipped, closed or reverted items, and the items they had blocked.

    The item starts over from the current default branch on a new branch (agent-harness/ID.rN-
    ...), so it can succeed after a revert; its old branch is kept as it was unless --fresh.
    Refused while a live lease holds the item, for any other state, and for an item whose
    next agent run could pass budgets.item_cost_usd until that budget is raised (exit 2).
    With several IDs, one refused re-queues none of them.
    """
    from agent_harness.cli.output import open_database
    from agent_harness.config import load_settings
    from agent_harness.pipeline.budgets import check_retry
    from agent_harness.queue import items as queue
    from agent_harness.queue.retries import retry_all

    db, project, as_json = _merged(ctx, db, project, as_json)
    budgets = load_settings().settings.budgets
    with open_database(db, must_exist=True) as store:
        name = queue.resolve_item_project(store, project, item_ids)
        for item_id in item_ids:  # an unknown item is named before any budget
            queue.get_item(store, name, item_id)
        for item_id in item_ids:
            check_retry(store, name, item_id, budgets.item_cost_usd, budgets.max_call_usd)
        requeued = retry_all(store, name, item_ids, fresh=fresh)
    if as_json:
        print_json({"requeued": list(requeued)})
    else:
        asked = [item_id for item_id in requeued if item_id in item_ids]
        blocked = [item_id for item_id in requeued if item_id not in item_ids]
        also = f" (and {', '.join(blocked)})" if blocked else ""
        console().print(f"re-queued {', '.join(asked)}{also}", markup=False)
    return 0


@work.command(
    epilog="""\b
Examples:
  agent-harness work unpark https://api.openai.com/v1   # its cap was raised
  agent-harness work unpark agent:claude --json
"""
)
@click.argument("endpoint", metavar="ENDPOINT")
@_common
@click.pass_context
def unpark(
    ctx: click.Context, endpoint: str, db: str | None, project: str | None, as_json: bool
) -> int:
    """Clear a parked endpoint (a spent cap or window) once a person has fixed it.

    ENDPOINT is the endpoint's URL as `work` and the item reasons show it, or a whole parking
    key such as agent:claude. Every item waiting for it may be claimed by the next run, with
    its attempts as they were. Nothing parked under that name: exit 2, naming what is parked.
    """
    from agent_harness.cli.output import open_database
    from agent_harness.errors import UsageError
    from agent_harness.models.parking import unpark as clear_parks
    from agent_harness.queue import items as queue

    db, project, as_json = _merged(ctx, db, project, as_json)
    with open_database(db, must_exist=True) as store:
        parked = store.parked_keys()
        cleared = clear_parks(store, endpoint)
        if not cleared:
            listed = ", ".join(parked) if parked else "nothing is parked"
            raise UsageError(f"{endpoint} is not parked ({listed})")
        names = [endpoint, *cleared, *(key.split("#", 1)[0] for key in cleared)]
        woken = queue.wake(store, names, f"{endpoint} unparked by a person")
    if as_json:
        print_json({"cleared": cleared, "woken": [f"{p}/{i}" for p, i in woken]})
    else:
        items = ", ".join(item for _, item in woken) or "none"
        console().print(
            f"unparked {', '.join(cleared)}; items that may run again: {items}", markup=False
        )
    return 0


@work.command(
    epilog="""\b
Examples:
  agent-harness work enqueue PLAN.md --project me/app:PLAN
  agent-harness work enqueue backlog.json --project me/app:PLAN --json
"""
)
@click.argument("plan_file", metavar="PLAN", type=PlanPath(path_type=Path))
@click.option(
    "--max-attempts",
    type=click.IntRange(1, 100),  # as run's --max-attempts and budgets.max_attempts
    default=3,
    show_default=True,
    help="Attempt budget of newly added items.",
)
@_common
@click.pass_context
def enqueue(
    ctx: click.Context,
    plan_file: Path,
    max_attempts: int,
    db: str | None,
    project: str | None,
    as_json: bool,
) -> int:
    """Put the items of PLAN (markdown or backlog.json) in the queue of --project.

    Unchanged items are left alone; edited ones are updated, or flagged if a worker holds them.
    """
    import re

    from agent_harness.cli.output import open_database
    from agent_harness.plan import backlog
    from agent_harness.queue import items as queue
    from agent_harness.queue.projects import PROJECT_PATTERN

    db, project, as_json = _merged(ctx, db, project, as_json)
    if not project:
        raise click.UsageError("enqueue needs --project, e.g. owner/repo:plan")
    if not re.fullmatch(PROJECT_PATTERN, project):
        # `run` would never find a queue it cannot name (a space, a missing plan key).
        raise click.BadParameter(
            f"{project!r} is not OWNER/REPO:PLANKEY (letters, digits, '.', '_', '-')",
            param_hint="'--project'",
        )
    plan = backlog.load_plan(plan_file)
    with open_database(db, must_exist=False) as store:
        result = queue.enqueue(store, project, plan, max_attempts=max_attempts)
    summary = {k: list(getattr(result, k)) for k in ("added", "updated", "unchanged", "flagged")}
    if as_json:
        print_json(summary)
    else:
        console().print(", ".join(f"{len(v)} {k}" for k, v in summary.items()), markup=False)
    return 0


def _status_json(view: Any, now: float) -> dict[str, Any]:
    def claim(c: Any) -> dict[str, Any]:
        return {
            "item": c.item_id,
            "state": c.state.value,
            "worker": c.worker,
            "attempt": c.attempt,
            "expires_at": c.expires_at,
            "expires_in_s": round(c.expires_at - now, 1),
            "reason": c.reason,
        }

    return {
        "project": view.project,
        "counts": view.counts,
        "live": [claim(c) for c in view.live],
        "stale": [claim(c) for c in view.stale],
    }


def _record_json(record: Any) -> dict[str, Any]:
    data = dict(record.__dict__)
    data["state"] = record.state.value
    data["depends_on"] = list(record.depends_on)
    return data


def _render_status(
    view: Any, now: float, activity: dict[str, str] | None = None, waiting: Any = ()
) -> None:
    from rich.table import Table

    out = console()
    counts = ", ".join(f"{n} {state}" for state, n in sorted(view.counts.items())) or "empty"
    out.print(f"[bold]{view.project}[/]: {counts}")
    for title, claims in (("live claims", view.live), ("stale claims", view.stale)):
        if not claims:
            out.print(f"no {title}")
            continue
        table = Table(title=title, title_justify="left")
        for column in ("item", "state", "worker", "attempt", "lease", "doing"):
            table.add_column(column)
        for c in claims:
            left = c.expires_at - now
            lease = f"ends in {left:.0f}s" if left >= 0 else f"expired {-left:.0f}s ago"
            # A stopped run's lease says so: its last events still read "agent running".
            doing = c.reason or (activity or {}).get(c.item_id, "")
            table.add_row(c.item_id, c.state.value, c.worker, str(c.attempt), lease, doing)
        out.print(table)
    if waiting:
        table = Table(title="waiting (attempt not counted)", title_justify="left")
        for column in ("item", "until", "reason"):
            table.add_column(column, overflow="fold")
        for r in waiting:
            until = (
                "-"
                if not r.not_before
                else "due now (the next run takes it)"  # its time has come, or it was woken
                if r.not_before <= now
                else time.strftime("%Y-%m-%d %H:%M", time.localtime(r.not_before))
            )
            table.add_row(r.id, until, r.reason or "")
        out.print(table)
