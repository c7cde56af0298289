"""Ingesting events from JSONL: idempotent by each line's id, malformed lines reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.errors import InputError
from agent_harness.store.database import Store
from agent_harness.store.ingest import IngestResult, ingest, watch

pytestmark = pytest.mark.integration

P = "me/app:PLAN"


def _line(event_id: str, **extra: object) -> str:
    return json.dumps({"id": event_id, "kind": "ci", "project": P, **extra}) + "\n"


def test_ingest_is_idempotent_over_the_same_and_overlapping_files(
    store: Store, db_dir: Path
) -> None:
    first = db_dir / "a.jsonl"
    first.write_text("".join(_line(f"e{n}", item="T1", payload={"n": n}) for n in range(5)))
    assert (ingest(store, first).added, ingest(store, first).added) == (5, 0)
    overlap = db_dir / "b.jsonl"
    overlap.write_text("".join(_line(f"e{n}", payload={"n": n}) for n in range(3, 8)))
    result = ingest(store, overlap)
    assert (result.added, result.duplicates) == (3, 2)
    events = store.all_events()
    assert [e.external_id for e in events] == [f"e{n}" for n in range(8)]
    assert events[0].payload.as_dict() == {"n": 0} and events[0].item == "T1"


def test_malformed_lines_are_reported_by_number_and_the_rest_ingested(
    store: Store, db_dir: Path
) -> None:
    path = db_dir / "events.jsonl"
    path.write_text(
        _line("e1")
        + "{not json\n"
        + "\n"
        + json.dumps({"kind": "ci", "project": P})
        + "\n"
        + json.dumps({"id": "e2", "kind": "ci"})
        + "\n"
        + _line("e3", ts=1234.5, sha="abc")
    )
    result = ingest(store, path)
    assert result.added == 2
    assert [(e.line, e.reason.split(":")[0]) for e in result.errors] == [
        (2, "not JSON"),
        (4, "needs an 'id' (string or integer) to be ingested idempotently"),
        (5, "needs a 'project' (in the line or given with --project)"),
    ]
    last = store.all_events()[-1]
    assert (last.ts, last.payload.as_dict()) == (1234.5, {"sha": "abc"})
    assert ingest(store, path, project="other").added == 1  # line 5 now has a project


def test_an_instant_no_calendar_can_show_is_refused_and_the_log_stays_readable(
    store: Store, db_dir: Path
) -> None:
    # Taken, 1e308 was kept and then broke every later ingest and `work show`; a negative
    # one was quietly stored as now.
    path = db_dir / "events.jsonl"
    path.write_text(
        _line("e1", ts=1e308)
        + _line("e2", ts=-1)
        + '{"id": "e3", "kind": "ci", "project": "me/app:PLAN", "ts": Infinity}\n'
        + _line("e4", ts=253_402_300_800)
        + _line("e5", ts=253_402_300_799.5)
        + _line("e6", ts=0)
    )
    result = ingest(store, path)
    reason = "'ts' must be epoch seconds, from 0 up to the year 10000"
    assert [(e.line, e.reason) for e in result.errors[:4]] == [
        (1, reason),
        (2, reason),
        (3, "not JSON: Infinity is not a JSON number"),
        (4, reason),
    ]
    # The last second of the year 9999 is a calendar's, but no time anything happened yet:
    # `audit health` said "last event 5138-11-16 (0 min ago)" for one such.
    [(line, ahead)] = [(e.line, e.reason) for e in result.errors[4:]]
    assert (
        line == 5 and ahead.startswith("'ts' is ") and "days ahead of this machine's clock" in ahead
    )
    assert [(e.external_id, e.ts) for e in store.all_events()] == [("e6", 0.0)]
    soon = db_dir / "soon.jsonl"
    soon.write_text(_line("e7", ts=store.clock() + 3600))  # another machine's clock: taken
    assert ingest(store, soon).added == 1


def test_lines_too_long_or_deep_to_read_are_reported_and_the_rest_ingested(
    store: Store, db_dir: Path
) -> None:
    path = db_dir / "events.jsonl"
    path.write_text(
        '{"id": "x", "n": '
        + "9" * 5000
        + "}\n"
        + '{"id": "y", "n": '
        + "[" * 5000
        + "\n"
        + _line("e1")
    )
    result = ingest(store, path)
    assert result.added == 1
    assert [(e.line, e.reason.split(":")[0]) for e in result.errors] == [
        (1, "not JSON"),
        (2, "not JSON"),
    ]


def test_a_missing_file_is_an_input_error(store: Store, db_dir: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        ingest(store, db_dir / "absent.jsonl")


def test_watch_ingests_as_the_file_grows_and_stops_when_asked(store: Store, db_dir: Path) -> None:
    path = db_dir / "live.jsonl"
    path.write_text(_line("e0"))
    writes = [
        _line("e1") + _line("e2"),
        '{"id": "e3", "kind": "ci", "pro',  # a writer caught mid-line
        f'ject": "{P}"}}\n' + "garbage\n",
        _line("e4") + _line("e0"),
    ]
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        if writes:
            with path.open("a") as handle:
                handle.write(writes.pop(0))

    batches: list[IngestResult] = []
    total = watch(
        store,
        path,
        every_s=2.0,
        sleep=sleep,
        stop=lambda: len(naps) >= 6,
        on_batch=batches.append,
    )
    assert [e.external_id for e in store.all_events()] == ["e0", "e1", "e2", "e3", "e4"]
    assert (total.added, total.duplicates) == (5, 1)
    assert [(e.line, e.reason) for e in total.errors] == [(5, "not JSON: Expecting value")]
    assert set(naps) == {2.0}
    assert all(b.added or b.duplicates or b.errors for b in batches)


def test_names_with_control_characters_or_past_any_listing_are_refused(
    store: Store, db_dir: Path
) -> None:
    # Kept, `audit events` and `work show` sent the escape sequence to the reader's terminal.
    path = db_dir / "events.jsonl"
    path.write_text(
        json.dumps({"id": "e1", "kind": "\x1b]0;pwned\x07evil", "project": P}) + "\n"
        + _line("e2", item="T1\x1b[2J")
        + json.dumps({"id": "e3", "kind": "ci", "project": "\x1b[31m/evil:K"}) + "\n"
        + _line("e4", item="T" * 201)
        + _line("e5", item="T1")
    )  # fmt: skip
    result = ingest(store, path)
    said = {name: f"'{name}' must be printable text of at most 200 characters"
            for name in ("kind", "item", "project")}  # fmt: skip
    assert [(e.line, e.reason) for e in result.errors] == [
        (1, said["kind"]), (2, said["item"]), (3, said["project"]), (4, said["item"]),
    ]  # fmt: skip
    assert [e.external_id for e in store.all_events()] == ["e5"]
