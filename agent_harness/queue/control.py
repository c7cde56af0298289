"""What a person asked a project's workers to do (run, pause, drain), and what the running
fleet says it is doing, both kept in the store.

A running `agent-harness run` reads the asked state between items and publishes its pools'
status beside it, so `agent-harness control` (and later the HTTP API) acts on a run in another
process without signals: pausing claims nothing new, draining finishes the work in flight and
ends the run, resuming carries on. Work in flight is never interrupted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from pydantic import BaseModel, Field

from agent_harness.errors import UsageError
from agent_harness.queue.fleet import PoolState, PoolStatus
from agent_harness.queue.items import NoProjectYet, projects
from agent_harness.store.database import Store, Tx
from agent_harness.store.events import ControlChanged


class UnknownProjectHere(UsageError):
    """No project of that name in this database (the API's 404)."""


# What a person may ask; the pool's own "stopped" is a result, never a request.
ASKABLE = (PoolState.RUNNING, PoolState.PAUSED, PoolState.DRAINING)
VERBS = {"pause": PoolState.PAUSED, "drain": PoolState.DRAINING, "resume": PoolState.RUNNING}

# A run reports its pools about once a second; one silent this long has ended or died.
LIVE_REPORT_S = 30.0


class PoolReport(BaseModel):
    """What a running fleet last said about one project's pool."""

    state: PoolState = Field(
        description="What the pool is doing: running, paused, draining, stopped."
    )
    workers: int = Field(description="Worker threads alive.")
    in_flight: int = Field(description="Items being worked right now.")
    handled: int = Field(description="Items this run has handled so far.")
    reports: int = Field(
        description="How many times the run has reported; it counts up while the run lives."
    )
    at: float = Field(description="Epoch seconds of the last report.")


class HostPool(BaseModel):
    """What one host's run last said about a project's pool."""

    host: str = Field(description="The host id of the run (its workers are named host/w1…).")
    pool: PoolReport = Field(description="Its last report.")


class Control(BaseModel):
    """One project's control: what was asked, and what its running pools (if any) report."""

    project: str = Field(description="owner/repo:plankey")
    asked: PoolState = Field(default=PoolState.RUNNING, description="running, paused or draining.")
    asked_at: float | None = Field(default=None, description="When it was asked; null: never.")
    asked_by: str | None = Field(default=None, description="Who asked (the command, the API).")
    pool: PoolReport | None = Field(
        default=None,
        description="The fleet's pool, summed over the hosts whose runs report now (their "
        "workers, items in flight, items handled; the busiest state); with none, the last "
        "report of any. Null if no run has reported.",
    )
    hosts: list[HostPool] = Field(
        default_factory=list, description="Each host's own last report, by host id."
    )


def _asked_key(project: str) -> str:
    return f"control:{project}"


def _pool_key(project: str, host: str = "") -> str:
    # One report per host: hosts sharing a database each report their own pool (a run of an
    # older release wrote one report per project, with no host: still read, as host "").
    return f"control-pool:{project}" + (f"@{host}" if host else "")


# Which state a pool summed over hosts is in: the busiest any live host reports.
_BUSIEST = (PoolState.RUNNING, PoolState.DRAINING, PoolState.PAUSED, PoolState.STOPPED)


def _host_pools(tx: Tx, project: str) -> list[HostPool]:
    key = _pool_key(project)
    rows = tx.all(
        "SELECT key, value FROM meta WHERE key = ? OR substr(key, 1, ?) = ? ORDER BY key",
        (key, len(key) + 1, key + "@"),
    )
    hosts = [
        HostPool(host=str(k)[len(key) + 1 :], pool=PoolReport.model_validate(json.loads(str(v))))
        for k, v in rows
    ]
    # A report of an older release (no host) is left out once any host reports its own.
    named = [h for h in hosts if h.host]
    return named or hosts


def _summed(hosts: list[HostPool], now: float) -> PoolReport | None:
    """The pool of every host whose run reports now, as one; else the latest report."""
    if not hosts:
        return None
    live = [h.pool for h in hosts if now - h.pool.at < LIVE_REPORT_S]
    live = [p for p in live if p.state != PoolState.STOPPED] or live
    if not live:
        return max((h.pool for h in hosts), key=lambda p: p.at)
    return PoolReport(
        state=min((p.state for p in live), key=_BUSIEST.index),
        workers=sum(p.workers for p in live),
        in_flight=sum(p.in_flight for p in live),
        handled=sum(p.handled for p in live),
        reports=sum(h.pool.reports for h in hosts),
        at=max(p.at for p in live),
    )


def _meta(tx: Tx, key: str) -> dict[str, object] | None:
    row = tx.one("SELECT value FROM meta WHERE key = ?", (key,))
    return None if row is None else dict(json.loads(str(row[0])))


def _put(tx: Tx, key: str, value: dict[str, object]) -> None:
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(value)),
    )


