"""The run: check the setup, mirror the plan to issues, queue it, and let a fleet of workers
attempt every ready item until nothing is left that can be claimed.

Each attempt is one lease (see `attempt.Attempt`); everything that happens is an event in the
store, and everything the tracker already knows is reused, so a run killed at any point is
simply started again. One run per project and state directory holds a lock for its lifetime.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import HarnessError
from agent_harness.failures import FailureClass
from agent_harness.git.naming import clean_name, plan_namespace
from agent_harness.pipeline.attempt import DELIVERY_BACKOFF_CAP_S, DELIVERY_WAITS, Attempt
from agent_harness.pipeline.budgets import RunBudget
from agent_harness.pipeline.checks import missing_program, not_found, run_checks
from agent_harness.pipeline.history import ItemHistory
from agent_harness.pipeline.outside import changed_outside, digests, plan_files
from agent_harness.pipeline.parts import CheckRunner, RunParts
from agent_harness.pipeline.report import RunReport, build_report, unfinished_deps
from agent_harness.pipeline.settings import Observer, RunRefused, RunSettings
from agent_harness.plan.model import Plan, WorkItem, check_command
from agent_harness.queue import holds, items, leases
from agent_harness.queue.items import ItemState
from agent_harness.queue.leases import Lease
from agent_harness.secrets.environment import without_secrets
from agent_harness.secrets.process import process_env
from agent_harness.store import reading
from agent_harness.store.events import (
    AgentStarted,
    DeliveryDue,
    FailedNote,
    HeldElsewhere,
    ReclaimedNote,
    ReconciledNote,
    TrackerUnanswered,
    Withdrawn,
)
from agent_harness.store.hostlock import (
    FileHeld,
    Held,
    LockBusy,
    exclusive_file,
    held_by_this_host,
    plan_sync_lock,
)
from agent_harness.tracker.protocol import TrackerError
from agent_harness.tracker.protocol import failure_class as tracker_failure
from agent_harness.tracker.sync import SyncReport, refuse_taken_key, sync_plan

if TYPE_CHECKING:
    from agent_harness.git.workspace import Workspace
    from agent_harness.implement.protocol import Implementer
    from agent_harness.pipeline.fleetrun import IdleWatch
    from agent_harness.pipeline.rounds import WatchReport
    from agent_harness.review.verdict import Reviewer
    from agent_harness.store.database import Store
    from agent_harness.tracker.protocol import Tracker


# States whose agent session may still be wanted: being worked, or waiting for an answer.
_LIVE_STATES = frozenset({ItemState.CLAIMED, ItemState.CHECKS, ItemState.REVIEW, ItemState.WAITING})
# States a run works on: queued, waiting for a time, or left mid-attempt by a run that died.
_RUNNABLE = frozenset({ItemState.PENDING, *_LIVE_STATES})


# Item states that hold no branch or worktree any more.
_FOR_GOOD = frozenset({ItemState.DONE, ItemState.MERGED})


class Pipeline:
    """Runs the items of one plan on one repository."""

    def __init__(
        self,
        *,
        plan: Plan,
        plan_key: str,
        tracker: Tracker,
        store: Store,
        repo: Workspace,
        implementer: Implementer,
        reviewer: Reviewer,
        settings: RunSettings,
        state_dir: Path,
        env: Mapping[str, str] | None = None,
        observer: Observer | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        known_secrets: Sequence[str] = (),
        check_runner: CheckRunner = run_checks,
    ) -> None:
        self.plan = plan
        self.sleep = sleep
        self.parts = RunParts(
            plan_key=plan_key,
            tracker=tracker,
            store=store,
            repo=repo,
            implementer=implementer,
            reviewer=reviewer,
            settings=settings,
            state_dir=state_dir,
            env=process_env() if env is None else dict(env),
            observer=observer or (lambda _kind, _item, _payload: None),
            check_runner=check_runner,
            # Secret values held outside `env` (a token from a config file, the model keys):
            # withheld from checks under any name, and refused in any diff.
            known_secrets=(
                *known_secrets,
                *_secrets_held_by(implementer),
                *_secrets_held_by(reviewer),
            ),
            clock=clock,
        )
        # A run's id marks what it paid for: its budget counts this run's spend, never the
        # project's history (nor an ingested file's).
        self.parts.run_id = uuid.uuid4().hex[:12]
        limits = (settings.run_cost_usd, self.parts.run_id, settings.max_call_usd)
        self.budget = RunBudget(store, self.parts.project, *limits)
        self.parts.run_budget = self.budget
        self._setup_checked = False
        self._plan_digests: dict[Path, str | None] = {}  # to see a plan changed during the run
        self._host_held: Held | None = None  # the database's lock on this run's host id
        self.rounds: list[WatchReport] = []
        self.log_from = 0  # the log's newest event when the run began
        self._depends = {item.id: item.depends_on for item in plan.items}

    # Shorthands for the parts callers and tests name.
    @property
    def plan_key(self) -> str:
        return self.parts.plan_key

    @plan_key.setter
    def plan_key(self, key: str) -> None:
        self.parts.plan_key = key
        self.budget.project = self.parts.project

    @property
    def project(self) -> str:
        return self.parts.project

    @project.setter
    def project(self, name: str) -> None:
        # The project is the tracker's repository and the plan key: set the key instead.
        if name != self.parts.project:
            raise ValueError(f"project {name!r} is not {self.parts.project!r}: set plan_key")

    @property
    def tracker(self) -> Tracker:
        return self.parts.tracker

    @property
    def store(self) -> Store:
        return self.parts.store

    @property
    def implementer(self) -> Implementer:
        return self.parts.implementer

    @implementer.setter
    def implementer(self, implementer: Implementer) -> None:
        self.parts.implementer = implementer

    @property
    def settings(self) -> RunSettings:
        return self.parts.settings

    @property
    def issues(self) -> dict[str, int]:
        return self.parts.issues

    @property
    def same_vendor_note(self) -> str | None:
        return self.parts.same_vendor_note

    def session_name(self, item_id: str) -> str:
        return self.parts.session_name(item_id)

    # -- setup ---------------------------------------------------------------------------------
    def check_setup(self) -> None:
        """Refuse, before any work starts, what would fail every item the same way."""
        from agent_harness.review.verdict import check_vendors

        if self._setup_checked:
            return
        parts = self.parts
        parts.same_vendor_note = check_vendors(
            parts.implementer.vendor, parts.reviewer.vendor, parts.settings.allow_same_vendor
        )
        info = parts.tracker.repo_info()
        if info.archived:
            raise RunRefused(f"{parts.tracker.repo} is archived: no pull request can be opened")
        parts.repo.set_default_branch(info.default_branch)
        parts.repo.check_remote(info.full_name, info.clone_url)
        files = plan_files(self.plan)
        parts.repo.check_clean_default(allow=files)
        self._refuse_another_spelling()
        self._refuse_shared_branches()
        self._refuse_missing_check_programs()
        self._plan_digests = digests(files)
        self._setup_checked = True

    def _refuse_missing_check_programs(self) -> None:
        """A check whose program does not exist fails every attempt the same way: refuse the
        run before any agent is paid, naming the check."""
        env = without_secrets(
            self.parts.env,
            allow=self.settings.check_env_pass,
            known=self.parts.known_secrets,
        )
        commands = list(self.settings.checks)
        commands += [
            c
            for item in self.plan.items
            if not item.done and (c := check_command(item.success_check))
        ]
        for command in dict.fromkeys(commands):
            program = missing_program(command, env)
            if program is not None:
                raise RunRefused(not_found(command, program, env))

    def _refuse_another_spelling(self) -> None:
        """A repository this database knows in other letters (`ME/App` for `me/app`) is one
        repository to GitHub, whose items a second queue would work twice over."""
        known = items.spelled_otherwise(self.parts.store, self.parts.project)
        if known is not None:
            raise RunRefused(
                f"this database runs that plan as {known} already (repository names ignore "
                f"case); give --repo {known.rpartition(':')[0]}"
            )

    def _refuse_shared_branches(self) -> None:
        """Two names git writes alike (items `T1.2` and `T1-2`; plans keyed `v1.2` and `v1-2`
        on one repository) would share a branch and a worktree, each item's agent working over
        the other's: refused before any agent runs, naming both. Work finished for good (done,
        merged) shares nothing any more and is not counted."""
        parts = self.parts
        seen: dict[str, str] = {}
        for item in self.plan.items:
            other = seen.setdefault(clean_name(item.id), item.id)
            if item.done or other == item.id:
                continue
            # Rare, so the queue is asked only now: is either finished for good?
            if not self._finished(parts.project, item.id) and not self._finished(
                parts.project, other
            ):
                raise RunRefused(
                    f"items {other} and {item.id} would share a branch and a worktree (git "
                    "writes their names alike); rename one"
                )
        mine = clean_name(parts.namespace)
        for project in items.projects(parts.store) if mine else ():
            repo, _, key = project.rpartition(":")
            same_repo = repo == parts.tracker.repo and key != parts.plan_key
            if same_repo and clean_name(plan_namespace(key)) == mine and self._open(project):
                raise RunRefused(
                    f"plans keyed {key} and {parts.plan_key} of {repo} would share branches "
                    "and worktrees (git writes the keys alike); give this plan another "
                    "--plan-key"
                )

    def _finished(self, project: str, item_id: str) -> bool:
        try:
            state = items.get_item(self.parts.store, project, item_id).state
        except items.UnknownItem:
            return False
        return state in _FOR_GOOD

    def _open(self, project: str) -> bool:
        """Whether `project` holds an item not finished for good."""
        return any(r.state not in _FOR_GOOD for r in items.list_items(self.parts.store, project))

    def check_plan_key(self) -> None:
        """Refuse, before anything is written, a plan whose key another plan file's issues
        hold (a run of several plans syncs them one after another)."""
        with self.parts.tracker_lock:
            refuse_taken_key(self.plan, self.parts.tracker, self.parts.plan_key)

    def prepare(self) -> SyncReport:
        """Mirror the plan to issues (so every PR can close one) and queue the items."""
        parts, store, project = self.parts, self.parts.store, self.parts.project
        # Hosts sharing the store sync one at a time: two syncs at once would each find no
        # issue for a new item and each open one.
        mirror = plan_sync_lock(parts.tracker.repo, parts.plan_key)
        with parts.tracker_lock, held_by_this_host(store, mirror):
            report = sync_plan(self.plan, parts.tracker, parts.plan_key)
        for item_id, number in report.issue_numbers.items():
            parts.issues.setdefault(item_id, number)
        # Whatever an earlier run held back: by --only, or for want of an issue.
        holds.unhold(store, project, (holds.HOLD_REASON, holds.NO_ISSUE_REASON))
        items.enqueue(store, project, self.plan.items, max_attempts=parts.settings.max_attempts)
        items.set_budget(store, project, parts.settings.max_attempts)
        in_plan = {item.id for item in self.plan.items}
        holds.restore(store, project, in_plan)  # withdrawn once, named again
        queued = {record.id for record in items.list_items(store, project)}
        for item_id in holds.withdraw(store, project, sorted(queued - in_plan), items.WITHDRAWN):
            parts.note(item_id, Withdrawn(reason=items.WITHDRAWN))
        # A person closed its issue: not worked until reopened (one with a PR of ours: reconcile's).
        closed = report.closed_issues
        open_again = [i for i in in_plan if i in report.issue_numbers and i not in closed]
        ours = functools.partial(ItemHistory.opened_a_pull, store, project)
        for item_id in holds.skip_closed(store, project, closed, open_again, ours):
            parts.note(item_id, Withdrawn(reason=items.ISSUE_CLOSED.format(number=closed[item_id])))
        if parts.settings.only is not None:
            holds.hold(store, project, sorted(in_plan - parts.settings.only))
        # An item whose issue could not be made (too long a body, a refused label) is not
        # worked: its pull request would close no issue, and the next sync makes one.
        lacking = [i.id for i in self.plan.items if not i.done and i.id not in parts.issues]
        holds.hold(store, project, lacking, holds.NO_ISSUE_REASON)
        return report

    def to_approve(self) -> tuple[list[WorkItem], list[tuple[WorkItem, str]]]:
        """What a person approves before the run: the plan's items it would work on, and those
        it would not because of where the queue has them (failed, delivered, skipped), each
        with that state. Items the plan marks done, or `only` leaves out, are in neither."""
        known = {record.id: record.state for record in items.list_items(self.store, self.project)}
        will: list[WorkItem] = []
        wont: list[tuple[WorkItem, str]] = []
        for item in self.plan.items:
            if item.done or (self.settings.only is not None and item.id not in self.settings.only):
                continue
            state = known.get(item.id)
            if state is None or state in _RUNNABLE:
                will.append(item)
            else:
                wont.append((item, str(state)))
        return will, wont

    # -- one item ------------------------------------------------------------------------------
    def handle(self, lease: Lease) -> None:
        """The fleet's handler: one attempt at one item, ending the lease one way or another."""
        try:
            item = self.plan.item(lease.item_id)
        except KeyError:
            # Gone from the plan while its pull request was open, then sent back by a round:
            # nothing to work from. Given back and withdrawn, as at the run's start.
            leases.release(self.store, lease, items.WITHDRAWN)
            holds.withdraw(self.store, self.project, [lease.item_id], items.WITHDRAWN)
            return
        Attempt(self.parts, item, lease).run()

    # -- the whole run -------------------------------------------------------------------------
    @property
    def worker_prefix(self) -> str:
        if self.settings.worker_prefix:
            return self.settings.worker_prefix
        where = hashlib.sha256(os.fsencode(self.parts.state_dir.resolve())).hexdigest()[:6]
        return f"{socket.gethostname()}-{where}"

    def run(self, *, fleet_factory: Callable[..., Any] | None = None) -> RunReport:
        from agent_harness.pipeline.fleetrun import FleetRun

        [report] = FleetRun([self], fleet_factory=fleet_factory).run()
        return report

    @contextlib.contextmanager
    def run_lock(self) -> Iterator[None]:
        """One run per project and state dir at a time: the workers' names are shared."""
        locks = self.parts.state_dir / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(self.project.encode()).hexdigest()[:12]
        with contextlib.ExitStack() as stack:
            try:
                handle = stack.enter_context(exclusive_file(locks / f"run-{name}.lock", wait=False))
            except FileHeld as held:
                raise RunRefused(
                    f"another `agent-harness run` of {self.project} is running from "
                    f"{self.parts.state_dir} ({held.holder or 'another process'}); "
                    "wait for it or stop it first"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}\n")
            handle.flush()
            with self._host_lock():
                yield

    @contextlib.contextmanager
    def _host_lock(self) -> Iterator[None]:
        """The same in the database, for hosts sharing it: two runs named alike (one
        `--host-id` given to two hosts) would take each other's live leases as a dead run's."""
        name = f"run {self.project} {self.worker_prefix}"
        with contextlib.ExitStack() as stack:
            try:
                self._host_held = stack.enter_context(
                    held_by_this_host(self.store, name, wait=False)
                )
            except LockBusy:
                raise RunRefused(
                    f"another `agent-harness run` of {self.project} with host id "
                    f"{self.worker_prefix} is using this database; give each host its own "
                    "--host-id, or stop the other run first"
                ) from None
            yield

    def check_host_lock(self) -> None:
        """Halt the run when the database lock on its host id is no longer its own: its
        connection was lost and another run under the same --host-id took it (and with it this
        run's leases, as a dead run's). Taken again quietly when nobody else has it."""
        held = self._host_held
        # Unknown (the server does not answer) is not "taken": the run goes on, as its
        # heartbeats ride out an outage, and asks again.
        if held is None or self.parts.halted or held.still_held() is not False:
            return
        self.parts.halt(
            RunRefused(
                f"this run lost its hold on host id {self.worker_prefix} in the database (its "
                "connection was dropped) and another run under that host id took it and its "
                "leases; this run stops. Give each host its own --host-id"
            )
        )

    def lease_lost(self, lease: Lease) -> None:
        """A lease of this run's was taken over or lapsed while its agent worked: the agent's
        work can no longer be delivered, so its session ends now, not when the agent is done
        spending (the attempt then finds the lease lost and stops)."""
        with contextlib.suppress(HarnessError):
            # A worker of this host that took the lapsed lease back adopts the same session
            # (one name per item and state dir): that agent is its work now, not to be ended.
            holder = items.get_item(self.store, self.project, lease.item_id).worker or ""
            if holder.startswith(self.worker_prefix + "/") and holder != lease.worker:
                return
            self._end_session(lease.item_id)

    def _end_session(self, item_id: str) -> None:
        """End the item's agent session on this run's host, if it has one there."""
        host = getattr(self.parts.implementer, "host", None)
        if host is None:
            return
        names = {self.parts.session_name(item_id)}
        with contextlib.suppress(HarnessError):
            # The name its agent last started under, if another (a harness before this one
            # named sessions differently): that agent is this item's too.
            started = ItemHistory.read(self.store, self.project, item_id).last(AgentStarted)
            if started is not None:
                names.add(started.session)
        for name in sorted(names):
            with contextlib.suppress(HarnessError):  # a host that cannot say is left alone
                if host.exists(name):
                    host.kill(name)

    def begin(self) -> tuple[SyncReport, list[dict[str, Any]]]:
        """Everything before the workers start: setup, the plan to issues and the queue, the
        tracker's news, and the leases a dead run of ours left."""
        self.check_setup()
        self.log_from = self._last_event_id()  # this run's events come after it
        sync = self.prepare()
        reconciled = self.reconcile() if self.settings.reconcile else []
        # The run lock says no other run of ours is alive: leases our workers still hold were
        # left by a run that died, and are taken back now rather than when they lapse.
        for item_id in leases.reclaim_own(
            self.store, self.project, self.worker_prefix + "/", prefix=True
        ):
            self.parts.note(item_id, ReclaimedNote(workers=self.worker_prefix))
        self._close_sessions(ended=False)
        return sync, reconciled

    def finish(self, sync: SyncReport, reconciled: list[dict[str, Any]]) -> RunReport:
        """After the workers stopped: let held items go, close finished sessions, report."""
        holds.unhold(self.store, self.project)
        self._close_sessions(ended=True)
        report = self.report(sync)
        report.reconciled = reconciled
        report.warnings = changed_outside(self.parts.repo, self._plan_digests)
        return report

    def idle_step(self, watch: IdleWatch) -> bool:
        """The pool is idle: is this project done? Claimable work that no worker takes for ten
        idle polls (at least a second), with nothing new recorded, ends it; items another host
        holds are waited for (unless told not to): their leases either end with the work
        done, or lapse, and then this run takes the items over. Sets `watch.sleep_s` to
        wait that long before asking again."""
        watch.sleep_s = 0.0
        # One look at the queue answers both "anything to claim?" and "held elsewhere?": read
        # twice, a lease lapsing in between would be neither, and the run would end without it.
        records, now = items.list_items(self.store, self.project), self.store.clock()
        if self._claimable(records, now):
            mark = self._last_event_id()
            if mark != watch.last_mark or watch.stalled_since is None:
                watch.last_mark, watch.stalled_since = mark, time.monotonic()
            elif time.monotonic() - watch.stalled_since > watch.patience_s:
                return True  # claimable, yet nothing is claimed: say what is left, and end
            return False
        if self.settings.reconcile and self._new_rounds(watch):
            return False  # a pull request sent its item back: work on
        due = self._delivery_due()
        if due is not None:  # approved work the tracker refused for now: stay and deliver it
            said = "delivery: " + ", ".join(due.items)  # once per set of items, not per poll
            if said != watch.told:
                watch.told = said
                self.parts.note("", due)
            watch.sleep_s = min(max(due.due_in_s, 0.0) + 0.01, 5.0)
            return False
        held = self._held_elsewhere(records, now)
        if held is None or not self.settings.wait_for_others:
            return True
        if held.describe() != watch.told:
            watch.told = held.describe()
            self.parts.note("", held)
        watch.sleep_s = min(max(held.ends_in_s, 0.0) + 0.01, 5.0)
        return False

    def _delivery_due(self) -> DeliveryDue | None:
        """This project's items whose approved work waits for the tracker (a delivery parked
        after a 5xx or a rate limit), due within the longest delivery backoff."""
        now = self.store.clock()
        due = [
            record
            for record in items.list_items(self.store, self.project)
            if record.state == ItemState.WAITING
            and (record.reason or "").startswith(DELIVERY_WAITS)
            and (record.not_before or now) - now <= DELIVERY_BACKOFF_CAP_S
        ]
        if not due:
            return None
        soonest = min(float(record.not_before or now) for record in due) - now
        return DeliveryDue(items=[r.id for r in due], due_in_s=round(max(soonest, 0.0), 1))

    def _held_elsewhere(
        self, records: Sequence[items.ItemRecord], now: float
    ) -> HeldElsewhere | None:
        """Items whose live lease belongs to another host's worker."""
        ours = self.worker_prefix + "/"
        held = [
            record
            for record in records
            if record.lease_expires is not None
            and record.lease_expires >= now
            and not (record.worker or "").startswith(ours)
        ]
        if not held:
            return None
        hosts = sorted({(record.worker or "?").split("/")[0] for record in held})
        soonest = min(float(record.lease_expires or now) for record in held) - now
        return HeldElsewhere(items=[r.id for r in held], hosts=hosts, ends_in_s=round(soonest, 1))

    def _close_sessions(self, *, ended: bool) -> None:
        """Close the agent sessions this host keeps for items it no longer works: an item
        another host holds now (this host's `run` was killed and the item taken over: its agent
        would spend on for work nobody can deliver) and, with `ended`, an item that failed, was
        delivered or left the run (a killed run's agent, or its dead pane, would otherwise stay
        for ever). A session waiting for a person's answer is left for them, and so is one of
        an item this host held, which a restarted run adopts."""
        host = getattr(self.parts.implementer, "host", None)
        if host is None:
            return
        # A remote session host outlives a machine that restarts under a new name (the default
        # host id is the machine's name): "another host" may be this one, before; left alone.
        elsewhere_too = getattr(host, "kind", "") != "remote"
        ours = self.worker_prefix + "/"
        for record in items.list_items(self.store, self.project):
            held = record.lease_expires is not None
            elsewhere = elsewhere_too and held and not (record.worker or "").startswith(ours)
            if not elsewhere and (not ended or held or record.state in _LIVE_STATES):
                continue
            self._end_session(record.id)

    def reconcile(self) -> list[dict[str, Any]]:
        """Bring merges, closes and reverts back, so merged work unblocks its dependents."""
        from agent_harness.git.worktrees import WorkRepo
        from agent_harness.tracker.reconcile import reconcile

        repo = self.parts.repo
        with self.parts.tracker_lock:
            result = reconcile(
                self.tracker,
                store=self.store,
                plan_key=self.parts.plan_key,
                requeue_reverted=self.settings.requeue_reverted,
                revert_window_days=self.settings.revert_window_days,
                work=repo if isinstance(repo, WorkRepo) else None,
            )
        self.watch(result.changed_open)
        moved: list[dict[str, Any]] = []
        for transition in result.transitions:
            if transition.item:
                note = ReconciledNote(state=str(transition.state), pr=transition.pr)
                self.parts.note(transition.item, note)
                moved.append(
                    {"item": transition.item, "state": transition.state, "pr": transition.pr}
                )
        return moved

    def _new_rounds(self, watch: IdleWatch) -> bool:
        """Between claims: one more look at the open pull requests (O(changed) reads).

        The tracker failing this look does not end the run with a traceback and its work
        unfinished: a token it refuses (or a repository out of reach) stops the run as it
        would stop every delivery, once the workers are done; anything else is said once and
        the run goes on without the look's news."""
        before = sum(len(r.rounds) for r in self.rounds)
        try:
            self.reconcile()
        except TrackerError as exc:
            failure = tracker_failure(exc)
            stops = failure in (FailureClass.TRACKER_CREDENTIALS, FailureClass.TRACKER_AUTH)
            note = TrackerUnanswered(reason=exc.message, status=exc.status, stops_run=stops)
            if stops:
                self.parts.halt(exc)
            if note.describe() != watch.unanswered:
                watch.unanswered = note.describe()
                self.parts.note("", note)
            return False
        return sum(len(r.rounds) for r in self.rounds) > before and self._claimable()

    def watch(self, changed: list[int]) -> WatchReport:
        """Answer what CI, reviewers and the base said on our open pull requests (rounds)."""
        from agent_harness.pipeline.rounds import PullWatch

        with self.parts.tracker_lock:
            report = PullWatch(
                self.tracker,
                self.store,
                self.parts.plan_key,
                max_rounds=self.settings.max_pr_rounds,
                merge_when_green=self.settings.merge_when_green,
                repo=self.parts.repo,
                clock=self.parts.clock,
            ).run(changed)
        self.rounds.append(report)
        return report

    def _last_event_id(self) -> int:
        with self.store.transaction(write=False) as tx:
            return reading.latest_id(tx, self.project)

    def _claimable(
        self, listed: Sequence[items.ItemRecord] | None = None, now: float | None = None
    ) -> bool:
        """Is any item ready to be claimed right now (so the run is not done yet)? Judged on
        `listed` as of `now` when given, else on the queue as it is."""
        if listed is None:
            listed = items.list_items(self.store, self.project)
        records = {r.id: r for r in listed}
        now = self.store.clock() if now is None else now
        for record in records.values():
            if record.lease_expires is not None and record.lease_expires < now:
                return True  # a lease that lapsed (its worker died): taken over next
            waiting_done = record.state == ItemState.WAITING and (record.not_before or 0) <= now
            if record.state != ItemState.PENDING and not waiting_done:
                continue
            if record.not_before and record.not_before > now:
                continue
            # list_items leaves dependencies out; the plan has them.
            if not unfinished_deps(self._depends.get(record.id, ()), records):
                return True
        return False

    def _guarded_handle(self, lease: Lease) -> None:
        if self.budget.spent or self.parts.halted:
            # Not this item's fault: give it back with its attempt refunded, for the next run.
            reason = self.budget.reason or "run cost budget spent"
            if self.parts.halted:
                reason = f"the run stops: {self.parts.halted[0].message}"
            leases.defer(self.store, lease, self.store.clock(), reason)
            return
        try:
            self.handle(lease)
        except Exception as exc:
            # The fleet records the crash on the item; the live view should not stay stale.
            self.parts.note(lease.item_id, FailedNote(reason=f"{type(exc).__name__}: {exc}"))
            raise
        self.budget.check()

    def spent_usd(self) -> float | None:
        return self.budget.spent_usd()

    def report(self, sync: SyncReport | None) -> RunReport:
        return build_report(
            self.store,
            self.project,
            self.plan,
            sync,
            cost_usd=self.spent_usd(),
            unpriced=self.budget.unpriced(),
            stopped_by_budget=self.budget.spent,
            stopped_because=self.budget.reason,
            run_id=self.parts.run_id,
            since_id=self.log_from,
        )


def _secrets_held_by(part: object) -> tuple[str, ...]:
    """The credentials an implementer or reviewer sends (its model API keys), when it says."""
    held = getattr(part, "secret_values", None)
    return tuple(held()) if callable(held) else ()
