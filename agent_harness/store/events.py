"""The event log's schema: every kind of event the harness writes, and the typed payload of each.

Writers build a payload model and the kind follows from its class; readers get the payload back
as that model, so no code outside this module reads a payload by a string key. An event of a kind
this version does not know (ingested, or from a newer harness) is kept whole as `RawPayload`.
`python -m agent_harness.store.events` writes docs/EVENTS.md from them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_harness.store.event_docs import render_reference
from agent_harness.store.executor_events import ExecutorKind
from agent_harness.store.inception_events import InceptionKind
from agent_harness.store.model_events import ModelCall as ModelCall
from agent_harness.store.model_events import ModelEvent as ModelEvent
from agent_harness.store.model_events import ModelKind
from agent_harness.store.model_events import ModelParked as ModelParked
from agent_harness.store.model_events import ModelRetry as ModelRetry
from agent_harness.store.payload import Payload as Payload
from agent_harness.store.payload import RawPayload as RawPayload
from agent_harness.store.payload import ReportedUsd
from agent_harness.store.round_events import PullMerge as PullMerge
from agent_harness.store.round_events import PullRound as PullRound
from agent_harness.store.round_events import PullRoundsStopped as PullRoundsStopped
from agent_harness.store.round_events import RoundKind


class EventKind(StrEnum):
    """Every kind of event the harness writes (stored) or tells its observers (notes)."""

    # the queue
    ENQUEUED = "enqueued"
    UPDATED = "updated"
    FLAGGED = "flagged"
    CLAIMED = "claimed"
    LEASE_EXPIRED = "lease_expired"
    LEASE_RECLAIMED = "lease_reclaimed"
    ADVANCED = "advanced"
    COMPLETED = "completed"
    REQUEUED = "requeued"
    RELEASED = "released"
    DEFERRED = "deferred"
    ATTEMPT_FAILED = "attempt_failed"
    FAILED = "failed"
    SKIPPED = "skipped"
    HELD = "held"
    UNHELD = "unheld"
    RETRIED = "retried"
    OUTCOME = "outcome"
    UNBLOCKED = "unblocked"
    WOKEN = "woken"
    # one attempt of the pipeline
    WORKTREE = "worktree"
    AGENT_STARTED = "agent_started"
    AGENT_STATE = "agent_state"
    AGENT_FINISHED = "agent_finished"
    PROTECTED_PATHS = "protected_paths"
    SECRET_FOUND = "secret_found"
    CHECK = "check"
    CHECKS_PASSED = "checks_passed"
    REVIEW = "review"
    FEEDBACK = "feedback"
    WAITING = "waiting"
    PUSHED = "pushed"
    PR_OPENED = "pr_opened"
    RESUMED = "resumed"
    LEASE_LOST = "lease_lost"
    # a run's controls (a person's pause / drain / resume, a changed role route)
    CONTROL = "control"
    ROLES_CHANGED = "roles_changed"
    # notes to observers (the live view, --json lines); never stored
    ATTEMPT = "attempt"
    RETRY = "retry"
    WITHDRAWN = "withdrawn"
    RECLAIMED = "reclaimed"
    RECONCILED = "reconciled"
    HELD_ELSEWHERE = "held_elsewhere"
    DELIVERY_DUE = "delivery_due"
    TRACKER_UNANSWERED = "tracker_unanswered"


# --- the queue -------------------------------------------------------------------------------


class Transition(Payload):
    """A state change of an item (from, to)."""

    KIND: ClassVar[EventKind]
    from_: str | None = Field(
        default=None,
        validation_alias=AliasChoices("from", "from_"),
        serialization_alias="from",
        description="State before.",
    )
    to: str | None = Field(default=None, description="State after.")


class Enqueued(Transition):
    """The item entered the queue (pending, or done when the plan checks it off)."""

    KIND = EventKind.ENQUEUED
    hash: str = Field(description="Content hash of the item as enqueued.")


class Updated(Transition):
    """The plan's text of a queued item changed; the queue took the edit."""

    KIND = EventKind.UPDATED
    hash: str = Field(description="New content hash.")
    was: str | None = Field(default=None, description="Content hash before the edit.")


