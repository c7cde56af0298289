"""What the rollups cover, and the sums both the rollups and the answers use.

The latest maintenance run names the rows it rolled up (id <= through_id, day < cutoff_day);
every answer reads those from the rollups and everything else raw, with the same sums, so it
comes out the same before and after maintenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from agent_harness.errors import UsageError
from agent_harness.store.database import Tx

# Any constant works: every process that writes the audit database takes the same lock, so row
# ids are handed out in commit order on PostgreSQL and a reader paging by id skips nothing.
AUDIT_LOCK_KEY = 0x6A68_6175

# Costs are summed as integer nano-dollars, so a total is the same whatever order or grouping
# it was added up in: before and after a rollup, to the last digit.
NANO = 1_000_000_000

COST_GROUP = "day, project, role, vendor, model, usage_source, cost_reason, price_version"

COST_SUMS = (
    "COUNT(*), SUM(CASE WHEN cost_usd IS NULL THEN 1 ELSE 0 END), "
    f"SUM(CAST(ROUND(cost_usd * {NANO}) AS BIGINT)), "
    "SUM(CASE WHEN reported_cost_usd IS NULL THEN 0 ELSE 1 END), "
    f"SUM(CAST(ROUND(reported_cost_usd * {NANO}) AS BIGINT)), "
    "SUM(COALESCE(tokens_in, 0)), SUM(COALESCE(tokens_out, 0)), "
    "SUM(COALESCE(cache_read, 0)), SUM(COALESCE(cache_write, 0))"
)

ACTIVITY_SUMS = (
    "COUNT(*), SUM(CASE WHEN kind = 'review' THEN 1 ELSE 0 END), "
    "SUM(CASE WHEN kind = 'review' AND outcome = 'rejected' THEN 1 ELSE 0 END)"
)


@dataclass(frozen=True)
class Coverage:
    """What the latest maintenance run rolled up: rows with id <= through_id before cutoff_day.
    `thin_before`: days before it may have lost their raw rows."""

    through_id: int
    cutoff_day: str
    thin_before: str

    def raw_filters(self) -> tuple[str, ...]:
        """The rows no rollup covers, read raw, as two disjoint conditions each served by an
        index (newer rows by id; rows of the open day by (day, id)), never a table scan."""
        if not self.through_id:
            return ("1 = 1",)
        return (
            f"id > {int(self.through_id)}",
            # `+id`: no index on id for this part, so the (day, id) index is the one used.
            f"day >= '{self.cutoff_day}' AND +id <= {int(self.through_id)}",
        )

    @property
    def thinned_before(self) -> str:
        return min(self.cutoff_day, self.thin_before)


NO_COVERAGE = Coverage(0, "0000-00-00", "0000-00-00")


def coverage(tx: Tx) -> Coverage:
    row = tx.one(
        "SELECT through_id, cutoff_day, thin_before FROM maintenance_runs ORDER BY id DESC LIMIT 1"
    )
    if row is None:
        return NO_COVERAGE
    return Coverage(int(row[0]), str(row[1]), str(row[2]))


def day_range(
    since: str | None, until: str | None, project: str | None = None
) -> tuple[str, list[str]]:
    """A WHERE clause for UTC days `since`..`until` (inclusive, YYYY-MM-DD, either optional),
    and for one project when it is named."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and not _is_day(value):
            raise UsageError(f"{name} {value!r} is not a UTC day: write it as YYYY-MM-DD")
    if since and until and since > until:  # an empty answer would read as $0 spent
        raise UsageError(f"--since {since} is after --until {until}: no day is in between")
    clauses, params = [], []
    if since:
        clauses.append("day >= ?")
        params.append(since)
    if until:
        clauses.append("day <= ?")
        params.append(until)
    if project is not None:
        clauses.append("project = ?")
        params.append(project)
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def _is_day(text: str) -> bool:
    try:  # strftime writes a year before 1000 without its zeros; isoformat keeps them
        return date.fromisoformat(text).isoformat() == text
    except ValueError:
        return False
