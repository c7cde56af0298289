"""One fleet for one or several plans: a pool of workers per project, fair between projects under
an optional global worker limit, following the controls a person sets in the store.

Every round the run reads what was asked of each project (`queue.control`: pause, drain,
resume), applies what changed to its pools, and reports what the pools do, so
`agent-harness control` in another process sees and steers it. A project is done when its pool
is idle with nothing left it can claim, its run budget is spent, or it was drained; the run
ends when every project is done.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agent_harness.errors import UsageError
from agent_harness.pipeline.settings import RunInterrupted
from agent_harness.queue import control, items, leases
from agent_harness.queue.fleet import Fleet, PoolState
from agent_harness.sessions import groups

# How often a run asks whether its host id's lock in the database is still its own (a cheap
# query on the lock's connection; see `Pipeline.check_host_lock`).
HOST_LOCK_CHECK_S = 2.0

if TYPE_CHECKING:
    from agent_harness.pipeline.report import RunReport
    from agent_harness.pipeline.run import Pipeline


@dataclass
class IdleWatch:
    """What the run remembers between looks at one idle project."""

    patience_s: float
    stalled_since: float | None = None
    last_mark: int = -1
    told: str = ""
    unanswered: str = ""  # what the last failed look at the tracker said (said once)
    sleep_s: float = 0.0  # wait this long before the next look (another host's lease)


@dataclass
class _Project:
    pipeline: Pipeline
    watch: IdleWatch
    begun: Any = None  # what `Pipeline.begin` returned
    started: bool = False
    asked: PoolState = PoolState.RUNNING
    drained: bool = False
    done: bool = False
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.pipeline.project


class FleetRun:
    """Run `pipelines` (one per plan, sharing one store) in one fleet until all are done."""

    def __init__(
        self,
        pipelines: Sequence[Pipeline],
        *,
        global_limit: int | None = None,
        fleet_factory: Callable[..., Any] | None = None,
        control_every_s: float = 0.5,
        watchers: Sequence[Callable[[], object]] = (),
    ) -> None:
        if not pipelines:
            raise UsageError("a run needs at least one plan")
        names = [p.project for p in pipelines]
        if len(set(names)) != len(names):
            raise UsageError(f"two plans share a project: {', '.join(sorted(names))}")
        self.store = pipelines[0].store
        self.host = pipelines[0].worker_prefix  # the host id its pools report under
        if any(p.store is not self.store for p in pipelines):
            raise UsageError("the plans of one run share one database")
        self.projects = [
            _Project(p, IdleWatch(patience_s=max(1.0, 10 * p.settings.idle_poll_s)))
            for p in pipelines
        ]
        self.global_limit = global_limit
        self.fleet_factory = fleet_factory or Fleet
        self.control_every_s = control_every_s
        self.sleep = pipelines[0].sleep
        self.poll_s = min(p.settings.idle_poll_s for p in pipelines)
        self._last_control = float("-inf")
        self.watchers = tuple(watchers)  # called every round too: the role routes' file
        self.on_locked: Callable[[], None] = lambda: None  # once the run's locks are held

    def run(self) -> list[RunReport]:
        with ExitStack() as locks:
            for project in self.projects:
                locks.enter_context(project.pipeline.run_lock())
            self.on_locked()  # (a second run refused by the lock must change nothing)
            if len(self.projects) > 1:  # one plan refused would leave the others half begun
                for project in self.projects:
                    project.pipeline.check_plan_key()
            for project in self.projects:
                project.begun = project.pipeline.begin()
            fleet = self._fleet()
            try:
                self._wait(fleet)
            except KeyboardInterrupt:
                # First, so that a check the same signal reached (systemd stops a whole unit)
                # is not recorded failed by its worker meanwhile.
                stopped = groups.stop_running()  # agents keep their sessions; checks run again
                fleet.drain()
                fleet.join(timeout=2.0)
                # The process ends now, whatever its workers were doing: stopped, not draining.
                ended = [
                    replace(status, state=PoolState.STOPPED, workers=0) for status in fleet.status()
                ]
                control.report_pools(self.store, ended, self.host)
                for project in self.projects:  # taken back next run, as no worker's death
                    pipeline = project.pipeline
                    leases.keep_for_restart(
                        self.store, pipeline.project, pipeline.worker_prefix + "/"
                    )
                raise RunInterrupted.after(stopped) from None
            fleet.drain()
            fleet.join()
            control.report_pools(self.store, fleet.status(), self.host)
            for project in self.projects:
                if project.pipeline.parts.halted:
                    raise project.pipeline.parts.halted[0]
            return [self._finish(project) for project in self.projects]

    def _fleet(self) -> Any:
        fleet = self.fleet_factory(
            self.store,
            global_limit=self.global_limit,
            sleep=self.sleep,
            idle_poll_s=self.poll_s,
            ready_when=items.DEFAULT_READY_WHEN,
            may_claim=self._may_claim,
        )
        for project in self.projects:
            pipeline = project.pipeline
            # A spent run budget stops the project's claiming at once: its workers finish what
            # they hold (the item that found it spent is given back unspent), take nothing new.
            pipeline.budget.on_spent = functools.partial(fleet.drain, project.name)
            # A failure that stops one project's delivery (a refused token) stops them all.
            pipeline.parts.on_halt = fleet.drain
            fleet.add_project(
                project.name,
                pipeline._guarded_handle,
                concurrency=pipeline.settings.workers,
                lease_s=pipeline.settings.lease_s,
                # Several plans: each pool's workers are named apart (host-dir/KEY/w1).
                worker_prefix=pipeline.worker_prefix
                + (f"/{pipeline.plan_key}" if len(self.projects) > 1 else ""),
                on_lost=pipeline.lease_lost,
            )
        self._follow_controls(fleet, force=True)
        return fleet

    def _finish(self, project: _Project) -> RunReport:
        report = project.pipeline.finish(*project.begun)
        if project.drained:
            report.drained = True
            control.end_drain(self.store, project.name, self.host)
        return report

    # -- the controls ------------------------------------------------------------------------
    def _may_claim(self, project: str) -> bool:
        """Asked before every claim: a pause or a drain asked since the last look at the
        controls stops the next claim now, not up to `control_every_s` later (an item that
        ended in between took one more, and paid for it)."""
        return control.asked_states(self.store, [project])[project] == PoolState.RUNNING

    def _follow_controls(self, fleet: Any, *, force: bool = False) -> None:
        """Apply what a person asked since the last look, and say what the pools do."""
        now = time.monotonic()
        if not force and now - self._last_control < self.control_every_s:
            return
        self._last_control = now
        asked = control.asked_states(self.store, [p.name for p in self.projects])
        for project in self.projects:
            if not project.done and (force or asked[project.name] != project.asked):
                self._apply(fleet, project, asked[project.name])
        control.report_pools(self.store, self._statuses(fleet), self.host)
        for watcher in self.watchers:
            watcher()

    def _statuses(self, fleet: Any) -> list[Any]:
        """The pools as the fleet has them, but a pool never started because its project was
        asked to pause is paused, not stopped: the run is there, and `control` should say so
        (and a drain or resume of every project should reach it)."""
        held = {p.name for p in self.projects if p.asked == PoolState.PAUSED and not p.started}
        return [
            dataclasses.replace(s, state=PoolState.PAUSED) if s.project in held else s
            for s in fleet.status()
        ]

    def _apply(self, fleet: Any, project: _Project, asked: PoolState) -> None:
        project.asked = asked
        if asked != PoolState.DRAINING:
            project.drained = False  # a resume or a pause takes a drain back
        if asked == PoolState.RUNNING:
            state = next((s.state for s in fleet.status() if s.project == project.name), None)
            if project.started and state != PoolState.STOPPED:
                fleet.resume(project.name)
            else:  # never started, or its drain ended its workers before the resume came
                fleet.start(project.name)
                project.started = True
        elif asked == PoolState.PAUSED:
            if project.started:
                fleet.pause(project.name)  # a pool never started stays stopped: paused
        else:
            project.drained = True
            if project.started:
                fleet.drain(project.name)
            else:
                project.done = True

    # -- until every project is done ---------------------------------------------------------
    def _wait(self, fleet: Any) -> None:
        looked = time.monotonic()
        while True:
            self._follow_controls(fleet)
            if time.monotonic() - looked >= HOST_LOCK_CHECK_S:
                looked = time.monotonic()
                for project in self.projects:
                    project.pipeline.check_host_lock()
            open_ = [p for p in self.projects if not p.done]
            for project in open_:
                project.done = self._done(fleet, project)
                if project.done and project.started:
                    fleet.drain(project.name)
            if all(p.done for p in self.projects):
                return
            if not fleet.wait_idle(None, timeout=min(1.0, self.control_every_s)):
                continue  # work in flight: look again soon
            waits = [p.watch.sleep_s for p in self.projects if not p.done and p.watch.sleep_s]
            self.sleep(min(waits) if waits else self.poll_s)

    def _done(self, fleet: Any, project: _Project) -> bool:
        pipeline, watch = project.pipeline, project.watch
        if pipeline.budget.spent or pipeline.parts.halted:
            return True
        if project.asked == PoolState.PAUSED:
            watch.stalled_since, watch.sleep_s = None, 0.0  # a paused project waits for a person
            return False
        if project.drained:
            state = next(s.state for s in fleet.status() if s.project == project.name)
            return bool(state == PoolState.STOPPED)
        if not fleet.wait_idle(project.name, timeout=0):
            watch.stalled_since, watch.sleep_s = None, 0.0
            return False
        return pipeline.idle_step(watch)