class Flagged(Payload):
    """The plan changed an item while a worker held it: the edit waits, recorded."""

    KIND = EventKind.FLAGGED
    hash: str = Field(description="Content hash of the edit that arrived while in flight.")
    was: str | None = Field(default=None, description="Content hash being worked on.")


class Claimed(Transition):
    """A worker took the item under a lease; one claim is one attempt."""

    KIND = EventKind.CLAIMED
    worker: str = Field(description="Worker that holds the lease.")
    attempt: int = Field(description="Attempt number this claim starts.")
    token: int = Field(description="Fencing token of the lease.")
    expires_at: float = Field(description="Epoch seconds when the lease lapses unless renewed.")


class LeaseExpired(Payload):
    """A lease ran out with no heartbeat: its worker died or stalled."""

    KIND = EventKind.LEASE_EXPIRED
    worker: str | None = Field(default=None, description="Worker whose lease lapsed.")
    attempt: int | None = Field(default=None, description="Attempt that lease belonged to.")
    expired_at: float | None = Field(default=None, description="Epoch seconds it lapsed.")
    attempt_refunded: bool = Field(
        default=False, description="The attempt was given back: a dead worker is no failure."
    )


class LeaseReclaimed(Payload):
    """A restarted worker ended its own earlier lease at once, instead of waiting."""

    KIND = EventKind.LEASE_RECLAIMED
    worker: str = Field(description="Worker name the lease was held under.")
    by: str = Field(description="The restarted worker (or pool prefix) that ended it.")


class LeaseMove(Transition):
    """A lease holder moved its item: progress, delivery, giving it back."""

    KIND: ClassVar[EventKind]
    worker: str | None = Field(default=None, description="Worker that held the lease.")
    attempt: int | None = Field(default=None, description="Attempt number.")
    reason: str | None = Field(default=None, description="Why, in words.")
    until: float | None = Field(default=None, description="Epoch seconds it may run again.")


class Advanced(LeaseMove):
    """The lease holder reached a stage (checks, review)."""

    KIND = EventKind.ADVANCED


class Completed(LeaseMove):
    """The lease ended with the work delivered (a pull request open, or merged)."""

    KIND = EventKind.COMPLETED


class Requeued(LeaseMove):
    """The attempt failed and the item went back for another."""

    KIND = EventKind.REQUEUED


class Released(LeaseMove):
    """The lease holder gave the item back untouched."""

    KIND = EventKind.RELEASED


class Deferred(LeaseMove):
    """The item was parked until a time (a spent window, a parked reviewer); its attempt was
    refunded."""

    KIND = EventKind.DEFERRED


class AttemptFailed(Payload):
    """One attempt failed, with why; `final` says the item failed with it."""

    KIND = EventKind.ATTEMPT_FAILED
    worker: str = Field(description="Worker whose attempt failed.")
    attempt: int = Field(description="Attempt number.")
    reason: str = Field(description="What went wrong.")
    permanent: bool = Field(default=False, description="Another attempt cannot help.")
    final: bool = Field(default=False, description="The item failed with this attempt.")
    failure: str | None = Field(
        default=None,
        description="The failure's class (docs/RELIABILITY.md), which decided whether another "
        "attempt was made; none in events from before it was recorded.",
    )


class Failed(Transition):
    """The item failed for good: out of attempts, or a failure another attempt cannot fix."""

    KIND = EventKind.FAILED
    reason: str = Field(description="Why the item failed.")
    attempt: int | None = Field(default=None, description="Attempts spent.")


class Skipped(Transition):
    """The item will not run: something it depends on failed, or it left the plan."""

    KIND = EventKind.SKIPPED
    reason: str = Field(description="Why it will not run.")
    blocked_by: str | None = Field(default=None, description="The failed item it depends on.")


class Held(Payload):
    """Kept back from this run (`--only` named other items)."""

    KIND = EventKind.HELD
    from_: str | None = Field(
        default=None,
        validation_alias=AliasChoices("from", "from_"),
        serialization_alias="from",
        description="State before.",
    )
    reason: str = Field(description="Why it is held back.")


