"""`agent-harness ingest`: record the work log in the audit database, once.

With --events, a JSONL file is first appended to the work log (each line once, by its own id,
as before); with --from, another tool's logs are read straight into the audit; --watch keeps
going, and runs maintenance once a UTC day.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_harness.cli.audit_cmd import audit_options, audit_target
from agent_harness.cli.output import FiniteRange, checked_name, console, print_json

if TYPE_CHECKING:
    from agent_harness.audit.ingest import IngestReport, Skipped
    from agent_harness.store import ingest as db_store_types
    from agent_harness.store.database import Store


@click.command(
    epilog="""\b
Examples:
  agent-harness ingest                                  # the work log into the audit database
  agent-harness ingest --watch 30                       # ... every 30 s; maintenance daily
  agent-harness ingest --events ci-events.jsonl
  agent-harness ingest --events ci-events.jsonl --project me/app:PLAN --watch 5
  agent-harness ingest --from claude-code               # ~/.claude/projects transcripts
  agent-harness ingest --from codex ~/.codex/sessions --json

\b
Each line of an --events file is one JSON object:
  {"id": "ci-8812", "kind": "ci_passed", "item": "T4", "ts": 1767000000, "payload": {...}}
"""
)
@click.option(
    "--events",
    "events_file",
    type=click.Path(path_type=Path),
    help="JSONL file of events to append to the work log first; each line carries its own "
    "unique 'id'.",
)
@click.option(
    "--project",
    metavar="PROJECT",
    callback=checked_name,
    help="Project for lines that do not name one.",
)
@click.option(
    "--from",
    "from_tool",
    type=click.Choice(["claude-code", "codex"]),
    help="Read another tool's logs into the audit (opt-in): Claude Code transcripts or Codex "
    "session logs, from PATH or their usual place.",
)
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option(
    "--watch",
    "watch_s",
    type=FiniteRange(min=0.1, max=86_400.0),
    metavar="SECONDS",
    help="Keep ingesting every SECONDS (and maintain once a UTC day); Ctrl-C stops.",
)
@audit_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def ingest(
    events_file: Path | None,
    project: str | None,
    from_tool: str | None,
    path: Path | None,
    watch_s: float | None,
    db: str | None,
    audit_db: str | None,
    as_json: bool,
) -> int:
    """Record what happened in the audit database; ingesting again adds nothing twice.

    A line or record that cannot be read is reported with where it is; the others are still
    ingested, and the exit code is 1 so a script notices. If the audit database cannot be
    written, that is reported (and counted as a drop `audit health` shows), exit code 1.
    """
    from agent_harness.errors import UsageError

    if path is not None and from_tool is None:
        raise UsageError("a PATH is read only with --from claude-code|codex")
    stopped = False

    def nap(seconds: float) -> None:
        nonlocal stopped
        try:
            time.sleep(seconds)
        except KeyboardInterrupt:
            stopped = True

    if from_tool is not None:
        target = audit_target(audit_db, db)
        code = _from_tool(from_tool, path, target, as_json)
        while watch_s is not None and not stopped:  # read whole again: each record once
            nap(watch_s)
            code = max(code, _from_tool(from_tool, path, target, as_json)) if not stopped else code
        return _ended(code, stopped)

    from agent_harness.cli.output import open_database

    target = audit_target(audit_db, db)
    with open_database(db, must_exist=events_file is None) as store:
        if events_file is not None:
            code = _events(
                store, events_file, project, watch_s, target, nap, lambda: stopped, as_json
            )
            return _ended(code, stopped)
        if watch_s is not None:
            from agent_harness.audit.observe import watch

            def shown(outcome: IngestReport | str) -> None:
                if not as_json and not isinstance(outcome, str) and outcome.added:
                    console().print(f"+{outcome.added} recorded", markup=False)

            watch(store, target, every_s=watch_s, sleep=nap, stop=lambda: stopped, on_round=shown)
        outcome = _record(store, target, ())
    return _ended(_finish(outcome, None, events_file, as_json), stopped)


def _ended(code: int, interrupted: bool) -> int:
    """A watch a person ended with Ctrl-C records what it read, then exits 130 (interrupted),
    as every command stopped so does."""
    if not interrupted:
        return code
    console(stderr=True).print("interrupted: the watch stopped; what it read is recorded")
    return 130


def _events(
    store: Store,
    events_file: Path,
    project: str | None,
    watch_s: float | None,
    target: str,
    nap: Any,
    stop: Any,
    as_json: bool,
) -> int:
    from agent_harness.store import ingest as db_store

    if watch_s is None:
        result = db_store.ingest(store, events_file, project=project)
        return _finish(
            _record(store, target, _skipped(events_file, result)), result, events_file, as_json
        )

    def on_batch(batch: db_store_types.IngestResult) -> None:
        _record(store, target, _skipped(events_file, batch))
        _maintain_daily(target)
        if not as_json:
            _progress(batch)

    result = db_store.watch(
        store,
        events_file,
        every_s=watch_s,
        sleep=nap,
        stop=stop,
        project=project,
        on_batch=on_batch,
    )
    return _finish(_record(store, target, ()), result, events_file, as_json)


def _skipped(source: Path, result: db_store_types.IngestResult) -> tuple[Skipped, ...]:
    from agent_harness.audit.ingest import Skipped

    return tuple(Skipped(f"{source}:{e.line}", e.reason) for e in result.errors)


def _record(store: Store, target: str, skipped: tuple[Skipped, ...]) -> IngestReport | str:
    from agent_harness.audit.observe import observe

    return observe(store, target, skipped=skipped)


_last_maintained: list[str] = []


def _maintain_daily(target: str) -> None:
    """Once a UTC day while watching: roll up yesterday, thin what is past retention."""
    from agent_harness.audit.database import open_audit
    from agent_harness.audit.maintenance import maintain
    from agent_harness.audit.records import day_of
    from agent_harness.errors import HarnessError

    today = day_of(time.time())
    if today in _last_maintained:
        return
    try:
        with open_audit(target) as audit:
            maintain(audit, now=time.time())
    except HarnessError as exc:  # the watch goes on; the next day's turn tries again
        console(stderr=True).print(f"audit maintenance failed: {exc.message}", markup=False)
    _last_maintained.append(today)


def _finish(
    outcome: IngestReport | str,
    result: db_store_types.IngestResult | None,
    events_file: Path | None,
    as_json: bool,
) -> int:
    dropped = isinstance(outcome, str)
    if as_json:
        data: dict[str, Any] = {}
        if result is not None:
            data = {
                "added": result.added,
                "duplicates": result.duplicates,
                "errors": [{"line": e.line, "reason": e.reason} for e in result.errors],
            }
        data["audit"] = {"dropped": outcome} if isinstance(outcome, str) else outcome.as_json()
        print_json(data)
    else:
        if result is not None:
            console().print(
                f"{result.added} added, {result.duplicates} already recorded, "
                f"{len(result.errors)} lines not read",
                markup=False,
            )
            for error in result.errors:
                console(stderr=True).print(
                    f"{events_file}:{error.line}: {error.reason}", markup=False
                )
        if isinstance(outcome, str):
            console(stderr=True).print(
                f"audit: not recorded ({outcome}); counted as a drop", markup=False
            )
        else:
            # Nothing read at all: the audit has the log up to its end already (a run or a
            # reconcile records into it as it ends), which "0 already there" did not say.
            said = (
                f"{outcome.added} recorded, {outcome.duplicates} already there, "
                f"{outcome.deliveries} deliveries"
                if outcome.added or outcome.duplicates
                else "nothing new since it was last recorded"
            )
            console().print(f"audit: {said}", markup=False)
            shown = f"{events_file}:" if events_file is not None else None
            for skipped in outcome.skipped:  # a day thinned, say: not in the lines above
                if shown is None or not skipped.where.startswith(shown):
                    console(stderr=True).print(
                        f"audit: {skipped.where}: {skipped.reason}", markup=False
                    )
    refused = not isinstance(outcome, str) and bool(outcome.skipped)
    return 1 if dropped or refused or (result is not None and result.errors) else 0


def _from_tool(tool: str, path: Path | None, target: str, as_json: bool) -> int:
    from agent_harness.audit.adapters import ingest_logs
    from agent_harness.audit.database import open_audit

    with open_audit(target) as audit:
        report = ingest_logs(audit, tool, path)
    if as_json:
        print_json(report.as_json())
    else:
        held = (
            f", {report.held} held back (a message still being written, or written in the last "
            "10 minutes: the next ingest takes it)"
            if report.held
            else ""
        )
        console().print(
            f"{tool}: {report.added} usage records added, {report.duplicates} already recorded, "
            f"{len(report.skipped)} not read{held}",
            markup=False,
        )
        for skipped in report.skipped:
            console(stderr=True).print(f"{skipped.where}: {skipped.reason}", markup=False)
    return 1 if report.skipped else 0


def _progress(batch: db_store_types.IngestResult) -> None:
    """One line per batch while watching, so a long watch shows it is alive."""
    console().print(
        f"+{batch.added} added, {batch.duplicates} already recorded, "
        f"{len(batch.errors)} lines not read",
        markup=False,
    )
