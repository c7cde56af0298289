"""Worker pools, one per project, that claim items from the queue and run a handler on each.

Each worker is a thread that takes a slot (its pool's, and the fleet's shared one if set),
claims one item, and runs the handler while the lease is heartbeated beside it. The shared
slots are granted round-robin over the projects that are asking, so a big backlog cannot
starve a small one. Control is a state per pool that workers read between items, so pausing
or draining never interrupts work in flight.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from agent_harness.errors import HarnessError, UsageError
from agent_harness.queue.items import DEFAULT_READY_WHEN
from agent_harness.queue.leases import (
    Lease,
    LeaseLost,
    claim_next,
    ended,
    fail,
    heartbeat,
    reclaim_own,
)
from agent_harness.store.database import Store

Handler = Callable[[Lease], None]
Sleep = Callable[[float], None]


class PoolState(StrEnum):
    STOPPED = "stopped"
    RUNNING = "running"
    PAUSED = "paused"  # workers stay, claim nothing new
    DRAINING = "draining"  # workers finish what they hold, then exit


@dataclass(frozen=True)
class Backoff:
    """Delay after a handler crash: base * 2**(crashes in a row - 1), at most `cap`."""

    base_s: float = 1.0
    cap_s: float = 60.0

    def delay(self, crashes_in_a_row: int) -> float:
        return float(min(self.cap_s, self.base_s * 2 ** max(0, crashes_in_a_row - 1)))


@dataclass(frozen=True)
class PoolStatus:
    project: str
    state: PoolState
    workers: int
    in_flight: int
    handled: int
    crashes: int


class _FairGate:
    """At most `limit` slots in use; a free slot goes to the next asking project in turn."""

    def __init__(self, limit: int | None, cond: threading.Condition) -> None:
        self.limit = limit
        self.cond = cond
        self.in_use = 0
        self.asking: dict[str, int] = {}
        self.order: list[str] = []
        self.last: str | None = None

    def _turn(self) -> str | None:
        if not self.asking:
            return None
        if self.last is None or self.last not in self.order:
            start = 0
        else:
            start = self.order.index(self.last) + 1
        for offset in range(len(self.order)):
            candidate = self.order[(start + offset) % len(self.order)]
            if self.asking.get(candidate):
                return candidate
        return None

    def acquire(self, project: str, give_up: Callable[[], bool]) -> bool:
        """Wait for a slot (caller holds `cond`); False if `give_up()` turns true first."""
        if self.limit is None:
            return not give_up()
        if project not in self.order:
            self.order.append(project)
        self.asking[project] = self.asking.get(project, 0) + 1
        try:
            while True:
                if give_up():
                    return False
                if self.in_use < self.limit and self._turn() == project:
                    self.in_use += 1
                    self.last = project
                    return True
                self.cond.wait()
        finally:
            self.asking[project] -= 1
            if not self.asking[project]:
                del self.asking[project]
            self.cond.notify_all()

    def release(self) -> None:
        if self.limit is not None:
            self.in_use -= 1
            self.cond.notify_all()


class _Pool:
    def __init__(
        self, project: str, handler: Handler, concurrency: int, lease_s: float, worker_prefix: str
    ) -> None:
        self.project = project
        self.handler = handler
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.worker_prefix = worker_prefix
        self.state = PoolState.STOPPED
        self.threads: dict[str, threading.Thread] = {}
        self.in_flight = 0
        self.handled = 0
        self.crashes = 0
        self.found_empty = False  # the last claim found nothing ready
        self.alive = 0
        self.on_lost: Callable[[Lease], None] | None = None


class Fleet:
    """Worker pools per project over one store. Nothing runs until `start`."""

    def __init__(
        self,
        store: Store,
        *,
        global_limit: int | None = None,
        sleep: Sleep = time.sleep,
        backoff: Backoff = Backoff(),
        idle_poll_s: float = 1.0,
        heartbeat_every: float = 1 / 3,
        ready_when: frozenset[str] = DEFAULT_READY_WHEN,
        may_claim: Callable[[str], bool] | None = None,
    ) -> None:
        """`may_claim(project)`, asked right before each claim: False holds the claim back (a
        person asked the project to pause or drain, and the pool has not been told yet)."""
        if global_limit is not None and global_limit < 1:
            raise UsageError("the fleet's global limit must be at least 1")
        self.store = store
        self.sleep = sleep
        self.backoff = backoff
        self.idle_poll_s = idle_poll_s
        self.heartbeat_every = heartbeat_every
        self.ready_when = ready_when
        self.may_claim = may_claim
        self._cond = threading.Condition()
        self._gate = _FairGate(global_limit, self._cond)
        self._pools: dict[str, _Pool] = {}

    # --- configuration and control ----------------------------------------------------------

    def add_project(
        self,
        project: str,
        handler: Handler,
        *,
        concurrency: int = 1,
        lease_s: float = 300.0,
        worker_prefix: str | None = None,
        on_lost: Callable[[Lease], None] | None = None,
    ) -> None:
        """Register a project's pool; it stays stopped until `start`. `on_lost` hears of a
        lease the heartbeat found lost (taken over, or lapsed) while its handler still ran."""
        if concurrency < 1:
            raise UsageError(f"concurrency for {project} must be at least 1")
        with self._cond:
            if project in self._pools:
                raise UsageError(f"project {project} already has a pool")
            self._pools[project] = _Pool(
                project, handler, concurrency, lease_s, worker_prefix or project
            )
            self._pools[project].on_lost = on_lost

    def _select(self, project: str | None) -> list[_Pool]:
        if project is None:
            return list(self._pools.values())
        pool = self._pools.get(project)
        if pool is None:
            raise UsageError(f"no pool for project {project}")
        return [pool]

    def start(self, project: str | None = None) -> None:
        """Run the pool(s): create workers up to each pool's concurrency."""
        with self._cond:
            for pool in self._select(project):
                pool.state = PoolState.RUNNING
                pool.found_empty = False
                for n in range(pool.concurrency):
                    name = f"{pool.worker_prefix}/w{n + 1}"
                    thread = pool.threads.get(name)
                    if thread is not None and thread.is_alive():
                        continue
                    thread = threading.Thread(
                        target=self._work, args=(pool, name), name=f"agent-harness {name}"
                    )
                    thread.daemon = True  # a hung handler must not keep the process alive
                    pool.threads[name] = thread
                    pool.alive += 1
                    thread.start()
            self._cond.notify_all()

    def _set(self, project: str | None, state: PoolState, allowed: set[PoolState]) -> None:
        with self._cond:
            for pool in self._select(project):
                if pool.state in allowed:
                    pool.state = state
            self._cond.notify_all()

    def pause(self, project: str | None = None) -> None:
        """Claim nothing new; work in flight carries on (a drain not finished yet becomes a
        pause: its pool stays)."""
        self._set(project, PoolState.PAUSED, {PoolState.RUNNING, PoolState.DRAINING})

    def resume(self, project: str | None = None) -> None:
        """Undo a pause or a drain that has not finished yet."""
        self._set(project, PoolState.RUNNING, {PoolState.PAUSED, PoolState.DRAINING})

    def drain(self, project: str | None = None) -> None:
        """Finish what is in flight, then stop."""
        self._set(
            project, PoolState.DRAINING, {PoolState.RUNNING, PoolState.PAUSED, PoolState.DRAINING}
        )

    def join(self, project: str | None = None, timeout: float | None = None) -> bool:
        """Wait for drained pools' workers to exit; False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            threads = [t for pool in self._select(project) for t in pool.threads.values()]
        for thread in threads:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)
            if thread.is_alive():
                return False
        return True

    def wait_idle(self, project: str | None = None, timeout: float | None = None) -> bool:
        """Wait until the pool(s) hold nothing and will claim nothing more for now.

        A running pool is idle once its last claim found nothing ready; a paused, draining or
        stopped one as soon as its work in flight is done. False if `timeout` passed first.
        """
        with self._cond:
            return self._cond.wait_for(
                lambda: all(
                    p.in_flight == 0 and (p.found_empty or p.state != PoolState.RUNNING)
                    for p in self._select(project)
                ),
                timeout,
            )

    def status(self) -> list[PoolStatus]:
        with self._cond:
            return [
                PoolStatus(
                    p.project,
                    p.state,
                    p.alive,
                    p.in_flight,
                    p.handled,
                    p.crashes,
                )
                for p in self._pools.values()
            ]

    # --- the worker -------------------------------------------------------------------------

    def _work(self, pool: _Pool, name: str) -> None:
        try:
            self._work_loop(pool, name)
        finally:
            self.store.forget_thread()

    def _work_loop(self, pool: _Pool, name: str) -> None:
        crashes_in_a_row = 0
        # A restarted worker takes its item back; store trouble here is met again, and backed
        # off from, by the claim loop below.
        with contextlib.suppress(HarnessError):
            reclaim_own(self.store, pool.project, name)
        while True:
            with self._cond:
                self._cond.wait_for(lambda: pool.state != PoolState.PAUSED)
                if pool.state != PoolState.RUNNING:
                    break
                if not self._gate.acquire(pool.project, lambda: pool.state != PoolState.RUNNING):
                    continue
                pool.in_flight += 1
            lease: Lease | None = None
            crashed = held_back = False
            try:
                held_back = self.may_claim is not None and not self.may_claim(pool.project)
                if not held_back:
                    lease = claim_next(
                        self.store, pool.project, name, pool.lease_s, ready_when=self.ready_when
                    )
                if lease is not None:
                    crashed = self._run(pool, lease)
            except HarnessError:
                # The store itself failed (database gone, disk full): back off like a crash.
                crashed = True
                lease = None
            finally:
                with self._cond:
                    pool.in_flight -= 1
                    pool.found_empty = lease is None and not held_back
                    if lease is not None:
                        pool.handled += 1
                    self._gate.release()
                    self._cond.notify_all()
            # Back off once per crash; the streak only ends when an item runs cleanly.
            if crashed:
                crashes_in_a_row += 1
                self.sleep(self.backoff.delay(crashes_in_a_row))
            elif lease is not None:
                crashes_in_a_row = 0
            if lease is None and not crashed:
                with self._cond:
                    self._cond.wait_for(
                        lambda: pool.state != PoolState.RUNNING, timeout=self.idle_poll_s
                    )
        with self._cond:
            pool.alive -= 1
            if pool.state == PoolState.DRAINING and pool.alive == 0:
                pool.state = PoolState.STOPPED
            self._cond.notify_all()

    def _run(self, pool: _Pool, lease: Lease) -> bool:
        """Run the handler with a heartbeat beside it; True if the handler crashed."""
        done = threading.Event()
        beat = threading.Thread(
            target=self._heartbeat, args=(pool, lease, done), name=f"heartbeat {lease.item_id}"
        )
        beat.daemon = True
        beat.start()
        crash: Exception | None = None
        try:
            pool.handler(lease)
        except Exception as exc:  # a crash is recorded on the item, never spread to others
            crash = exc
        finally:
            done.set()
            beat.join()
        if crash is not None:
            with self._cond:
                pool.crashes += 1
            reason = f"handler crashed: {type(crash).__name__}: {crash}"
        elif ended(self.store, lease):  # as it should: no write transaction to find that out
            return False
        else:
            reason = "handler returned without completing or failing the item"
        with contextlib.suppress(LeaseLost):  # the handler ended the lease itself, as it should
            fail(self.store, lease, reason, permanent=False)
        return crash is not None

    def _heartbeat(self, pool: _Pool, lease: Lease, done: threading.Event) -> None:
        every = max(0.01, lease.lease_s * self.heartbeat_every)
        try:
            while not done.wait(every):
                try:
                    heartbeat(self.store, lease)
                except LeaseLost:
                    # The handler hears of it on its next call; told now, the pool can stop
                    # what the handler waits on (an agent spending for work nobody delivers).
                    if pool.on_lost is not None and not done.is_set():
                        with contextlib.suppress(Exception):
                            pool.on_lost(lease)
                    return
                except HarnessError:
                    continue  # a store hiccup: try again on the next beat, the lease may hold
        finally:
            self.store.forget_thread()
