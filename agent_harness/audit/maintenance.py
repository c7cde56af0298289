"""Maintenance: roll complete UTC days up into rollups kept forever, then thin what they cover.

A maintenance run takes the highest audit row id (`through_id`) and the current UTC day
(`cutoff_day`): every row with id <= through_id of a day before cutoff_day is covered by the
rollups from then on, and every answer reads those rows from the rollups, never from raw. What
no run covers (newer rows, and rows of the open day) is read raw. As both bounds only grow,
the covered set of the latest run contains every earlier run's, so rollups are appended, never
rewritten: a late row for an old day is simply rolled up by the next run.

Thinning then deletes raw rows that are covered and older than the retention. The database
itself enforces that: its trigger refuses to delete a raw row no run covers and declared past
retention (see `schema`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent_harness.audit.coverage import (
    ACTIVITY_SUMS,
    AUDIT_LOCK_KEY,
    COST_GROUP,
    COST_SUMS,
    NANO,
    coverage,
    day_range,
)
from agent_harness.audit.records import day_of
from agent_harness.store.database import Store, Tx

DAY_S = 86_400.0
DEFAULT_RETENTION_DAYS = 90


class MaintenanceReport(BaseModel):
    """What one maintenance run did."""

    run: int = Field(description="Maintenance run id.")
    through_id: int = Field(description="Rows up to this id, of complete days, are rolled up.")
    cutoff_day: str = Field(description="The first day not rolled up (today, UTC).")
    thin_before: str = Field(description="Raw rows of days before this may be thinned.")
    rolled: int = Field(description="Raw rows newly rolled up.")
    thinned: int = Field(description="Raw rows deleted, every one covered by a rollup.")


def maintain(
    audit: Store, *, now: float, retention_days: float = DEFAULT_RETENTION_DAYS
) -> MaintenanceReport:
    """Roll up every complete UTC day not yet rolled up, then thin covered raw rows older than
    `retention_days`. Safe to run at any time and twice at once (they take turns)."""
    with audit.transaction() as tx:
        if tx.dialect.name == "postgresql":
            tx.one("SELECT pg_advisory_xact_lock(?)", (AUDIT_LOCK_KEY,))
        before = coverage(tx)
        cutoff = max(before.cutoff_day, day_of(now))
        row = tx.one("SELECT MAX(id) FROM audit_events")
        through = max(before.through_id, int(row[0]) if row and row[0] is not None else 0)
        thin_before = max(before.thin_before, day_of(now - retention_days * DAY_S))
        fresh = (
            f"((id > {before.through_id} AND id <= {through} AND day < '{cutoff}') OR "
            f"(id <= {before.through_id} AND day >= '{before.cutoff_day}' AND day < '{cutoff}'))"
        )
        costs = tx.all(
            f"SELECT {COST_GROUP}, {COST_SUMS} FROM audit_events "
            f"WHERE usage_source IS NOT NULL AND {fresh} GROUP BY {COST_GROUP}"
        )
        activity = tx.all(
            f"SELECT day, project, {ACTIVITY_SUMS} FROM audit_events WHERE {fresh} "
            "GROUP BY day, project"
        )
        rolled = sum(int(r[2]) for r in activity)
        doomed = min(cutoff, thin_before)
        count = tx.one(
            "SELECT COUNT(*) FROM audit_events WHERE id <= ? AND day < ?", (through, doomed)
        )
        thinned = int(count[0]) if count else 0
        made = tx.one(
            "INSERT INTO maintenance_runs (ran_at, through_id, cutoff_day, thin_before, rolled, "
            "thinned) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (now, through, cutoff, thin_before, rolled, thinned),
        )
        run = int(made[0]) if made else 0
        _write_rollups(tx, run, costs, activity)
        if thinned:
            tx.execute("DELETE FROM audit_events WHERE id <= ? AND day < ?", (through, doomed))
    return MaintenanceReport(
        run=run,
        through_id=through,
        cutoff_day=cutoff,
        thin_before=thin_before,
        rolled=rolled,
        thinned=thinned,
    )


def _write_rollups(tx: Tx, run: int, costs: list[tuple], activity: list[tuple]) -> None:  # type: ignore[type-arg]
    cursor = tx.conn.cursor()
    if costs:
        cursor.executemany(
            tx.dialect.sql(
                "INSERT INTO rollup_cost (run, day, project, role, vendor, model, usage_source, "
                "cost_reason, price_version, calls, unknown_calls, cost_nusd, reported_calls, "
                "reported_nusd, tokens_in, tokens_out, cache_read, cache_write) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            [(run, *row) for row in costs],
        )
    if activity:
        cursor.executemany(
            tx.dialect.sql(
                "INSERT INTO rollup_activity (run, day, project, events, reviews, rejections) "
                "VALUES (?, ?, ?, ?, ?, ?)"
            ),
            [(run, *row) for row in activity],
        )


class RollupDay(BaseModel):
    """One rolled-up UTC day, all projects together."""

    day: str = Field(description="UTC day, YYYY-MM-DD.")
    events: int = Field(description="Raw events the day had when rolled up.")
    calls: int = Field(description="Model calls and CLI-reported attempts with usage.")
    cost_usd: float | None = Field(description="Priced cost; null when no call had a price.")
    unknown_calls: int = Field(description="Calls with no known price (never counted as 0).")
    reviews: int = Field(description="Review verdicts that day.")
    rejections: int = Field(description="Reviews that said no that day.")


def rollups(audit: Store, *, since: str | None = None, until: str | None = None) -> list[RollupDay]:
    """The daily rollups, kept forever, oldest first (days `since`..`until` inclusive)."""
    where, params = day_range(since, until)
    with audit.transaction(write=False) as tx:
        acts = tx.all(
            "SELECT day, SUM(events), SUM(reviews), SUM(rejections) FROM rollup_activity "
            f"{where} GROUP BY day",
            params,
        )
        costs = {
            str(r[0]): r
            for r in tx.all(
                "SELECT day, SUM(calls), SUM(unknown_calls), SUM(cost_nusd), "
                f"SUM(calls - unknown_calls) FROM rollup_cost {where} GROUP BY day",
                params,
            )
        }
    out: list[RollupDay] = []
    for day, events, reviews, rejections in sorted(acts):
        cost = costs.get(str(day))
        priced = int(cost[4]) if cost else 0
        out.append(
            RollupDay(
                day=str(day),
                events=int(events),
                calls=int(cost[1]) if cost else 0,
                cost_usd=int(cost[3] or 0) / NANO if cost and priced else None,
                unknown_calls=int(cost[2]) if cost else 0,
                reviews=int(reviews),
                rejections=int(rejections),
            )
        )
    return out