def _read(tx: Tx, project: str) -> Control:
    asked = _meta(tx, _asked_key(project)) or {}
    hosts = _host_pools(tx, project)
    return Control(
        project=project,
        asked=PoolState(str(asked.get("state", PoolState.RUNNING))),
        asked_at=asked.get("at"),  # type: ignore[arg-type]
        asked_by=asked.get("by"),  # type: ignore[arg-type]
        pool=_summed(hosts, tx.clock()),
        hosts=hosts,
    )


def _chosen(store: Store, project: str | None) -> list[str]:
    """The projects asked about: one with queued items, or one registered with a server but
    none of whose items is queued yet (which was a 404 though `/api/projects` listed it)."""
    with store.transaction(write=False) as tx:
        registered = [str(row[0]) for row in tx.all("SELECT id FROM projects ORDER BY id")]
        # Asked ahead of its first run (`set_control` of a project not queued yet).
        asked = [str(row[0]).removeprefix("control:") for row in tx.all(
            "SELECT key FROM meta WHERE key LIKE 'control:%'"
        )]  # fmt: skip
    known = sorted(set(projects(store)) | set(registered) | set(asked))
    if project is None:
        return known
    if project not in known:
        listed = ", ".join(known) or "none yet"
        raise UnknownProjectHere(f"no project {project!r} in this database (projects: {listed})")
    return [project]


def get_control(store: Store, project: str | None = None) -> list[Control]:
    """The control of one project, or of every project in the store."""
    chosen = _chosen(store, project)
    with store.transaction(write=False) as tx:
        return [_read(tx, name) for name in chosen]


# `owner/repo:plan key`, as a run names a project.
_PROJECT_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+:[A-Za-z0-9._-]{1,64}$")


def set_control(
    store: Store,
    state: PoolState | str,
    project: str | None = None,
    *,
    by: str = "api",
    ahead: bool = False,
) -> list[Control]:
    """Ask one project's workers (or every project's) to run, pause or drain; a running fleet
    follows within one poll. Each change is a `control` event of its project."""
    wanted = PoolState(state)
    if wanted not in ASKABLE:
        raise UsageError(f"a pool can be asked to be running, paused or draining, not {state}")
    try:
        chosen = _chosen(store, project)
    except UnknownProjectHere:
        # Asked ahead of a project's first run here (its plan synced, no item queued yet): a
        # name of the project's shape is taken; anything else is still refused.
        if not ahead or project is None or not _PROJECT_NAME.match(project):
            raise  # (the API answers 404: a client may not make up projects)
        chosen = [project]
    if not chosen:
        raise NoProjectYet("no project in this database yet: start a run first")
    if project is None:
        chosen = _in_play(store, chosen, wanted)
    with store.transaction() as tx:
        for name in chosen:
            before = _read(tx, name).asked
            _put(tx, _asked_key(name), {"state": wanted.value, "at": tx.clock(), "by": by})
            if before != wanted:
                change = ControlChanged(state=wanted.value, previous=before.value, by=by)
                tx.append_event(name, None, change)
        return [_read(tx, name) for name in chosen]