class Unheld(Transition):
    """Released from a hold by the next run."""

    KIND = EventKind.UNHELD


class Retried(Transition):
    """A person (or the reconciler) put the item back in the queue with fresh attempts."""

    KIND = EventKind.RETRIED
    via: str | None = Field(default=None, description="The item whose retry freed this one.")
    fresh: bool = Field(
        default=False, description="The old branch and worktree are discarded, not kept aside."
    )


class Outcome(Transition):
    """What the tracker says became of the work: merged, closed, reverted."""

    KIND = EventKind.OUTCOME
    evidence: dict[str, Any] = Field(
        default_factory=dict, description="What the tracker showed (PR, merge or revert commit)."
    )


class Unblocked(Transition):
    """A skipped item can run after all: what it waited on was merged."""

    KIND = EventKind.UNBLOCKED
    by: str = Field(description="The item whose merge unblocked this one.")


class Woken(Payload):
    """A waiting item may be claimed now: what it waited for was cleared by a person (a spent
    cap's endpoint unparked). Its attempts are as they were."""

    KIND = EventKind.WOKEN
    reason: str = Field(description="What was cleared, e.g. the endpoint unparked.")


# --- one attempt -----------------------------------------------------------------------------


class WorktreeReady(Payload):
    """The item's worktree and branch are ready (made, or reused with its commits)."""

    KIND = EventKind.WORKTREE
    path: str = Field(description="The item's worktree.")
    branch: str = Field(description="Its branch.")
    base: str = Field(description="Default-branch commit the work starts from.")
    reused: bool = Field(default=False, description="An existing worktree was kept.")
    kept: str | None = Field(
        default=None, description="A ref of this clone's commits the branch as pushed lacked."
    )
    stopped_check: int | None = Field(
        default=None, description="Process group of a check a killed run left running: ended."
    )
    discarded: list[str] = Field(
        default_factory=list, description="Files its checks left changed or new: put back."
    )
    saved: str | None = Field(default=None, description="The tracked changes put back, as a patch.")


class AgentStarted(Payload):
    """The implementer started, in a session a person can attach to."""

    KIND = EventKind.AGENT_STARTED
    implementer: str = Field(description="Preset or executor name.")
    session: str = Field(description="Session name (attach to it).")
    attempt: int = Field(description="Attempt number.")
    host: str | None = Field(default=None, description="tmux, headless or remote.")
    host_url: str | None = Field(default=None, description="The remote session host's URL.")
    log: str | None = Field(default=None, description="Path of the session's log.")
    worktree: str | None = Field(default=None, description="Where the agent works.")


class AgentStateChanged(Payload):
    """The agent in a session changed state (e.g. it waits for input); the direct-API
    executor's steps are `executor.*` events of their own."""

    KIND = EventKind.AGENT_STATE
    state: str = Field(description="e.g. waiting_for_input.")
    detail: str = Field(default="", description="The question shown.")


USAGE_FROM_AGENT = "agent"  # where an implementer's usage is (`AgentFinished.usage_from`)
USAGE_FROM_CALLS = "calls"


class AgentFinished(Payload):
    """The implementer ended, with how, and what it reported of tokens and cost."""

    KIND = EventKind.AGENT_FINISHED
    ok: bool = Field(description="The implementer finished normally.")
    state: str = Field(description="done, crashed, timeout, rate_limited, ...")
    reason: str = Field(default="", description="How it ended, in words.")
    failure: str | None = Field(default=None, description="Failure class, when one applies.")
    wait_until: float | None = Field(default=None, description="Epoch seconds a window resets.")
    permanent: bool = Field(default=False, description="Retrying cannot help.")
    tokens_in: int | None = Field(default=None, description="Input tokens, when reported.")
    tokens_out: int | None = Field(default=None, description="Output tokens, when reported.")
    cost_usd: ReportedUsd = Field(default=None, description="Cost reported; null if unknown.")
    run_id: str | None = Field(default=None, description="The run that paid for it.")
    tail: str = Field(default="", description="The last of what the agent printed.")
    usage_from: str | None = Field(
        default=None,
        description='"agent": the figures here are all a CLI agent reported (none: cost unknown); '
        '"calls": its model.call events hold its usage (the executor). Null in older events.',
    )


