"""The parts one run works with, shared by its stages: where to record, what to call, what to hold.

Every stage (an attempt, delivery, the whole run) gets the same `RunParts`, so each can be built
and tested alone with fakes in place of the tracker, git, the agent, the reviewer and the
checks. Recording goes through `emit`, so the store and the observers always hear the same.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import HarnessError
from agent_harness.failures import FailureClass, ends_the_item
from agent_harness.git.naming import item_dir_name, session_name
from agent_harness.pipeline.history import ItemHistory
from agent_harness.pipeline.prompt import Feedback
from agent_harness.pipeline.settings import Observer, RunSettings
from agent_harness.queue import leases
from agent_harness.queue.items import ItemState, note_rounds_stopped
from agent_harness.queue.leases import Lease, LeaseLost
from agent_harness.secrets.redact import redact_payload
from agent_harness.store.events import (
    FailedNote,
    FeedbackGiven,
    LeaseLostNote,
    Payload,
    RetryNote,
    Waiting,
)

if TYPE_CHECKING:
    from agent_harness.git.workspace import Workspace
    from agent_harness.implement.protocol import Implementer
    from agent_harness.pipeline.budgets import RunBudget
    from agent_harness.pipeline.checks import CheckRun
    from agent_harness.review.verdict import Reviewer
    from agent_harness.store.database import Store
    from agent_harness.tracker.protocol import Tracker

# (commands, cwd, timeout_s, env) -> the run of those checks; `pipeline.checks.run_checks` by
# default, a scripted one in tests.
CheckRunner = Callable[..., "CheckRun"]


# The item whose attempt this thread runs. The run's model calls are recorded on it (see
# `launch.model_events`): a reviewer's answer on record before its run died is then known to
# be answered (and priced), not counted again as a call of unknown price.
ITEM_AT_WORK: ContextVar[str | None] = ContextVar("item_at_work", default=None)


def masked(payload: Payload) -> Payload:
    """`payload` as observers are told it (`run --json`, the live table): with what came from
    outside (an agent's last words, a check's output) masked where it holds a credential, as
    the event log keeps it."""
    data = payload.as_dict()
    clean = redact_payload(data)
    return payload if clean == data else type(payload).model_validate(clean)


@dataclass
class RunParts:
    """The collaborators of one run of one plan on one repository."""

    plan_key: str
    tracker: Tracker
    store: Store
    repo: Workspace
    implementer: Implementer
    reviewer: Reviewer
    settings: RunSettings
    state_dir: Path
    env: Mapping[str, str]
    observer: Observer
    check_runner: CheckRunner
    known_secrets: Sequence[str] = ()
    clock: Callable[[], float] = field(default=lambda: 0.0)
    issues: dict[str, int] = field(default_factory=dict)  # item id -> issue number
    same_vendor_note: str | None = None
    # The run these parts belong to: its id marks what it paid for, and its budget (None for an
    # attempt run outside a run) is asked before every paid call.
    run_id: str = ""
    run_budget: RunBudget | None = None
    # One tracker client is shared by every worker; worktree add/prune and pushes share the
    # repository's index and refs; check durations are read and written by every worker.
    tracker_lock: threading.Lock = field(default_factory=threading.Lock)
    git_lock: threading.Lock = field(default_factory=threading.Lock)
    durations_lock: threading.Lock = field(default_factory=threading.Lock)
    # A failure no item can get past (the tracker's token stopped working): the first worker
    # to meet it records it here, the run stops claiming (`on_halt`) and ends raising it.
    halted: list[HarnessError] = field(default_factory=list)
    on_halt: Callable[[], None] = field(default=lambda: None)

    @property
    def project(self) -> str:
        return f"{self.tracker.repo}:{self.plan_key}"

    @property
    def namespace(self) -> str:
        """Branches and worktrees of the main plan (key PLAN) need none; any other plan's do."""
        from agent_harness.git.naming import plan_namespace

        return plan_namespace(self.plan_key)

    def session_name(self, item_id: str) -> str:
        """Stable across restarts, distinct per plan, item and state dir (`naming.session_name`)."""
        where = str(self.state_dir.resolve())
        return session_name(self.tracker.repo, self.namespace, item_id, where)

    def item_dir(self, item_id: str) -> Path:
        """Where the item's session logs and saved steps live; a second plan's T1 has its own."""
        return self.state_dir / "items" / item_dir_name(item_id, self.namespace)

    def emit(self, item_id: str, payload: Payload, history: ItemHistory | None = None) -> None:
        """Record an event of the item and tell the observers (and the attempt's history)."""
        self.store.append_event(self.project, item_id, payload)
        if history is not None:
            history.record(payload)
        self.observer(payload.kind, item_id, masked(payload))

    def note(self, item_id: str, payload: Payload) -> None:
        """Tell the observers something that is not stored (a note)."""
        self.observer(payload.kind, item_id, masked(payload))

    def remember(self, item_id: str, feedback: Feedback, history: ItemHistory) -> None:
        """Keep what went wrong for the next attempt's prompt."""
        given = FeedbackGiven(
            source=feedback.kind, summary=feedback.summary, detail=feedback.detail[-6000:]
        )
        self.emit(item_id, given, history)

    def fail(self, lease: Lease, reason: str, failure: FailureClass) -> None:
        """End the attempt as failed. The failure policy decides: the item goes back for
        another attempt, or fails now (out of attempts, or a failure another attempt cannot
        fix); a lease already lost is said so instead."""
        try:
            state = leases.fail(
                self.store, lease, reason, permanent=ends_the_item(failure), failure=failure.value
            )
        except LeaseLost:
            self.emit(lease.item_id, LeaseLostNote(worker=lease.worker))
            return
        note: Any = FailedNote if state == ItemState.FAILED else RetryNote
        self.note(lease.item_id, note(reason=reason))
        if state == ItemState.FAILED:
            self._say_on_open_pull(lease, reason)

    def _say_on_open_pull(self, lease: Lease, reason: str) -> None:
        """An item that failed for good in a round of its open pull request says so there, as a
        spent round budget does: its head is the last one pushed, which nothing passed since,
        and nobody should merge it unaware. Best effort: the failure is recorded already."""
        from agent_harness.pipeline.history import ItemHistory
        from agent_harness.pipeline.rounds import say_on_pull
        from agent_harness.store.events import Outcome, PullOpened, Retried
        from agent_harness.tracker.protocol import TrackerError

        history = ItemHistory.read(self.store, self.project, lease.item_id)
        opened = history.last(PullOpened, Outcome, Retried)
        if not isinstance(opened, PullOpened):
            return
        text = (
            f"The item failed, so this pull request gets no more rounds: {reason}. Its head is "
            "the last one pushed; nothing has checked or reviewed a change since."
        )
        with contextlib.suppress(TrackerError), self.tracker_lock:
            say_on_pull(self.tracker, opened.number, text, f"failed:{lease.item_id}:{lease.token}")

    def stop_rounds(self, lease: Lease, pr: int, foreign: str, history: ItemHistory) -> None:
        """A round's attempt found a commit on the branch that no harness run pushed (a person
        answered the review themselves): the rounds stop there, as reconcile stops them, said
        once on the pull request, and the item stays pr_open with nothing pushed over it."""
        from agent_harness.pipeline.rounds import say_on_pull
        from agent_harness.store.events import PullRoundsStopped
        from agent_harness.tracker.protocol import TrackerError

        key = f"foreign:{foreign}"
        reason = (
            f"the branch carries commit {foreign[:12]} that the harness did not make; it will "
            "not push over it"
        )
        said = {stopped.key for stopped in history.all(PullRoundsStopped)}
        leases.complete(self.store, lease)
        note_rounds_stopped(self.store, self.project, lease.item_id, reason)
        if key in said:
            return
        self.emit(lease.item_id, PullRoundsStopped(pr=pr, reason=reason, key=key), history)
        with contextlib.suppress(TrackerError), self.tracker_lock:
            say_on_pull(self.tracker, pr, f"The harness stops its rounds here: {reason}.", key)

    def halt(self, exc: HarnessError) -> None:
        """Stop the run for `exc` once the workers are done with what they hold."""
        self.halted.append(exc)
        self.on_halt()

    def defer(self, lease: Lease, until: float, reason: str, history: ItemHistory) -> None:
        """Park the item until `until` with its attempt given back (a spent window, input)."""
        leases.defer(self.store, lease, until, reason)
        self.emit(lease.item_id, Waiting(until=until, reason=reason), history)

    def check_durations(self) -> dict[str, float]:
        with self.durations_lock:
            return dict(json.loads(self.store.get_meta(self._durations_key) or "{}"))

    def add_check_durations(self, measured: Mapping[str, float]) -> None:
        with self.durations_lock:  # workers measure in parallel; keep every measurement
            latest = json.loads(self.store.get_meta(self._durations_key) or "{}")
            latest.update(measured)
            self.store.set_meta(self._durations_key, json.dumps(latest))

    @property
    def _durations_key(self) -> str:
        return f"check_durations:{self.project}"
