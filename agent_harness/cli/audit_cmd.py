"""`agent-harness audit`: the audited answers (cost, delivery, health, events, rollups,
baselines) and maintenance, read from the audit database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from agent_harness.cli.output import FiniteRange, checked_name, console, from_env, print_json

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agent_harness.store.database import Store

F = TypeVar("F", bound=Callable[..., Any])


def audit_options(func: F) -> F:
    """--db and --audit-db, shared with `ingest`."""
    func = click.option(
        "--audit-db",
        metavar="URL",
        callback=from_env("AGENT_HARNESS_AUDIT_DB"),
        help="Audit database: a path or postgresql://... (default audit.sqlite beside the "
        "work database; env AGENT_HARNESS_AUDIT_DB).",
    )(func)
    return click.option(
        "--db",
        metavar="URL",
        callback=from_env("AGENT_HARNESS_DB"),
        help="Work database (default .agent-harness/harness.sqlite; env AGENT_HARNESS_DB).",
    )(func)


def _common(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")(func)
    return audit_options(func)


def _range(func: F) -> F:
    func = click.option("--until", metavar="YYYY-MM-DD", help="Last UTC day (inclusive).")(func)
    func = click.option("--since", metavar="YYYY-MM-DD", help="First UTC day.")(func)
    return click.option(
        "--project", metavar="PROJECT", callback=checked_name, help="Only this project."
    )(func)


def audit_target(audit_db: str | None, db: str | None) -> str:
    from agent_harness.audit.database import audit_url
    from agent_harness.config import database_url, load_settings

    return audit_url(audit_db, database_url(load_settings().settings, db))


def open_audit_db(audit_db: str | None, db: str | None, *, must_exist: bool) -> Store:
    from agent_harness.audit.database import open_audit
    from agent_harness.errors import UsageError

    url = audit_target(audit_db, db)
    if must_exist and "://" not in url and not url.startswith("-") and not Path(url).exists():
        raise UsageError(
            f"no audit database at {url}: run `agent-harness ingest` to record the work log "
            "(or pass --audit-db / set AGENT_HARNESS_AUDIT_DB)"
        )
    return open_audit(url)


def _recorded(store: Store, project: str | None) -> None:
    """Refuse a project filter the audit has recorded nothing of: an empty report would read
    as a project that cost nothing and delivered nothing, not as a typo or a missed ingest."""
    from agent_harness.audit.history import holds_project, recorded_projects
    from agent_harness.errors import UsageError

    if project is None or holds_project(store, project):
        return
    known = recorded_projects(store)
    shown = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if known[5:] else "")
    raise UsageError(
        f"the audit has recorded nothing of project {project} (it holds {shown or 'none'}); "
        "check the name, or run `agent-harness ingest` if it ran since the last one"
    )


def _show(as_json: bool, answer: BaseModel | list[Any], render: Callable[[], None]) -> int:
    if as_json:
        if isinstance(answer, list):
            print_json([row.model_dump(mode="json") for row in answer])
        else:
            print_json(answer.model_dump(mode="json"))
    else:
        render()
    return 0


@click.group(
    epilog="""\b
Examples:
  agent-harness ingest                          # bring the audit up to date first
  agent-harness audit cost                      # spend by project, role, model; per day
  agent-harness audit cost --since 2026-11-01 --json
  agent-harness audit delivery                  # merged / closed / reverted, how fast
  agent-harness audit health                    # is anything being recorded?
  agent-harness audit events --after 500        # raw history, paged by row id
  agent-harness audit baselines --baseline 40:30:before-harness
  agent-harness audit maintain                  # roll up complete days, thin old raw rows
"""
)
def audit() -> None:
    """The honest record: answers from the audit database, which outlives the work queue."""


@audit.command(
    name="cost",
    epilog="""\b
Examples:
  agent-harness audit cost
  agent-harness audit cost --since 2026-11-01 --until 2026-11-30 --project me/app:PLAN
  agent-harness audit cost --audit-db .agent-harness/demo/audit.sqlite --json
""",
)
@_range
@_common
def cost_cmd(
    project: str | None,
    since: str | None,
    until: str | None,
    db: str | None,
    audit_db: str | None,
    as_json: bool,
) -> int:
    """Spend by project, role, model and day. A call with no known price counts as unknown,
    never as $0; what a CLI reported about its own cost is shown beside, labelled."""
    from agent_harness.audit.cost import cost
    from agent_harness.cli.audit_view import render_cost

    with open_audit_db(audit_db, db, must_exist=True) as store:
        _recorded(store, project)
        report = cost(store, project=project, since=since, until=until)
    return _show(as_json, report, lambda: render_cost(console(), report))


@audit.command(
    name="delivery",
    epilog="""\b
Examples:
  agent-harness audit delivery
  agent-harness audit delivery --since 2026-11-01 --json
""",
)
@_range
@_common
def delivery_cmd(
    project: str | None,
    since: str | None,
    until: str | None,
    db: str | None,
    audit_db: str | None,
    as_json: bool,
) -> int:
    """Items merged, closed and reverted per day; claim to PR to merge; attempts per delivered
    item; how often the reviewer said no."""
    from agent_harness.audit.delivery import delivery
    from agent_harness.cli.audit_view import render_delivery

    with open_audit_db(audit_db, db, must_exist=True) as store:
        _recorded(store, project)
        report = delivery(store, project=project, since=since, until=until)
    return _show(as_json, report, lambda: render_delivery(console(), report))


@audit.command(
    name="health",
    epilog="""\b
