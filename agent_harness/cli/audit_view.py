"""Rendering the audited answers: rich tables, and per-day bars one can take in at a glance."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.markup import escape as _escape
from rich.table import Table

from agent_harness.cli.output import visible

if TYPE_CHECKING:
    from rich.console import Console

    from agent_harness.audit.baselines import Comparison
    from agent_harness.audit.cost import CostReport
    from agent_harness.audit.delivery import DeliveryReport
    from agent_harness.audit.health import AuditHealth
    from agent_harness.audit.history import EventsPage
    from agent_harness.audit.maintenance import MaintenanceReport, RollupDay

BAR_WIDTH = 20


def escape(text: str) -> str:
    """Text from the record (a project, a model, a kind another tool wrote) as markup-free text,
    control characters spelt out."""
    return _escape(visible(text))


def usd(value: float | None) -> str:
    """A dollar figure; an unknown one shows as "unknown", never as $0.00."""
    if value is None:
        return "unknown"
    return f"${value:,.4f}" if 0 < value < 1 else f"${value:,.2f}"


def bar(value: float, top: float, width: int = BAR_WIDTH) -> str:
    if top <= 0 or value <= 0:
        return ""
    return "█" * max(1, round(width * value / top))


def render_cost(out: Console, report: CostReport) -> None:
    # Eight columns share a terminal of 80 characters: a column that would say nothing (no
    # unpriced call, no cost a tool reported) is left out, names fold, figures never break.
    unpriced = any(line.unknown_calls for line in report.lines)
    reported = any(line.reported_cost_usd is not None for line in report.lines)
    table = Table(title="Spend by project, role and model", title_justify="left")
    for name in ("project", "role", "model", "usage from"):
        table.add_column(name, overflow="fold")
    figures = ["calls", *(["unpriced"] if unpriced else []), "cost"]
    for name in [*figures, *(["tool's own"] if reported else [])]:
        table.add_column(name, no_wrap=True, justify="right")
    for line in report.lines:
        model = f"{line.vendor or '?'}:{line.model}" if line.model else "(not named)"
        row = [escape(line.project), escape(line.role), escape(model), line.label]
        row.append(str(line.calls))
        if unpriced:
            row.append(str(line.unknown_calls) if line.unknown_calls else "-")
        row.append(usd(line.cost_usd))
        if reported:
            row.append(usd(line.reported_cost_usd) if line.reported_cost_usd is not None else "-")
        table.add_row(*row)
    out.print(table)
    if report.days:
        top = max((d.cost_usd or 0.0) for d in report.days)
        chart = Table(title="Cost per day (UTC)", title_justify="left", box=None)
        for name in ("day", "cost", "", "unknown price"):
            chart.add_column(name, no_wrap=True)
        for day in report.days:
            chart.add_row(
                day.day,
                usd(day.cost_usd),
                f"[green]{bar(day.cost_usd or 0.0, top)}[/green]",
                f"+{day.unknown_calls} calls" if day.unknown_calls else "",
            )
        out.print(chart)
    for unknown in report.unknown:
        model = f"{unknown.vendor or '?'}:{unknown.model}" if unknown.model else "a model not named"
        out.print(
            f"unknown price, {unknown.calls} calls of {model}: {unknown.reason}", markup=False
        )
    out.print(f"Total: {report.summary}", markup=False)
    if report.price_versions:
        out.print(f"Priced with {', '.join(report.price_versions)}", markup=False)


def render_delivery(out: Console, report: DeliveryReport) -> None:
    chart = Table(title="Delivered per day (UTC)", title_justify="left", box=None)
    for name in ("day", "merged", "", "closed", "reverted", "reviews", "rejected"):
        chart.add_column(name, no_wrap=True)
    top = max((d.merged for d in report.days), default=0)
    for day in report.days:
        chart.add_row(
            day.day,
            str(day.merged),
            f"[green]{bar(day.merged, top)}[/green]",
            str(day.closed),
            str(day.reverted),
            str(day.reviews),
            str(day.rejections),
        )
    out.print(chart)

    def hours(value: float | None) -> str:
        if value is None:
            return "-"
        if value < 1 / 60:
            return f"{value * 3600:.0f} s"
        return f"{value * 60:.1f} min" if value < 1 else f"{value:.2f} h"

    rate = report.rejection_rate
    each = report.attempts_per_delivered
    tries = "-" if each is None else f"{each:.2f}"
    out.print(
        f"{report.merged} merged, {report.closed} closed, {report.reverted} reverted. "
        f"Median claim to PR {hours(report.hours_claim_to_pr)}, PR to merge "
        f"{hours(report.hours_pr_to_merge)}, claim to merge {hours(report.hours_claim_to_merge)}; "
        f"attempts per delivered item {tries}; "
        f"reviewer rejected {report.rejections} of {report.reviews}"
        + ("" if rate is None else f" ({rate:.0%})"),
        markup=False,
    )


def _ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    seconds = max(0.0, time.time() - ts)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
    return f"{stamp} ({int(seconds // 60)} min ago)"


def render_health(out: Console, health: AuditHealth) -> None:
    out.print("recording: " + ("[green]yes[/green]" if health.ok else "[red]problems[/red]"))
    out.print(
        f"last event: {health.last_event_kind or '-'} at {_ago(health.last_event_ts)}",
        markup=False,
    )
    out.print(
        f"last ingest: {_ago(health.last_ingest_at)}, {health.last_ingest_added or 0} added",
        markup=False,
    )
    waiting = health.work_events_waiting
    out.print(
        "lag behind the work log: "
        + (
            "unknown (no work database)"
            if waiting is None
            else f"{waiting} events, {health.lag_s or 0:.0f} s"
        ),
        markup=False,
    )
    out.print(f"drops: {health.drops.count}; unreadable lines: {health.skipped_lines}")
    out.print(f"append-only protection: {'intact' if health.protected else 'BROKEN'}")
    out.print(f"last maintenance: {_ago(health.last_maintenance_at)}", markup=False)
    for problem in health.problems:
        out.print(f"problem: {problem}", markup=False)


def render_events(out: Console, page: EventsPage) -> None:
    table = Table(box=None)
    for name in ("id", "time (UTC)", "project", "item", "kind", "source", "cost"):
        table.add_column(name, overflow="fold")
    for event in page.events:
        cost = usd(event.cost_usd) if event.role else ""
        table.add_row(
            str(event.id),
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(event.ts)),
            escape(event.project),
            escape(event.item or "-"),
            escape(event.kind),
            event.source,
            cost,
        )
    out.print(table)
    if page.next_after is not None:
        out.print(f"more: --after {page.next_after}")
    if page.thinned_before:
        out.print(
            f"raw events before {page.thinned_before} were thinned; `audit rollups` keeps them"
        )


def render_rollups(out: Console, days: list[RollupDay]) -> None:
    table = Table(title="Daily rollups (kept forever)", title_justify="left")
    for name in ("day", "events", "calls", "cost", "unknown price", "reviews", "rejected"):
        table.add_column(name)
    for day in days:
        table.add_row(
            day.day,
            str(day.events),
            str(day.calls),
            usd(day.cost_usd),
            str(day.unknown_calls),
            str(day.reviews),
            str(day.rejections),
        )
    out.print(table)


def render_baselines(out: Console, rows: list[Comparison]) -> None:
    table = Table(title="Baselines against what was measured", title_justify="left")
    for name in ("label", "baseline/day", "measured/day", "ratio", "cost per delivered"):
        table.add_column(name)
    for row in rows:
        table.add_row(
            escape(row.baseline.label),
            f"{row.baseline_per_day:.2f}",
            "-" if row.measured_per_day is None else f"{row.measured_per_day:.2f}",
            "-" if row.ratio is None else f"{row.ratio:.2f}x",
            usd(row.cost_per_delivered_usd)
            + (f" + {row.unknown_calls} calls unknown" if row.unknown_calls else ""),
        )
    out.print(table)


def render_maintenance(out: Console, report: MaintenanceReport) -> None:
    out.print(
        f"rolled up {report.rolled} raw events of days before {report.cutoff_day}; thinned "
        f"{report.thinned} covered events of days before {report.thin_before}",
        markup=False,
    )
