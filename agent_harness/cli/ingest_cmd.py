"""`agent-harness ingest`: append events from a JSONL file to the log, each at most once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_harness.cli.output import console, from_env, print_json

if TYPE_CHECKING:
    from agent_harness.store import ingest as db_store_types


@click.command(
    epilog="""\b
Examples:
  agent-harness ingest --events ci-events.jsonl
  agent-harness ingest --events ci-events.jsonl --project me/app:PLAN --watch 5
  agent-harness ingest --events ci-events.jsonl --json

\b
Each line is one JSON object:
  {"id": "ci-8812", "kind": "ci_passed", "item": "T4", "ts": 1767000000, "payload": {...}}
"""
)
@click.option(
    "--events",
    "events_file",
    required=True,
    type=click.Path(path_type=Path),
    help="JSONL file of events; each line carries its own unique 'id'.",
)
@click.option("--project", metavar="PROJECT", help="Project for lines that do not name one.")
@click.option(
    "--watch",
    "watch_s",
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="Keep ingesting as the file grows, checking every SECONDS; Ctrl-C stops.",
)
@click.option(
    "--db",
    metavar="URL",
    callback=from_env("AGENT_HARNESS_DB"),
    help="Database URL or path (default .agent-harness/harness.sqlite).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def ingest(
    events_file: Path, project: str | None, watch_s: float | None, db: str | None, as_json: bool
) -> int:
    """Append the events of a JSONL file; ingesting it again adds nothing twice.

    A line that cannot be read is reported with its line number; the others are still
    ingested, and the exit code is 1 so a script notices.
    """
    from agent_harness.store import ingest as db_store

    stopped = False

    def nap(seconds: float) -> None:
        nonlocal stopped
        try:
            time.sleep(seconds)
        except KeyboardInterrupt:
            stopped = True

    from agent_harness.cli.output import open_database

    with open_database(db, must_exist=False) as store:
        if watch_s is None:
            result = db_store.ingest(store, events_file, project=project)
        else:
            result = db_store.watch(
                store,
                events_file,
                every_s=watch_s,
                sleep=nap,
                stop=lambda: stopped,
                project=project,
                on_batch=None if as_json else _progress,
            )
    if as_json:
        print_json(
            {
                "added": result.added,
                "duplicates": result.duplicates,
                "errors": [{"line": e.line, "reason": e.reason} for e in result.errors],
            }
        )
    else:
        console().print(
            f"{result.added} added, {result.duplicates} already recorded, "
            f"{len(result.errors)} lines not read",
            markup=False,
        )
        for error in result.errors:
            console(stderr=True).print(f"{events_file}:{error.line}: {error.reason}", markup=False)
    return 1 if result.errors else 0


def _progress(batch: db_store_types.IngestResult) -> None:
    """One line per batch while watching, so a long watch shows it is alive."""
    console().print(
        f"+{batch.added} added, {batch.duplicates} already recorded, "
        f"{len(batch.errors)} lines not read",
        markup=False,
    )
