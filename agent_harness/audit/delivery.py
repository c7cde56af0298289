"""`audit delivery`: what was merged, closed and reverted, how fast, in how many attempts, and
how often the reviewer said no.

Deliveries are written once, when their outcome is ingested, and never thinned; review counts
come from the rollups for covered rows and raw rows for the rest, so maintenance changes
nothing here.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from pydantic import BaseModel, Field

from agent_harness.audit.coverage import ACTIVITY_SUMS, coverage, day_range
from agent_harness.store.database import Store


class DeliveryDay(BaseModel):
    day: str = Field(description="UTC day, YYYY-MM-DD.")
    merged: int = Field(description="Items merged that day.")
    closed: int = Field(description="Items closed unmerged that day.")
    reverted: int = Field(description="Items reverted that day.")
    reviews: int = Field(description="Review verdicts that day.")
    rejections: int = Field(description="Reviews that said no that day.")


class DeliveryReport(BaseModel):
    """The answer to "what was delivered, and how fast?"."""

    days: list[DeliveryDay] = Field(description="Per UTC day, oldest first.")
    merged: int = Field(description="Items merged, in all.")
    closed: int = Field(description="Items closed unmerged, in all.")
    reverted: int = Field(description="Items reverted, in all.")
    hours_claim_to_pr: float | None = Field(description="Median; null when nothing to measure.")
    hours_pr_to_merge: float | None = Field(description="Median; null when nothing to measure.")
    hours_claim_to_merge: float | None = Field(description="Median; null when none.")
    attempts_per_delivered: float | None = Field(
        description="Mean attempts per merged item (the one delivered and those that failed "
        "before it; a claim taken back after a kill or a wait spends none); null when nothing "
        "was merged."
    )
    reviews: int = Field(description="Review verdicts, in all.")
    rejections: int = Field(description="Reviews that said no, in all.")
    rejection_rate: float | None = Field(description="Rejections / reviews; null if no review.")


def delivery(
    audit: Store,
    *,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> DeliveryReport:
    """Deliveries and reviews between UTC days `since` and `until` (inclusive)."""
    where, params = day_range(since, until, project)
    extra = where.replace("WHERE", "AND", 1)
    with audit.transaction(write=False) as tx:
        covered = coverage(tx)
        outcomes = tx.all(
            f"SELECT day, outcome, ts, claimed_ts, pr_ts, attempts FROM deliveries {where} "
            "ORDER BY id",
            params,
        )
        reviews = tx.all(
            f"SELECT day, SUM(reviews), SUM(rejections) FROM rollup_activity {where} GROUP BY day",
            params,
        )
        for part in covered.raw_filters():
            reviews += tx.all(
                f"SELECT day, {ACTIVITY_SUMS} FROM audit_events WHERE {part} {extra} GROUP BY day",
                params,
            )
    return _report(outcomes, reviews)


def _median_hours(values: list[float]) -> float | None:
    return round(statistics.median(values) / 3600.0, 4) if values else None


def _report(outcomes: list[tuple], reviews: list[tuple]) -> DeliveryReport:  # type: ignore[type-arg]
    per_day: dict[str, list[int]] = defaultdict(lambda: [0] * 5)
    to_pr: list[float] = []
    pr_to_merge: list[float] = []
    to_merge: list[float] = []
    attempts: list[int] = []
    column = {"merged": 0, "closed": 1, "reverted": 2}
    for day, outcome, ts, claimed, pr, tries in outcomes:
        per_day[str(day)][column[str(outcome)]] += 1
        if outcome != "merged":
            continue
        attempts.append(int(tries))
        if claimed is not None and pr is not None:
            to_pr.append(float(pr) - float(claimed))
        if pr is not None:
            pr_to_merge.append(float(ts) - float(pr))
        if claimed is not None:
            to_merge.append(float(ts) - float(claimed))
    for row in reviews:
        day, review_count, rejected = str(row[0]), int(row[-2] or 0), int(row[-1] or 0)
        if review_count or day in per_day:
            per_day[day][3] += review_count
            per_day[day][4] += rejected
    days = [
        DeliveryDay(day=d, merged=v[0], closed=v[1], reverted=v[2], reviews=v[3], rejections=v[4])
        for d, v in sorted(per_day.items())
    ]
    total_reviews = sum(d.reviews for d in days)
    total_rejections = sum(d.rejections for d in days)
    return DeliveryReport(
        days=days,
        merged=sum(d.merged for d in days),
        closed=sum(d.closed for d in days),
        reverted=sum(d.reverted for d in days),
        hours_claim_to_pr=_median_hours(to_pr),
        hours_pr_to_merge=_median_hours(pr_to_merge),
        hours_claim_to_merge=_median_hours(to_merge),
        attempts_per_delivered=round(sum(attempts) / len(attempts), 4) if attempts else None,
        reviews=total_reviews,
        rejections=total_rejections,
        rejection_rate=round(total_rejections / total_reviews, 4) if total_reviews else None,
    )
