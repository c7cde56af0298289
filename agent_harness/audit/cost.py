"""`audit cost`: spend by project, role, model and day, where unknown is never zero.

Read from the rollups for what maintenance covered and from raw rows for the rest, so the
answer is the same before and after maintenance. Costs add up as integer nano-dollars.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field

from agent_harness.audit.coverage import COST_GROUP, COST_SUMS, NANO, coverage, day_range
from agent_harness.store.database import Store

_LABELS = {
    "api": "per call",
    "cli": "CLI's report",
    "claude-code": "Claude log",
    "codex": "Codex log",
    "lost": "lost with its run",
}


class CostLine(BaseModel):
    """Spend of one project, role, vendor and model, from one kind of usage record."""

    project: str = Field(description="Project (owner/repo:key).")
    role: str = Field(description="Role that made the calls (implementer, reviewer, ...).")
    vendor: str | None = Field(description="Model vendor; null when not recorded.")
    model: str | None = Field(description="Model name; null when not recorded.")
    usage_source: str = Field(
        description="api, cli, claude-code, codex, or lost (a call under way when its run died)."
    )
    label: str = Field(description="Where the usage figures come from, in words.")
    calls: int = Field(description="Calls (or CLI-reported attempts) in this line.")
    priced_calls: int = Field(description="Calls with a known price.")
    unknown_calls: int = Field(description="Calls with no known price; their cost is null.")
    cost_usd: float | None = Field(description="Sum over priced calls; null if none was priced.")
    reported_cost_usd: float | None = Field(
        description="What the tool itself reported it cost, kept beside our price; null if none."
    )
    # A call always has some prompt, so four zeros mean that no call reported its tokens.
    tokens_in: int | None = Field(
        description="Prompt tokens, cache reads and writes included, of the calls that reported "
        "them; null when none did (never 0 for unknown)."
    )
    tokens_out: int | None = Field(description="Completion tokens; null when none reported.")
    cache_read: int | None = Field(
        description="Prompt tokens read from the cache; null when none reported."
    )
    cache_write: int | None = Field(
        description="Prompt tokens written to the cache; null when none reported."
    )


class DayCost(BaseModel):
    day: str = Field(description="UTC day, YYYY-MM-DD.")
    calls: int = Field(description="Calls that day.")
    cost_usd: float | None = Field(description="Priced cost that day; null if no call was priced.")
    unknown_calls: int = Field(
        description="Calls that day with no known price (never counted as 0)."
    )
    reported_cost_usd: float | None = Field(
        description="What the tools reported that day; null if none."
    )


class UnknownPrice(BaseModel):
    """Calls that could not be priced, and why."""

    vendor: str | None = Field(description="Model vendor; null when not recorded.")
    model: str | None = Field(description="Model name; null when not recorded.")
    reason: str = Field(description="Why no price is known, in words.")
    calls: int = Field(description="Calls left unpriced for that reason.")


class CostReport(BaseModel):
    """The answer to "what did this cost?"."""

    lines: list[CostLine] = Field(
        description="Spend by project, role, vendor, model and usage source."
    )
    days: list[DayCost] = Field(description="Spend per UTC day, oldest first.")
    unknown: list[UnknownPrice] = Field(
        description="The calls with no known price, grouped by reason."
    )
    cost_usd: float | None = Field(description="Total over priced calls; null if none.")
    priced_calls: int = Field(description="Calls with a known price, in all.")
    unknown_calls: int = Field(
        description="Calls with no known price, in all; their cost is null, never 0."
    )
    reported_cost_usd: float | None = Field(description="Total the tools reported themselves.")
    reported_calls: int = Field(description="Calls whose tool reported its own cost.")
    price_versions: list[str] = Field(description="The price data that priced these rows.")
    summary: str = Field(description='e.g. "$12.40 + 37 calls of unknown price".')


Group = tuple[str, str, str, str | None, str | None, str, str | None, str | None]


def cost(
    audit: Store,
    *,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> CostReport:
    """Spend between UTC days `since` and `until` (inclusive), optionally of one project."""
    groups = _groups(audit, project, since, until)
    return _report(groups)


def _groups(
    audit: Store, project: str | None, since: str | None, until: str | None
) -> dict[Group, list[int]]:
    where, params = day_range(since, until, project)
    extra = where.replace("WHERE", "AND", 1)
    with audit.transaction(write=False) as tx:
        covered = coverage(tx)
        rolled = tx.all(
            f"SELECT {COST_GROUP}, SUM(calls), SUM(unknown_calls), SUM(cost_nusd), "
            "SUM(reported_calls), SUM(reported_nusd), SUM(tokens_in), SUM(tokens_out), "
            f"SUM(cache_read), SUM(cache_write) FROM rollup_cost {where} GROUP BY {COST_GROUP}",
            params,
        )
        raw = [
            row
            for part in covered.raw_filters()
            for row in tx.all(
                f"SELECT {COST_GROUP}, {COST_SUMS} FROM audit_events WHERE {part} "
                f"AND usage_source IS NOT NULL {extra} GROUP BY {COST_GROUP}",
                params,
            )
        ]
    groups: dict[Group, list[int]] = defaultdict(lambda: [0] * 9)
    for row in (*rolled, *raw):
        key: Group = tuple(row[:8])
        sums = groups[key]
        for index, value in enumerate(row[8:]):
            sums[index] += int(value or 0)
    return groups


def _usd(nano: int, count: int) -> float | None:
    """Dollars from nano-dollars; None when no call had a figure (never 0 for unknown)."""
    return round(nano / NANO, 9) if count else None


LineKey = tuple[str, str, str | None, str | None, str]


def _report(groups: dict[Group, list[int]]) -> CostReport:
    # sums: calls, unknown, nano, reported calls, reported nano, in, out, cache read, write
    lines: dict[LineKey, list[int]] = defaultdict(lambda: [0] * 9)
    days: dict[str, list[int]] = defaultdict(lambda: [0] * 9)
    unknown: dict[tuple[str | None, str | None, str], int] = defaultdict(int)
    versions: set[str] = set()
    for key, sums in groups.items():
        day, project, role, vendor, model, source, reason, version = key
        line = lines[(project, role, vendor or None, model or None, source)]
        for index, value in enumerate(sums):
            line[index] += value
            days[day][index] += value
        if sums[1] and reason:
            unknown[(vendor or None, model or None, reason)] += sums[1]
        if version and sums[0] > sums[1]:
            versions.add(version)
    out = [_line(key, s) for key, s in sorted(lines.items(), key=lambda kv: str(kv[0]))]
    total = [sum(s[i] for s in lines.values()) for i in range(9)]
    cost_usd = _usd(total[2], total[0] - total[1])
    reported_usd = _usd(total[4], total[3])
    return CostReport(
        lines=out,
        days=[
            DayCost(
                day=day,
                calls=d[0],
                unknown_calls=d[1],
                cost_usd=_usd(d[2], d[0] - d[1]),
                reported_cost_usd=_usd(d[4], d[3]),
            )
            for day, d in sorted(days.items())
        ],
        unknown=[
            UnknownPrice(vendor=v, model=m, reason=r, calls=n)
            for (v, m, r), n in sorted(unknown.items(), key=lambda kv: str(kv[0]))
        ],
        cost_usd=cost_usd,
        priced_calls=total[0] - total[1],
        unknown_calls=total[1],
        reported_cost_usd=reported_usd,
        reported_calls=total[3],
        price_versions=sorted(versions),
        summary=summary(cost_usd, total[1], reported_usd, total[3]),
    )


def _line(key: LineKey, s: list[int]) -> CostLine:
    project, role, vendor, model, source = key
    return CostLine(
        project=project,
        role=role,
        vendor=vendor,
        model=model,
        usage_source=source,
        label=_LABELS.get(source, source),
        calls=s[0],
        priced_calls=s[0] - s[1],
        unknown_calls=s[1],
        cost_usd=_usd(s[2], s[0] - s[1]),
        reported_cost_usd=_usd(s[4], s[3]),
        tokens_in=s[5] if any(s[5:9]) else None,
        tokens_out=s[6] if any(s[5:9]) else None,
        cache_read=s[7] if any(s[5:9]) else None,
        cache_write=s[8] if any(s[5:9]) else None,
    )


def summary(
    cost_usd: float | None, unknown_calls: int, reported_usd: float | None, reported_calls: int
) -> str:
    """The total as a person should read it: what is known, plus what is not, never hidden."""
    known = _dollars(cost_usd) if cost_usd is not None else "$0.00 priced"
    text = known
    if unknown_calls:
        text += f" + {unknown_calls} call{'s' if unknown_calls != 1 else ''} of unknown price"
    if reported_usd is not None:
        said = _dollars(reported_usd)
        text += f" (the CLIs reported {said} themselves over {reported_calls})"
    return text


def _dollars(value: float) -> str:
    """As the cost table writes a figure: four decimals under a dollar, so a total of a tenth
    of a cent never reads $0.00 beside the lines it sums."""
    return f"${value:,.4f}" if 0 < value < 1 else f"${value:,.2f}"
