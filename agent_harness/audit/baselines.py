"""`audit baselines`: what "better than before" is measured against, recorded once and kept.

A baseline is a prior measurement of the workload: TOTAL items delivered over DAYS days. It
belongs to the workload, so there is no built-in number; once recorded it cannot be changed.
"""

from __future__ import annotations

import re
import sys

from pydantic import BaseModel, Field

from agent_harness.audit.cost import cost
from agent_harness.audit.delivery import delivery
from agent_harness.errors import HarnessError, UsageError
from agent_harness.store.database import Store
from agent_harness.store.errors import StoreError


class BaselineExists(HarnessError):
    """A baseline of that label is already recorded; baselines are immutable."""

    exit_code = 2


class Baseline(BaseModel):
    label: str = Field(description="Its name, unique; e.g. before-harness.")
    delivered: int = Field(description="Items delivered in the measured period.")
    days: float = Field(description="Length of the measured period in days.")
    recorded_at: float = Field(description="Epoch seconds it was recorded.")


class Comparison(BaseModel):
    """A baseline against what the audit measured."""

    baseline: Baseline = Field(description="The baseline as recorded.")
    baseline_per_day: float = Field(description="Its delivery rate: items per day.")
    measured_per_day: float | None = Field(description="Merged items per day over `days`.")
    days: int = Field(description="UTC days with recorded deliveries or reviews.")
    ratio: float | None = Field(description="measured / baseline delivery rate.")
    cost_per_delivered_usd: float | None = Field(
        description="Priced cost over merged items; null if either is unknown."
    )
    unknown_calls: int = Field(description="Calls of unknown price left out of that cost.")


MAX_TOTAL = 10**9
MAX_DAYS = 36_500
# A period shorter than a quarter of an hour is no baseline, and its rate could overflow (a
# count over 5e-324 days is infinite, which JSON cannot say).
MIN_DAYS = 0.01
# A label is shown in every report and never changes: plain ASCII, no space at either end.
LABEL_PATTERN = r"^[A-Za-z0-9._:/-]([A-Za-z0-9 ._:/-]{0,98}[A-Za-z0-9._:/-])?$"


def _whole(text: str) -> int:
    """A count as written: `40`, or `40.0` as the API takes it; `40.5` is no count."""
    try:
        return int(text)
    except ValueError:
        number = float(text)
        if not number.is_integer():
            raise ValueError(text) from None
        return int(number)


def parse_spec(spec: str) -> tuple[int, float, str]:
    """TOTAL:DAYS:LABEL, e.g. 40:30:before-harness."""
    parts = spec.split(":", 2)
    try:
        total, days, label = _whole(parts[0]), float(parts[1]), parts[2].strip()
    except (IndexError, ValueError):
        raise UsageError(
            f"baseline {spec!r} should be TOTAL:DAYS:LABEL, e.g. 40:30:before-harness"
        ) from None
    if total < 0 or not days >= MIN_DAYS or not label:
        raise UsageError(
            f"baseline {spec[:80]!r}: TOTAL >= 0, DAYS >= {MIN_DAYS} and a LABEL are required"
        )
    if total > MAX_TOTAL or not days <= MAX_DAYS:  # `not <=` refuses NaN too
        raise UsageError(
            f"baseline {spec[:80]!r}: TOTAL at most {MAX_TOTAL:,} items and DAYS at most "
            f"{MAX_DAYS:,} (a century)"
        )
    if not re.fullmatch(LABEL_PATTERN, label):
        raise UsageError(
            f"baseline label {label[:80]!a}: 1 to 100 of letters, digits, '.', '_', ':', '/', "
            "'-' and inner spaces"
        )
    return total, days, label


def record_baseline(audit: Store, spec: str) -> Baseline:
    """Record a baseline; one with the same label is refused (`BaselineExists`)."""
    total, days, label = parse_spec(spec)
    now = audit.clock()
    try:
        with audit.transaction() as tx:
            if tx.one("SELECT 1 FROM baselines WHERE label = ?", (label,)):
                raise BaselineExists(
                    f"baseline {label!r} is already recorded, and baselines never change; "
                    "record a new one under another label"
                )
            tx.execute(
                "INSERT INTO baselines (label, delivered, days, recorded_at) VALUES (?, ?, ?, ?)",
                (label, total, days, now),
            )
    except StoreError as exc:  # two recorders at once: the other one won
        raise BaselineExists(f"baseline {label!r} is already recorded ({exc.detail})") from exc
    return Baseline(label=label, delivered=total, days=days, recorded_at=now)


def baselines(audit: Store, *, project: str | None = None) -> list[Comparison]:
    """Every baseline, compared with the delivery rate and cost per delivered item measured."""
    with audit.transaction(write=False) as tx:
        rows = tx.all("SELECT label, delivered, days, recorded_at FROM baselines ORDER BY label")
    if not rows:
        return []
    done = delivery(audit, project=project)
    spent = cost(audit, project=project)
    measured_days = len(done.days) if done.days else 0
    per_day = done.merged / measured_days if measured_days else None
    out = []
    for label, total, days, at in rows:
        base = Baseline(label=label, delivered=int(total), days=float(days), recorded_at=at)
        # One recorded before DAYS had a floor may still be tiny: its rate is then the largest
        # a float holds, not infinity, which no JSON reader takes.
        rate = min(base.delivered / base.days, sys.float_info.max)
        out.append(
            Comparison(
                baseline=base,
                baseline_per_day=round(rate, 4),
                measured_per_day=round(per_day, 4) if per_day is not None else None,
                days=measured_days,
                ratio=round(per_day / rate, 4) if per_day is not None and rate else None,
                cost_per_delivered_usd=(
                    round(spent.cost_usd / done.merged, 6)
                    if spent.cost_usd is not None and done.merged
                    else None
                ),
                unknown_calls=spent.unknown_calls,
            )
        )
    return out