class ProtectedPaths(Payload):
    """The change touched a protected path or left the item's files: stopped before review."""

    KIND = EventKind.PROTECTED_PATHS
    violations: list[str] = Field(description="One reason per offending path.")


class SecretFound(Payload):
    """The change holds a secret: stopped before the reviewer or a push could see it."""

    KIND = EventKind.SECRET_FOUND
    findings: list[str] = Field(description="file:line and which secret, never its value.")
    sha: str | None = Field(default=None, description="The commit that holds them.")


class CheckRan(Payload):
    """One check command ran in the worktree."""

    KIND = EventKind.CHECK
    command: str = Field(description="The check command.")
    exit_code: int | None = Field(default=None, description="Null when it timed out or never ran.")
    duration_s: float = Field(default=0.0, description="Seconds it took.")
    timed_out: bool = Field(default=False, description="Killed at its timeout.")
    missing: bool = Field(default=False, description="Its program was not found.")
    tail: str = Field(default="", description="The end of its output.")

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.missing


class ChecksPassed(Payload):
    """Every check passed on this commit (a resumed run reviews it without the agent)."""

    KIND = EventKind.CHECKS_PASSED
    sha: str = Field(description="The commit every check passed on.")


class Reviewed(Payload):
    """The reviewer's verdict on a commit, with what it cost."""

    KIND = EventKind.REVIEW
    approved: bool = Field(description="The reviewer's verdict.")
    reasons: list[str] = Field(default_factory=list, description="Why, in the reviewer's words.")
    permanent: bool = Field(default=False, description="A no that another attempt cannot fix.")
    malformed: bool = Field(default=False, description="No structured verdict could be read.")
    attempts: int | None = Field(default=None, description="Calls it took to get a verdict.")
    vendor: str | None = Field(default=None, description="The reviewer's vendor.")
    model: str | None = Field(default=None, description="The reviewer's model.")
    tokens_in: int | None = Field(default=None, description="Input tokens, when reported.")
    tokens_out: int | None = Field(default=None, description="Output tokens, when reported.")
    cost_usd: ReportedUsd = Field(default=None, description="Cost reported; null if unknown.")
    sha: str | None = Field(default=None, description="The commit reviewed.")
    run_id: str | None = Field(default=None, description="The run that paid for it.")


class FeedbackGiven(Payload):
    """What went wrong, kept for the next attempt's prompt."""

    KIND = EventKind.FEEDBACK
    source: str = Field(
        validation_alias=AliasChoices("kind", "source"),
        serialization_alias="kind",
        description="agent, checks, review or protected (a protected path touched).",
    )
    summary: str = Field(description="One line for the next attempt's prompt.")
    detail: str = Field(default="", description="Output that explains it (clipped).")


class Waiting(Payload):
    """The item waits (a spent window, a parked reviewer) with its attempt refunded."""

    KIND = EventKind.WAITING
    until: float | None = Field(default=None, description="Epoch seconds it may run again.")
    reason: str = Field(default="", description="What it waits for.")


class Pushed(Payload):
    """The item branch was pushed."""

    KIND = EventKind.PUSHED
    branch: str = Field(description="The item branch pushed.")
    sha: str = Field(description="Its head.")


class PullOpened(Payload):
    """The pull request that closes the item's issue is open (or was updated)."""

    KIND = EventKind.PR_OPENED
    number: int = Field(description="Pull request number.")
    url: str = Field(description="Its web address.")
    reused: bool = Field(default=False, description="An open PR of the branch was updated.")
    branch: str | None = Field(default=None, description="Its head branch.")


class Resumed(Payload):
    """A finished step was not redone after a restart."""

    KIND = EventKind.RESUMED
    sha: str = Field(description="The commit work resumed from.")
    why: str = Field(description="Which finished step was not redone.")


class LeaseLostNote(Payload):
    """The worker lost its lease mid-attempt (it lapsed, or another took over): it stopped."""

    KIND = EventKind.LEASE_LOST
    worker: str | None = Field(default=None, description="Worker that lost it.")
    attempt: int | None = Field(default=None, description="Attempt number.")


