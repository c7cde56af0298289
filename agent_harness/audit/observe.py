"""Recording a run into the audit without ever stopping it.

`observe` brings the audit database up to date from the work log. When the audit database
cannot be opened or written, the run goes on: the drop is counted in the work database and
`audit health` reports it. Nothing is lost by a drop while the work database lives: the next
ingest starts from the high-water mark and catches up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_harness.audit.database import open_audit
from agent_harness.audit.health import count_drop
from agent_harness.audit.ingest import IngestReport, Skipped, ingest_work_store
from agent_harness.audit.maintenance import maintain
from agent_harness.audit.records import day_of
from agent_harness.errors import HarnessError
from agent_harness.store.database import Store
from agent_harness.store.errors import StoreError


def observe(
    work: Store, audit_target: str, *, skipped: tuple[Skipped, ...] = ()
) -> IngestReport | str:
    """Ingest the work log into the audit database at `audit_target`; on failure, the reason
    (counted as a drop) instead of an exception."""
    try:
        with open_audit(audit_target, clock=work.clock) as audit:
            return ingest_work_store(work, audit, skipped=skipped)
    except HarnessError as exc:  # the audit's own failure: counted, never raised into the run
        reason = str(exc)
        try:
            count_drop(work, reason)
        except StoreError as also:
            reason += f" (and the drop could not be counted: {also.detail})"
        return reason


@dataclass
class Watch:
    """What a watch did: the ingests, the maintenance runs and what went wrong."""

    recorded: int = 0
    maintained: list[str] = field(default_factory=list)  # the UTC days maintenance ran on
    problems: list[str] = field(default_factory=list)


def watch(
    work: Store,
    audit_target: str,
    *,
    every_s: float,
    sleep: Callable[[float], None],
    stop: Callable[[], bool],
    on_round: Callable[[IngestReport | str], None] = lambda _report: None,
) -> Watch:
    """Record the work log every `every_s` seconds until `stop()`, and run maintenance once a
    UTC day (the first round of each day, by the work database's clock)."""
    done = Watch()
    while True:
        outcome = observe(work, audit_target)
        on_round(outcome)
        if isinstance(outcome, str):
            done.problems.append(outcome)
        else:
            done.recorded += outcome.added
        today = day_of(work.clock())
        if today not in done.maintained:
            done.maintained.append(today)
            try:
                with open_audit(audit_target, clock=work.clock) as audit:
                    maintain(audit, now=work.clock())
            except HarnessError as exc:  # tried again on the next day's first round
                done.problems.append(f"maintenance: {exc.message}")
        if stop():
            return done
        sleep(every_s)