def _in_play(store: Store, names: list[str], wanted: PoolState) -> list[str]:
    """Of `names`, those "every project" means: the ones a run works now, and for a resume
    also any still asked to pause or drain. A pause left on a project whose run has ended
    would hold its next run until someone resumed it."""
    with store.transaction(write=False) as tx:
        now = tx.clock()
        controls = [_read(tx, name) for name in names]
    chosen = [
        c.project
        for c in controls
        if (
            c.pool is not None
            and c.pool.state != PoolState.STOPPED
            and now - c.pool.at < LIVE_REPORT_S
        )
        or (wanted == PoolState.RUNNING and c.asked != PoolState.RUNNING)
    ]
    if not chosen:
        raise NothingToSteer(
            "no run is working any project now, so nothing was asked; name a project "
            "(--project) to ask it before its run starts"
        )
    return chosen


class NothingToSteer(UsageError):
    """Asked of every project at work, with none at work: a state of things, not a bad ask
    (the API answers 409)."""


def asked_states(store: Store, project_names: Iterable[str]) -> dict[str, PoolState]:
    """What was asked of each of these projects (running when nothing was)."""
    with store.transaction(write=False) as tx:
        return {name: _read(tx, name).asked for name in project_names}


def report_pools(store: Store, statuses: Iterable[PoolStatus], host: str = "") -> None:
    """A running fleet says what each pool is doing (called every poll), as host `host`."""
    with store.transaction() as tx:
        for status in statuses:
            before = _meta(tx, _pool_key(status.project, host)) or {}
            report = PoolReport(
                state=status.state,
                workers=status.workers,
                in_flight=status.in_flight,
                handled=status.handled,
                reports=int(str(before.get("reports", 0))) + 1,
                at=tx.clock(),
            )
            _put(tx, _pool_key(status.project, host), report.model_dump(mode="json"))


def left_asked(store: Store, project: str, host: str) -> str | None:
    """What a run of host `host` starting now must be told of a pause or drain asked before
    it. A pause holds it, as asked: said, with how to lift it. A drain that no other host's
    live run is carrying out was asked of a run that ended (killed) before it could: it is
    dropped, and said, so the new run does not end at once having done nothing."""
    with store.transaction() as tx:
        asked = _read(tx, project)
        now = tx.clock()
        if asked.asked == PoolState.PAUSED:
            return (
                f"{project} is paused (asked by {asked.asked_by or 'a person'}): this run claims "
                f"nothing until `agent-harness control resume --project {project}`"
            )
        if asked.asked != PoolState.DRAINING or _others_at_work(asked, host, now):
            return None
        _put(tx, _asked_key(project), {"state": "running", "at": now, "by": "run"})
        tx.append_event(
            project, None, ControlChanged(state="running", previous="draining", by="run")
        )
        return f"{project}: the drain asked of a run that has since ended was dropped"


def _others_at_work(asked: Control, host: str, now: float) -> bool:
    """Whether a host other than `host` reports a pool that has not stopped, and recently
    enough to be alive."""
    return any(
        each.host != host
        and each.pool.state != PoolState.STOPPED
        and now - each.pool.at < LIVE_REPORT_S
        for each in asked.hosts
    )


def end_drain(store: Store, project: str, host: str = "") -> None:
    """A drained run of host `host` has ended. Once no other host's live run is still draining,
    the drain was carried out, so the next run starts running; until then it stands (the first
    host to finish lifted it, and the others went back to claiming)."""
    with store.transaction() as tx:
        asked = _read(tx, project)
        now = tx.clock()
        if asked.asked == PoolState.DRAINING and not _others_at_work(asked, host, now):
            _put(tx, _asked_key(project), {"state": "running", "at": now, "by": "run"})