# --- a run's controls ------------------------------------------------------------------------


class ControlChanged(Payload):
    """A person asked a project's workers to pause, drain or resume (`agent-harness control`)."""

    KIND = EventKind.CONTROL
    state: str = Field(description="running, paused or draining: what was asked.")
    previous: str = Field(description="The state asked before.")
    by: str = Field(description="Who asked: the command, or the API.")


class RolesChanged(Payload):
    """The role routes changed while the run ran: the next call of each role takes its new one."""

    KIND = EventKind.ROLES_CHANGED
    roles: dict[str, str] = Field(description="Changed role -> vendor:model at endpoint (or -).")
    source: str = Field(description="Where the new routes were read (a file, or the API).")


# --- notes to observers ----------------------------------------------------------------------


class Note(Payload):
    KIND: ClassVar[EventKind]
    STORED = False


class AttemptStarted(Note):
    """A worker starts an attempt at the item."""

    KIND = EventKind.ATTEMPT
    attempt: int = Field(description="Attempt number.")
    worker: str = Field(description="Worker on it.")


class RetryNote(Note):
    """An attempt failed; the item goes back in the queue."""

    KIND = EventKind.RETRY
    reason: str = Field(description="Why the attempt failed; the item goes back in the queue.")


class FailedNote(Note):
    """The observers' "failed": an item failed, or its handler crashed."""

    KIND = EventKind.FAILED
    reason: str = Field(description="Why.")


class Withdrawn(Note):
    """The item will not run: it left the plan, or a person closed its issue."""

    KIND = EventKind.WITHDRAWN
    reason: str = Field(description="Why it will not run (e.g. no longer in the plan).")


class ReclaimedNote(Note):
    """A restarted run took its own leases back."""

    KIND = EventKind.RECLAIMED
    workers: str = Field(description="Worker-name prefix of this host's pool.")


class ReconciledNote(Note):
    """The tracker moved the item (merged, closed, reverted)."""

    KIND = EventKind.RECONCILED
    state: str = Field(description="The state the tracker moved the item to.")
    pr: int | None = Field(default=None, description="The pull request behind it.")


class HeldElsewhere(Note):
    """Nothing is left to claim here, but another host's workers hold items: the run waits
    for their leases to end (the work done) or lapse (then it takes the items over)."""

    KIND = EventKind.HELD_ELSEWHERE
    items: list[str] = Field(description="The items held.")
    hosts: list[str] = Field(description="The hosts holding them (worker name prefixes).")
    ends_in_s: float = Field(description="Seconds until the first of those leases ends.")

    def describe(self) -> str:
        count = len(self.items)
        what = f"{count} item{'s' if count != 1 else ''}"
        return (
            f"{what} held by host {', '.join(self.hosts)}, lease ends in {self.ends_in_s:.0f} s; "
            "waiting"
        )


class DeliveryDue(Note):
    """Nothing is left to claim, but approved work waits to be delivered once the tracker
    answers again: the run stays for it (no agent or reviewer runs again)."""

    KIND = EventKind.DELIVERY_DUE
    items: list[str] = Field(description="The items whose delivery waits.")
    due_in_s: float = Field(description="Seconds until the first is tried again.")

    def describe(self) -> str:
        return f"delivery of {', '.join(self.items)} tried again in {self.due_in_s:.0f} s; waiting"


class TrackerUnanswered(Note):
    """A look at the tracker between claims (for merges, closes and review rounds) failed. A
    refused token or a repository out of reach stops the run, as it would stop every delivery;
    anything else (down, slow, rate limited past the retries) only costs this look's news,
    which the next look or run brings."""

    KIND = EventKind.TRACKER_UNANSWERED
    reason: str = Field(description="What the tracker answered, or that it did not.")
    status: int | None = Field(default=None, description="Its HTTP status, if it answered.")
    stops_run: bool = Field(description="True when the run stops for it.")

    def describe(self) -> str:
        then = "the run stops" if self.stops_run else "going on without its news"
        return f"the tracker did not answer a look between claims ({self.reason}); {then}"