Examples:
  agent-harness audit health            # exits 1 when something is wrong
  agent-harness audit health --json || echo "the audit needs a look"
""",
)
@_common
def health_cmd(db: str | None, audit_db: str | None, as_json: bool) -> int:
    """Is anything being recorded? Last event, lag behind the work log, drops, last ingest.
    Exits 1 when there is a problem, so a monitor can alert on it."""
    from agent_harness.audit.health import health
    from agent_harness.cli.audit_view import render_health
    from agent_harness.cli.output import open_database
    from agent_harness.config import database_url, load_settings

    work_url = database_url(load_settings().settings, db)
    has_work = "://" in work_url or Path(work_url).exists()
    with open_audit_db(audit_db, db, must_exist=True) as store:
        if has_work:
            with open_database(db, must_exist=True) as work:
                answer = health(store, work)
        else:
            answer = health(store, None)
    _show(as_json, answer, lambda: render_health(console(), answer))
    return 0 if answer.ok else 1


@audit.command(
    name="events",
    epilog="""\b
Examples:
  agent-harness audit events --item T3
  agent-harness audit events --after 500 --limit 1000 --json   # the next page: --after <last id>
  agent-harness audit events --kind outcome --project me/app:PLAN
""",
)
@click.option(
    "--after",
    type=click.IntRange(0, 2**63 - 1),
    default=0,
    show_default=True,
    help="Rows with a higher id.",
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("--item", metavar="ID", callback=checked_name, help="Only this item.")
@click.option("--kind", metavar="KIND", callback=checked_name, help="Only this kind of event.")
@click.option("--project", metavar="PROJECT", callback=checked_name, help="Only this project.")
@_common
def events_cmd(
    after: int,
    limit: int,
    item: str | None,
    kind: str | None,
    project: str | None,
    db: str | None,
    audit_db: str | None,
    as_json: bool,
) -> int:
    """The raw history, oldest first, paged by row id."""
    from agent_harness.audit.history import events
    from agent_harness.cli.audit_view import render_events

    with open_audit_db(audit_db, db, must_exist=True) as store:
        _recorded(store, project)
        page = events(store, after=after, limit=limit, project=project, item=item, kind=kind)
    return _show(as_json, page, lambda: render_events(console(), page))


@audit.command(
    name="rollups",
    epilog="""\b
Examples:
  agent-harness audit rollups --since 2026-01-01 --json
""",
)
@click.option("--since", metavar="YYYY-MM-DD", help="First UTC day.")
@click.option("--until", metavar="YYYY-MM-DD", help="Last UTC day (inclusive).")
@_common
def rollups_cmd(
    since: str | None, until: str | None, db: str | None, audit_db: str | None, as_json: bool
) -> int:
    """The daily rollups maintenance made: the long series, kept forever."""
    from agent_harness.audit.maintenance import rollups
    from agent_harness.cli.audit_view import render_rollups

    with open_audit_db(audit_db, db, must_exist=True) as store:
        days = rollups(store, since=since, until=until)
    return _show(as_json, days, lambda: render_rollups(console(), days))


@audit.command(
    name="baselines",
    epilog="""\b
Examples:
  agent-harness audit baselines
  agent-harness audit baselines --baseline 40:30:before-harness   # 40 items in 30 days
""",
)
@click.option(
    "--baseline",
    "spec",
    metavar="TOTAL:DAYS:LABEL",
    help="Record a baseline first: TOTAL items delivered over DAYS days before. Immutable: "
    "a label already recorded is refused (exit 2).",
)
@click.option(
    "--project", metavar="PROJECT", callback=checked_name, help="Measure only this project."
)
@_common
def baselines_cmd(
    spec: str | None, project: str | None, db: str | None, audit_db: str | None, as_json: bool
) -> int:
    """Compare delivery per day and cost per delivered item against recorded baselines."""
    from agent_harness.audit.baselines import baselines, parse_spec, record_baseline
    from agent_harness.cli.audit_view import render_baselines

    if spec is not None:
        parse_spec(spec)  # refused before a database is made to hold it
    with open_audit_db(audit_db, db, must_exist=spec is None) as store:
        if spec is None:  # a baseline is the whole team's: recorded before any ingest too
            _recorded(store, project)
        else:
            record_baseline(store, spec)
        rows = baselines(store, project=project)
    return _show(as_json, rows, lambda: render_baselines(console(), rows))


@audit.command(
    name="maintain",
    epilog="""\b
Examples:
  agent-harness audit maintain                     # once a day (a watch does it itself)
  agent-harness audit maintain --retention-days 365 --json
""",
)
@click.option(
    "--retention-days",
    type=FiniteRange(min=0, max=36_500),
    default=90.0,
    show_default=True,
    help="Thin raw events older than this, where a rollup covers them.",
)
@_common
def maintain_cmd(retention_days: float, db: str | None, audit_db: str | None, as_json: bool) -> int:
    """Roll complete UTC days up into rollups kept forever; thin covered raw events older than
    the retention. No audited answer changes."""
    import time

    from agent_harness.audit.maintenance import maintain
    from agent_harness.cli.audit_view import render_maintenance

    with open_audit_db(audit_db, db, must_exist=True) as store:
        report = maintain(store, now=time.time(), retention_days=retention_days)
    return _show(as_json, report, lambda: render_maintenance(console(), report))
