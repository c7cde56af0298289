"""What a host watching the fleet asks, each answered in one read of the database: a project's
work (counts, a page of its backlog, claims live and stale), one item with its history and its
session, failures by class, and a summary fit for a status line.

Every query here is bounded (a page, a count, an index range), so the answers stay quick with
tens of thousands of items and millions of events.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_harness.failures import POLICY, FailureClass
from agent_harness.queue.items import (
    ITEM_COLUMNS,
    LEASED_STATES,
    ItemRecord,
    ItemState,
    get_item,
    item_record,
    stop_note,
)
from agent_harness.store import reading
from agent_harness.store.database import Store
from agent_harness.store.events import AgentStarted, Claimed, Event, last_of

# Not ended: still to be claimed, or being worked.
OPEN_STATES: tuple[ItemState, ...] = (
    ItemState.PENDING,
    ItemState.WAITING,
    ItemState.CLAIMED,
    ItemState.CHECKS,
    ItemState.REVIEW,
)


@dataclass(frozen=True)
class ClaimView:
    item_id: str
    state: str
    worker: str
    attempt: int
    expires_at: float
    # Why the lease is held as it is, when something said so (a stopped run's leases wait for
    # the next run): None while its worker is at work.
    reason: str | None = None


@dataclass(frozen=True)
class WorkView:
    project: str
    counts: dict[str, int]
    total: int  # items of the chosen states, of which `backlog` is a page
    backlog: tuple[ItemRecord, ...]
    live: tuple[ClaimView, ...]
    stale: tuple[ClaimView, ...]


@dataclass(frozen=True)
class SessionLink:
    name: str
    host: str | None
    log: str | None
    attach: str  # the command that watches or answers it
    worker: str | None = None  # the worker whose run started it: its host holds the session


@dataclass(frozen=True)
class ItemView:
    project: str
    record: ItemRecord
    events: tuple[Event, ...]
    session: SessionLink | None


@dataclass(frozen=True)
class FailureCount:
    failure: str
    action: str | None  # what the failure policy does about it; None for a class unknown here
    count: int
    last_at: float
    last_message: str | None


@dataclass(frozen=True)
class ParkedEndpoint:
    key: str
    until: float
    reason: str


@dataclass(frozen=True)
class RecentFailure:
    event_id: int
    at: float
    project: str
    item: str | None
    reason: str


@dataclass(frozen=True)
class ErrorsView:
    by_class: tuple[FailureCount, ...]
    rate_limited: int  # failures of the rate-limit classes (burst, window, cap)
    attempts_failed: int
    attempts_by_class: tuple[FailureCount, ...]  # 'unclassified' for attempts before classes
    items_failed: int
    parked: tuple[ParkedEndpoint, ...]
    recent: tuple[RecentFailure, ...]  # the latest failed attempts, newest first
    first_event_id: int  # the events read: from this id to the newest


@dataclass(frozen=True)
class Summary:
    projects: int
    counts: dict[str, int]
    live: int
    stale: int
    last_event_id: int
    parked: int
    by_project: dict[str, dict[str, int]] = field(default_factory=dict)


def work_view(
    store: Store,
    project: str,
    *,
    states: Sequence[ItemState] = OPEN_STATES,
    offset: int = 0,
    limit: int = 100,
) -> WorkView:
    """Counts by state, a page of the items in `states` (plan order), and every claim."""
    marks = ", ".join("?" for _ in states)
    chosen = [s.value for s in states]
    now = store.clock()
    with store.transaction(write=False) as tx:
        counted = tx.all(
            "SELECT state, COUNT(*) FROM items WHERE project = ? GROUP BY state", (project,)
        )
        page = tx.all(
            f"SELECT {ITEM_COLUMNS} FROM items WHERE project = ? AND state IN ({marks}) "
            "ORDER BY seq, id LIMIT ? OFFSET ?",
            (project, *chosen, limit, offset),
        )
        claims = tx.all(
            "SELECT id, state, lease_worker, attempts, lease_expires, reason FROM items "
            f"WHERE project = ? AND state IN ({LEASED_STATES}) AND lease_expires IS NOT NULL "
            "ORDER BY lease_expires",
            (project,),
        )
        # The page's dependencies: an empty list read as "depends on nothing".
        deps: dict[str, list[str]] = {}
        for item_id, dep in tx.all(
            "SELECT item, dep FROM deps WHERE project = ? ORDER BY item, dep", (project,)
        ):
            deps.setdefault(str(item_id), []).append(str(dep))
    counts = {str(state): int(n) for state, n in counted}
    live: list[ClaimView] = []
    stale: list[ClaimView] = []
    for item_id, state, worker, attempt, expires, reason in claims:
        note = stop_note(reason)
        claim = ClaimView(item_id, state, worker or "?", int(attempt), float(expires), note)
        (live if claim.expires_at >= now else stale).append(claim)
    return WorkView(
        project=project,
        counts=counts,
        total=sum(counts.get(s, 0) for s in chosen),
        backlog=tuple(item_record(row, tuple(deps.get(str(row[1]), ()))) for row in page),
        live=tuple(live),
        stale=tuple(stale),
    )


def item_view(store: Store, project: str, item_id: str, *, limit: int = 1000) -> ItemView:
    """One item as it stands, its latest `limit` events (oldest first), and its agent's
    session when one was started."""
    record = get_item(store, project, item_id)
    with store.transaction(write=False) as tx:
        where, params = reading.of_item(project, item_id)
        newest = tx.all(
            f"SELECT id FROM events WHERE {where} ORDER BY id DESC LIMIT ?", (*params, limit)
        )
    oldest = int(newest[-1][0]) if newest else 0
    # A history, read in id order from the oldest of those ids (not a cursor to follow).
    events = tuple(reading.page(store, "id >= ?", (oldest,), limit, project, item_id, "id"))
    started = last_of(events, AgentStarted)
    session = None
    if started is not None:
        # The session and its log are on the host whose run started it, and attach finds
        # them through this database: the command names it (a PostgreSQL URL masked).
        where = shlex.quote(_attachable(store))
        session = SessionLink(
            name=started.session,
            host=started.host,
            log=started.log,
            attach=f"agent-harness attach {item_id} --project {project} --db {where}",
            worker=_starter(events),
        )
    return ItemView(project, record, events, session)


def _attachable(store: Store) -> str:
    """The database as `attach --db` takes it from anywhere on that host: a SQLite file by its
    full path; a PostgreSQL URL without its password (a masked one would be sent as the
    password; PGPASSWORD or ~/.pgpass gives it)."""
    if store.dialect.name == "sqlite":
        return str(Path(store.where).resolve())
    url = re.sub(r"(://[^:/@\s]*):\*\*\*@", r"\1@", store.where)
    url = re.sub(r"\?password=\*\*\*&", "?", url)
    return re.sub(r"[?&]password=\*\*\*(?=&|$)", "", url)


def _starter(events: Sequence[Event]) -> str | None:
    """The worker whose claim the last agent started under."""
    worker, starter = None, None
    for event in events:
        if isinstance(event.payload, Claimed):
            worker = event.payload.worker
        elif isinstance(event.payload, AgentStarted):
            starter = worker
    return starter


# Events whose payload names a failure class.
_FAILURE_KINDS = ("model.call", "model.retry", "model.parked", "agent_finished")

_RATE_LIMITS = {FailureClass.BURST.value, FailureClass.WINDOW.value, FailureClass.CAP.value}


def errors_view(
    store: Store, *, project: str | None = None, window: int = 100_000, recent: int = 10
) -> ErrorsView:
    """Failures by class (model calls and agent runs), rate limits among them, failed attempts
    (with the latest reasons) and items, and the endpoints parked now. Events are read from the
    latest `window` only (a range of row ids), so the cost stays bounded as the log grows."""
    where = " AND project = ?" if project else ""
    extra: tuple[Any, ...] = (project,) if project else ()
    marks = ", ".join("?" for _ in _FAILURE_KINDS)
    with store.transaction(write=False) as tx:
        newest = tx.one("SELECT MAX(id) FROM events")
        first = max(0, int(newest[0] or 0) - window) if newest else 0
        rows = tx.all(
            f"SELECT ts, payload FROM events WHERE id > ? AND kind IN ({marks}){where} ORDER BY id",
            (first, *_FAILURE_KINDS, *extra),
        )
        attempts = tx.all(
            "SELECT id, ts, project, item, payload FROM events "
            f"WHERE id > ? AND kind = 'attempt_failed'{where} ORDER BY id DESC",
            (first, *extra),
        )
        ended = tx.all(  # items failed with no attempt failing (a spent round budget)
            "SELECT id, ts, project, item, payload FROM events "
            f"WHERE id > ? AND kind = 'failed'{where} ORDER BY id DESC",
            (first, *extra),
        )
        failed = tx.one(f"SELECT COUNT(*) FROM items WHERE state = 'failed'{where}", extra)
        parked = tx.all(
            "SELECT key, until, reason FROM parked WHERE until > ? ORDER BY key", (store.clock(),)
        )
    return ErrorsView(
        by_class=_by_class(rows),
        rate_limited=sum(n for name, n in _counts(rows).items() if name in _RATE_LIMITS),
        attempts_failed=len(attempts),
        attempts_by_class=_by_class(
            [(row[1], row[4]) for row in reversed(attempts)], "reason", "unclassified"
        ),
        items_failed=int(failed[0]) if failed else 0,
        parked=tuple(ParkedEndpoint(str(k), float(u), str(r)) for k, u, r in parked),
        recent=tuple(
            RecentFailure(int(i), float(ts), str(p), item, str(json.loads(data).get("reason", "")))
            for i, ts, p, item, data in _newest(recent, attempts, _from_open_pulls(ended))
        ),
        first_event_id=first + 1,
    )


def _from_open_pulls(rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """The `failed` events of items that failed at their open pull request (a spent round
    budget), where no attempt failed to say it."""
    return [row for row in rows if json.loads(row[4]).get("from") == "pr_open"]


def _newest(count: int, *lists: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """The rows of `lists` (event rows, id first), newest first, at most `count` of them."""
    merged = sorted((row for rows in lists for row in rows), key=lambda row: -int(row[0]))
    return merged[:count]


def _failure_of(payload: str, unclassified: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """The failure class an event names and its fields; `unclassified` (or nothing) for one
    that names none."""
    data = json.loads(payload)
    if not isinstance(data, dict):
        return None
    failure = data.get("failure")
    if not isinstance(failure, str) or not failure:
        return None if unclassified is None else (unclassified, data)
    return failure, data


def _counts(rows: Sequence[Sequence[Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _ts, payload in rows:
        found = _failure_of(payload)
        if found is not None:
            counts[found[0]] = counts.get(found[0], 0) + 1
    return counts


def _by_class(
    rows: Sequence[Sequence[Any]],
    message: str = "failure_message",
    unclassified: str | None = None,
) -> tuple[FailureCount, ...]:
    """(ts, payload) rows, oldest first, counted by failure class with the latest `message`;
    a row that names no class is counted as `unclassified`, or not at all."""
    found: dict[str, list[Any]] = {}
    for ts, payload in rows:
        failure = _failure_of(payload, unclassified)
        if failure is None:
            continue
        name, data = failure
        entry = found.setdefault(name, [0, 0.0, None])
        entry[0] += 1
        entry[1] = float(ts)
        entry[2] = data.get(message) or entry[2]
    known = {c.value: c for c in FailureClass}
    return tuple(
        FailureCount(
            failure=name,
            action=POLICY[known[name]].value if name in known else None,
            count=count,
            last_at=last,
            last_message=message,
        )
        for name, (count, last, message) in sorted(found.items(), key=lambda kv: -kv[1][0])
    )


def summary(store: Store) -> Summary:
    """Enough for a status line: items by state over every project, claims live and stale,
    the newest event's id (poll /events after it) and how many endpoints are parked."""
    now = store.clock()
    with store.transaction(write=False) as tx:
        counted = tx.all("SELECT project, state, COUNT(*) FROM items GROUP BY project, state")
        claims = tx.one(
            "SELECT COALESCE(SUM(CASE WHEN lease_expires >= ? THEN 1 ELSE 0 END), 0), "
            "COALESCE(SUM(CASE WHEN lease_expires < ? THEN 1 ELSE 0 END), 0) "
            "FROM items WHERE lease_expires IS NOT NULL",
            (now, now),
        )
        # The newest event a follower may start after: settled, so none appears before it.
        last = tx.one(
            f"SELECT id FROM events WHERE {tx.dialect.settled()} "
            f"ORDER BY {tx.dialect.log_order(desc=True)} LIMIT 1"
        )
        parked = tx.one("SELECT COUNT(*) FROM parked WHERE until > ?", (now,))
        registered = tx.all("SELECT id FROM projects")
    counts: dict[str, int] = {}
    by_project: dict[str, dict[str, int]] = {}
    for project, state, n in counted:
        counts[str(state)] = counts.get(str(state), 0) + int(n)
        by_project.setdefault(str(project), {})[str(state)] = int(n)
    names = set(by_project) | {str(row[0]) for row in registered}
    return Summary(
        projects=len(names),
        counts=counts,
        live=int(claims[0]) if claims else 0,
        stale=int(claims[1]) if claims else 0,
        last_event_id=int(last[0] or 0) if last else 0,
        parked=int(parked[0]) if parked else 0,
        by_project=by_project,
    )
