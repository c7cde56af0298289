"""Appending events from a JSONL file, each at most once, and following a file as it grows."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import InputError, read_json
from agent_harness.secrets.redact import held_secrets, redact_payload
from agent_harness.store.database import Store, _PendingEvent


@dataclass(frozen=True)
class LineError:
    line: int
    reason: str


@dataclass(frozen=True)
class IngestResult:
    added: int = 0
    duplicates: int = 0
    errors: tuple[LineError, ...] = ()
    offset: int = 0  # bytes consumed; pass back in to continue where this read stopped
    lines: int = 0  # lines consumed, so the next read numbers its lines on from here

    def __add__(self, other: IngestResult) -> IngestResult:
        return IngestResult(
            self.added + other.added,
            self.duplicates + other.duplicates,
            self.errors + other.errors,
            other.offset,
            other.lines,
        )


_YEAR_10000 = 253_402_300_800  # 10000-01-01T00:00:00Z, in epoch seconds
_EVENT_KEYS = {"id", "kind", "project", "item", "ts", "payload"}


_NAME_MAX = 200


# How far ahead of this machine's clock a line's `ts` may be (another machine's clock, a zone
# written wrong): more, and it is no time anything happened (a day in the year 5138 was shown).
_AHEAD_S = 86_400.0


def _parse_event_line(
    text: str, project: str | None, known: Mapping[str, str], now: float = float("inf")
) -> _PendingEvent | str:
    """The event a line describes, or why it cannot be read."""
    try:
        data = read_json(text)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg}"
    except ValueError as exc:  # a number too long to read
        return f"not JSON: {exc}"
    except RecursionError:
        return "not JSON: nested too deeply"
    if not isinstance(data, dict):
        return "not a JSON object"
    external_id = data.get("id")
    if not isinstance(external_id, str | int) or isinstance(external_id, bool) or external_id == "":
        return "needs an 'id' (string or integer) to be ingested idempotently"
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        return "needs a 'kind' string"
    where = data.get("project", project)
    if not isinstance(where, str) or not where:
        return "needs a 'project' (in the line or given with --project)"
    item = data.get("item")
    if item is not None and not isinstance(item, str):
        return "'item' must be a string"
    for name, value in (("kind", kind), ("project", where), ("item", item)):
        if value is not None and (len(value) > _NAME_MAX or not value.isprintable()):
            # Shown by `audit events` and `work show`: an escape sequence in a name would
            # retitle or clear the reader's terminal, and a name no listing can fit is no name.
            return f"'{name}' must be printable text of at most {_NAME_MAX} characters"
    ts = data.get("ts")
    if ts is not None and (
        not isinstance(ts, int | float) or isinstance(ts, bool) or not 0 <= ts < _YEAR_10000
    ):
        # An instant no calendar can show would break every later reading of the log.
        return "'ts' must be epoch seconds, from 0 up to the year 10000"
    if ts is not None and ts > now + _AHEAD_S:
        return f"'ts' is {(ts - now) / 86_400:,.0f} days ahead of this machine's clock"
    payload = data.get("payload", {})
    if not isinstance(payload, dict):
        return "'payload' must be an object"
    extra = {k: v for k, v in data.items() if k not in _EVENT_KEYS}
    # What a line says someone said (a reason, a message, an output's tail) is masked where
    # it holds a credential, as in the harness's own events; its data (branches, shas, names)
    # is kept as written.
    return _PendingEvent(
        ts=float(ts) if ts is not None else -1.0,
        project=where,
        item=item,
        kind=kind,
        payload=redact_payload({**extra, **payload}, known),
        external_id=str(external_id),
    )


def ingest(
    store: Store,
    path: Path | str,
    *,
    project: str | None = None,
    offset: int = 0,
    first_line: int = 1,
    partial_last_line: bool = True,
) -> IngestResult:
    """Append the events of a JSONL file, each at most once (keyed by its own `id`).

    A line that cannot be read is reported with its number and the rest are still ingested.
    Reading starts at byte `offset`; with `partial_last_line=False` an unterminated last line
    is left for the next read, as a writer may still be appending it.
    """
    source = Path(path)
    try:
        with source.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except OSError as exc:
        raise InputError(f"cannot read {source}: {exc.strerror or exc}") from exc
    if not partial_last_line and not chunk.endswith(b"\n"):
        cut = chunk.rfind(b"\n") + 1
        chunk = chunk[:cut]
    errors: list[LineError] = []
    events: list[_PendingEvent] = []
    known = held_secrets()  # looked up once for the file, not once per text
    now = store.clock()
    number = first_line - 1
    for raw in chunk.splitlines():
        number += 1
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            errors.append(LineError(number, "not UTF-8"))
            continue
        if not text:
            continue
        parsed = _parse_event_line(text, project, known, now)
        if isinstance(parsed, str):
            errors.append(LineError(number, parsed))
        else:
            events.append(parsed)
    added = 0
    if events:
        with store.transaction() as tx:
            for event in events:
                if event.ts < 0:
                    event.ts = now
            tx.add_events(events)
            added = tx.flush_events()
    return IngestResult(
        added=added,
        duplicates=len(events) - added,
        errors=tuple(errors),
        offset=offset + len(chunk),
        lines=number,
    )


def watch(
    store: Store,
    path: Path | str,
    *,
    every_s: float,
    sleep: Callable[[float], None],
    stop: Callable[[], bool],
    project: str | None = None,
    on_batch: Callable[[IngestResult], None] | None = None,
) -> IngestResult:
    """Keep ingesting `path` as it grows until `stop()` is true; returns the totals.

    A file that shrinks was replaced or truncated: it is read again from the start, which adds
    nothing twice because every event carries its own id.
    """
    source = Path(path)
    total = IngestResult()
    offset, lines = 0, 0
    while True:
        finishing = stop()
        try:
            size = source.stat().st_size
        except FileNotFoundError:
            size = -1
        if 0 <= size < offset:
            offset, lines = 0, 0
        if size > offset:
            batch = ingest(
                store,
                source,
                project=project,
                offset=offset,
                first_line=lines + 1,
                partial_last_line=finishing,
            )
            offset, lines = batch.offset, batch.lines
            total = total + batch
            if on_batch is not None and (batch.added or batch.duplicates or batch.errors):
                on_batch(batch)
        if finishing:
            return total
        sleep(every_s)