AnyPayload = Payload | RawPayload
PayloadT = TypeVar("PayloadT", bound=Payload)

# Every kind: the pipeline's, its model calls' (store/model_events.py), its PR rounds'
# (store/round_events.py), the executor's (store/executor_events.py), then inception's
# (agent_harness/store/inception_events.py).
ALL_KINDS: tuple[StrEnum, ...] = (
    *EventKind,
    *ModelKind,
    *RoundKind,
    *ExecutorKind,
    *InceptionKind,
)
# The stored kinds and the model each is read back as (notes are never read back).
STORED_MODELS: dict[str, type[Payload]] = {}
NOTE_MODELS: dict[str, type[Payload]] = {}


def _register() -> None:
    pending: list[type[Payload]] = list(Payload.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        kind = model.__dict__.get("KIND")
        if kind is None:
            continue  # an abstract base (Transition, LeaseMove, ModelEvent, ExecutorEvent, Note)
        assert kind in ALL_KINDS, f"{kind} is not in ALL_KINDS"
        table = STORED_MODELS if model.STORED else NOTE_MODELS
        assert kind.value not in table, f"two models for {kind.value}"
        table[kind.value] = model


_register()


def read_payload(kind: str, data: dict[str, Any]) -> AnyPayload:
    """A stored payload as its model; kept whole as `RawPayload` when the kind is unknown to
    this version or its fields do not fit the model (say why in `problem`)."""
    model = STORED_MODELS.get(kind)
    if model is None:
        return RawPayload(raw_kind=kind, data=data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "payload"
        return RawPayload(raw_kind=kind, data=data, problem=f"{where}: {first['msg']}")


def payload_of(kind: str, fields: dict[str, Any]) -> Payload:
    """The payload model of a kind the harness writes, from its fields (for parts that report
    events as a kind and fields, like the model client); an unknown kind is a bug."""
    model = STORED_MODELS.get(kind)
    if model is None:
        raise ValueError(f"no event kind {kind!r} in the schema (agent_harness.store.events)")
    return model.model_validate(fields)


class Event(BaseModel):
    """One row of the append-only log, its payload typed by its kind."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: int = Field(description="Row id; increases in commit order, page by it.")
    ts: float = Field(description="Epoch seconds when the event happened.")
    project: str = Field(description="Project the event belongs to.")
    item: str | None = Field(default=None, description="Work item id, if any.")
    kind: str = Field(description="What happened, e.g. claimed or failed (see EventKind).")
    payload: AnyPayload = Field(description="Details of the event, typed by its kind.")
    external_id: str | None = Field(default=None, description="Id given by an outside source.")

    @model_validator(mode="before")
    @classmethod
    def _typed_payload(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("payload"), dict | str):
            raw = data["payload"]
            fields = json.loads(raw) if isinstance(raw, str) else raw
            data = {**data, "payload": read_payload(str(data.get("kind")), fields)}
        return data

    @property
    def written_by_harness(self) -> bool:
        """Written by this harness, not ingested from a file (which cannot plant an approval)."""
        return self.external_id is None

    def as_json(self) -> dict[str, Any]:
        """The event for `--json` output, its payload as stored."""
        return {
            "id": self.id,
            "ts": self.ts,
            "project": self.project,
            "item": self.item,
            "kind": self.kind,
            "payload": self.payload.as_dict(),
            "external_id": self.external_id,
        }


def last_of(
    events: Iterable[Event], *models: type[PayloadT], harness_only: bool = True
) -> PayloadT | None:
    """The payload of the latest of `events` that is one of `models` (written by the harness
    itself unless `harness_only` is False: an ingested file cannot plant an approval)."""
    found: PayloadT | None = None
    for event in events:
        if isinstance(event.payload, models) and (event.written_by_harness or not harness_only):
            found = event.payload
    return found


def reference_markdown() -> str:
    """docs/EVENTS.md: every kind, what it means and its fields, generated from the models."""
    return render_reference([k.value for k in ALL_KINDS], STORED_MODELS, NOTE_MODELS)


if __name__ == "__main__":
    print(reference_markdown(), end="")
