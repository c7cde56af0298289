"""The API's request and response bodies: every field typed and described, so /openapi.json is
the reference a host codes against. Each `from_*` turns a library record into its answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic.json_schema import SkipJsonSchema

from agent_harness.audit.baselines import (
    LABEL_PATTERN,
    MAX_DAYS,
    MAX_TOTAL,
    MIN_DAYS,
    Comparison,
)
from agent_harness.audit.ingest import IngestReport
from agent_harness.audit.maintenance import RollupDay
from agent_harness.errors import without_lone_surrogates
from agent_harness.models.routes import VENDOR_DEFAULTS
from agent_harness.plan.model import Notice, WorkItem
from agent_harness.queue.items import ItemRecord
from agent_harness.queue.projects import (
    ITEM_PATTERN,
    PROJECT_PATTERN,
    Count,
    ProjectOverview,
    ProjectRecord,
    ProjectSpec,
)
from agent_harness.queue.views import (
    ClaimView,
    ErrorsView,
    FailureCount,
    ItemView,
    Summary,
    WorkView,
)
from agent_harness.store.events import Event

Mode = Literal["monitoring", "supervised"]
Control = Literal["stopped", "running", "unmanaged"]


# vendor:model, with a vendor the server knows (the schema then says what is refused).
# (Printable ASCII for the model: what `\S` means differs between regex engines.)
PLANNER_PATTERN = "^(" + "|".join(sorted(VENDOR_DEFAULTS)) + r"):[!-~]+$"


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(_Out):
    """Why a request was refused."""

    detail: str = Field(description="What is wrong, in one sentence.")


class Health(_Out):
    """The server is up (says nothing about whether it can run anything)."""

    status: Literal["ok"] = Field(description="Always 'ok' when the server answers.")
    mode: Mode = Field(description="monitoring (read-only) or supervised (runs worker pools).")
    version: str = Field(description="agent-harness version.")


class Index(_Out):
    """Where to go from the server's root (the address its start line prints)."""

    mode: Mode = Field(description="monitoring (read-only) or supervised (runs worker pools).")
    version: str = Field(description="agent-harness version.")
    links: dict[str, str] = Field(description="Paths that answer, by what they give.")


class ProjectOut(_Out):
    """A project: registered here, or only known from the queue (run by `agent-harness run`)."""

    id: str = Field(description="owner/repo:plankey, the queue's project name.")
    counts: dict[str, int] = Field(description="Items by state.")
    control: Control = Field(
        description="running or stopped (registered here); unmanaged: this server does not "
        "run it (another process may)."
    )
    registered: bool = Field(description="Registered with this server.")
    spec: ProjectSpec | None = Field(description="What was registered; null when unmanaged.")
    added: list[str] = Field(description="Ids of items added through the API (not in the plan).")
    pool_error: str | None = Field(
        description="Why this server's last pass over the project failed (it tries again); "
        "null when it did not."
    )

    @classmethod
    def from_overview(cls, view: ProjectOverview, pool_error: str | None = None) -> ProjectOut:
        return cls._build(view.id, view.counts, view.registered, pool_error)

    @classmethod
    def _build(
        cls, pid: str, counts: dict[str, int], record: ProjectRecord | None, error: str | None
    ) -> ProjectOut:
        return cls(
            id=pid,
            counts=counts,
            control=record.control.value if record else "unmanaged",
            registered=record is not None,
            spec=record.spec if record else None,
            added=[item.id for item in record.added] if record else [],
            pool_error=error,
        )


class ProjectList(_Out):
    """Every project with its counts and control state."""

    projects: list[ProjectOut] = Field(description="Sorted by id.")


class ItemOut(_Out):
    """A work item as the queue holds it."""

    id: str = Field(description="Item id from the plan, e.g. T4.")
    title: str = Field(description="One-line title.")
    state: str = Field(description="pending, waiting, claimed, checks, review, pr_open, ...")
    attempts: int = Field(description="Attempts spent.")
    max_attempts: int = Field(description="Attempt budget.")
    worker: str | None = Field(description="Worker holding its lease, if any.")
    lease_expires: float | None = Field(description="Epoch seconds the lease lapses.")
    not_before: float | None = Field(description="Waiting until (epoch seconds).")
    reason: str | None = Field(description="Why it failed, waits or was skipped.")
    blocked_by: str | None = Field(description="The item whose failure skipped this one.")
    flagged: bool = Field(description="Edited in the plan while in flight (edit waits).")
    depends_on: list[str] = Field(description="Items that must be done first.")

    @classmethod
    def of(cls, record: ItemRecord) -> ItemOut:
        return cls(
            id=record.id,
            title=record.title,
            state=record.state.value,
            attempts=record.attempts,
            max_attempts=record.max_attempts,
            worker=record.worker,
            lease_expires=record.lease_expires,
            not_before=record.not_before,
            reason=record.reason,
            blocked_by=record.blocked_by,
            flagged=record.flagged,
            depends_on=list(record.depends_on),
        )


class ClaimOut(_Out):
    """A lease on an item."""

    item: str = Field(description="Item id.")
    state: str = Field(description="The item's stage.")
    worker: str = Field(description="Worker holding the lease.")
    attempt: int = Field(description="Attempt number.")
    expires_at: float = Field(description="Epoch seconds the lease lapses.")
    reason: str | None = Field(
        default=None,
        description="Why it is held as it is: its run was stopped and the next run takes it "
        "back; null while its worker is at work.",
    )

    @classmethod
    def of(cls, claim: ClaimView) -> ClaimOut:
        return cls(
            item=claim.item_id,
            state=claim.state,
            worker=claim.worker,
            attempt=claim.attempt,
            expires_at=claim.expires_at,
            reason=claim.reason,
        )


class WorkOut(_Out):
    """A project's queue in one answer."""

    project: str = Field(description="owner/repo:plankey.")
    counts: dict[str, int] = Field(description="Items by state.")
    total: int = Field(description="Items in the chosen states; `backlog` is a page of them.")
    offset: int = Field(description="Where this page starts.")
    backlog: list[ItemOut] = Field(description="A page of the chosen items, in plan order.")
    live: list[ClaimOut] = Field(description="Claims whose lease is live.")
    stale: list[ClaimOut] = Field(
        description="Claims whose lease lapsed and nobody took over yet (the next worker will)."
    )

    @classmethod
    def of(cls, view: WorkView, offset: int) -> WorkOut:
        return cls(
            project=view.project,
            counts=view.counts,
            total=view.total,
            offset=offset,
            backlog=[ItemOut.of(r) for r in view.backlog],
            live=[ClaimOut.of(c) for c in view.live],
            stale=[ClaimOut.of(c) for c in view.stale],
        )


class EventOut(_Out):
    """One row of the append-only event log."""

    id: int = Field(description="Row id; increases in commit order; page by it.")
    ts: float = Field(description="Epoch seconds when it happened.")
    project: str = Field(description="Project.")
    item: str | None = Field(description="Item id, if any.")
    kind: str = Field(description="What happened (docs/EVENTS.md lists every kind).")
    payload: dict[str, Any] = Field(description="Its fields, as docs/EVENTS.md gives them.")
    external_id: str | None = Field(description="Id given by an outside source (ingest).")

    @classmethod
    def of(cls, event: Event) -> EventOut:
        return cls(
            id=event.id,
            ts=event.ts,
            project=event.project,
            item=event.item,
            kind=event.kind,
            payload=event.payload.as_dict(),
            external_id=event.external_id,
        )


class SessionOut(_Out):
    """Where the item's agent runs (or ran)."""

    name: str = Field(description="Session name on its host.")
    host: str | None = Field(description="tmux, headless or remote.")
    log: str | None = Field(description="Path of the session's log on the server.")
    attach: str = Field(
        description="The command that watches or answers it, run on the host named by `worker`."
    )
    worker: str | None = Field(
        default=None,
        description="The worker whose run started it (host id/wN): its host holds the session "
        "and its log. Null when the history no longer names it.",
    )


class ItemDetail(_Out):
    """One item, its events (oldest first) and its agent's session."""

    project: str = Field(description="owner/repo:plankey.")
    item: ItemOut = Field(description="The item as it stands.")
    events: list[EventOut] = Field(description="Its latest events, oldest first.")
    session: SessionOut | None = Field(description="Its agent's session; null before one.")

    @classmethod
    def of(cls, view: ItemView) -> ItemDetail:
        session = None
        if view.session is not None:
            s = view.session
            session = SessionOut(
                name=s.name, host=s.host, log=s.log, attach=s.attach, worker=s.worker
            )
        return cls(
            project=view.project,
            item=ItemOut.of(view.record),
            events=[EventOut.of(e) for e in view.events],
            session=session,
        )


# A label as GitHub takes one: any text but control characters.
LABEL_TEXT = r"^[^\x00-\x1f\x7f]+$"
# Patterns the routes share, each said in words by a 422 (api.errors.PATTERN_WORDS).
SESSION_PATTERN = r"^[0-9a-f]{12}$"
QUESTION_PATTERN = r"^Q[0-9]{1,3}$"
KIND_PATTERN = r"^[a-z_]{1,64}$"
ROLE_PATTERN = r"^[a-z_]{1,32}$"
MODEL_PATTERN = r"^[a-z0-9_-]{1,32}:[A-Za-z0-9._:/-]{1,120}$"


class NewItem(BaseModel):
    """An item added directly, outside the plan file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=ITEM_PATTERN, description="A new id, e.g. X1.")
    title: str = Field(min_length=1, max_length=300, description="One-line title.")
    body: str = Field(default="", max_length=20_000, description="Markdown: what to do.")
    depends_on: list[Annotated[str, Field(pattern=ITEM_PATTERN)]] = Field(
        default_factory=list, max_length=50, description="Ids that must be done first."
    )
    success_check: str | None = Field(
        default=None, max_length=500, description="How to tell it is done, e.g. `pytest -q`."
    )
    labels: list[Annotated[str, Field(pattern=LABEL_TEXT, max_length=50)]] = Field(
        default_factory=list, max_length=20, description="Tracker labels (GitHub's limit: 50)."
    )

    @model_validator(mode="after")
    def _not_itself(self) -> NewItem:
        if self.id in self.depends_on:
            raise ValueError(f"{self.id} cannot depend on itself")
        return self

    def as_item(self) -> WorkItem:
        return WorkItem(
            id=self.id,
            title=self.title,
            body=self.body,
            depends_on=tuple(self.depends_on),
            success_check=self.success_check,
            labels=tuple(self.labels),
            line=0,
            form="heading",
        )


class AddWork(BaseModel):
    """Items to add to a registered project's queue."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(pattern=PROJECT_PATTERN, description="owner/repo:plankey.")
    items: list[NewItem] = Field(min_length=1, max_length=200, description="The items.")


class AddWorkOut(_Out):
    """What adding did."""

    project: str = Field(description="owner/repo:plankey.")
    added: list[str] = Field(
        description="Ids kept now; the project's next pass mirrors them to issues and queues "
        "them with its plan."
    )
    unchanged: list[str] = Field(description="Ids kept already, exactly as given.")


class RetryOut(_Out):
    """Items put back in the queue."""

    project: str = Field(description="owner/repo:plankey.")
    requeued: list[str] = Field(description="The item and the items it had skipped.")


class PlanParseIn(BaseModel):
    """A plan to read: its text, or a registered project's plan file (exactly one of them)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["text"]}, {"required": ["project"]}]},
    )

    text: Annotated[str, StringConstraints(max_length=512_000)] | SkipJsonSchema[None] = Field(
        default=None, description="Markdown of a plan (give this or project)."
    )
    project: Annotated[str, StringConstraints(pattern=PROJECT_PATTERN)] | SkipJsonSchema[None] = (
        Field(default=None, description="Read this registered project's plan.")
    )

    @model_validator(mode="before")
    @classmethod
    def _as_described(cls, data: Any) -> Any:
        # The description says a string or nothing: a null is refused as it says. Half a
        # surrogate pair (JSON's "\\ud800") would fail the answer that repeats it.
        if isinstance(data, dict):
            data = dict(data)
            for name in ("text", "project"):
                if name in data and data[name] is None:
                    raise ValueError(f"{name} is a string: leave it out instead of null")
                if isinstance(data.get(name), str):
                    data[name] = without_lone_surrogates(data[name])
        return data


class PlanParseOut(_Out):
    """The items of a plan, and the lines that could not be read."""

    source: str = Field(description="Where the plan came from.")
    items: list[WorkItem] = Field(description="The items, in plan order.")
    unread: list[Notice] = Field(description="Lines that look like items but were not read.")
    notes: list[str] = Field(description="Remarks on the whole plan.")


class PlanSyncIn(BaseModel):
    """Mirror a registered project's plan to its issues."""

    model_config = ConfigDict(extra="forbid")

    project: str = Field(pattern=PROJECT_PATTERN, description="owner/repo:plankey.")
    # Strict: a `0` or `"no"` read as false would make a dry run write.
    dry_run: bool = Field(
        default=True, strict=True, description="Say what would change, write nothing."
    )


class IssueChange(_Out):
    id: str = Field(description="Item id.")
    issue: int | None = Field(description="Issue number (null: not created yet).")
    changes: list[str] = Field(description="What differs, field by field.")
    title: str | None = Field(
        default=None, description="In a dry run, the issue's title as it would be written."
    )
    body: str | None = Field(
        default=None, description="In a dry run, the issue's body as it would be written."
    )


class ClosedIssue(_Out):
    id: str = Field(description="Item id.")
    issue: int = Field(description="Its issue's number.")


class PlanSyncOut(_Out):
    """What a sync did, or with dry_run would do."""

    repo: str = Field(description="OWNER/NAME.")
    plan_key: str = Field(description="The plan's key.")
    dry_run: bool = Field(description="Nothing was written.")
    created: list[IssueChange] = Field(description="Issues created (or to create).")
    updated: list[IssueChange] = Field(description="Issues updated (or to update).")
    unchanged: list[IssueChange] = Field(description="Issues that say what the plan says.")
    orphaned: list[IssueChange] = Field(description="Issues of items gone from the plan.")
    skipped_done: list[str] = Field(description="Items done in the plan, never created.")
    done_but_open: list[IssueChange] = Field(description="Done in the plan, issue still open.")
    closed_by_a_person: list[ClosedIssue] = Field(
        description="To do in the plan, issue closed by a person: not worked while it is closed."
    )
    notices: list[str] = Field(description="What a person should act on.")
    labels_created: list[str] = Field(description="Labels made.")
    milestones_created: list[str] = Field(description="Milestones made.")
    problems: list[str] = Field(description="Per-item problems (the rest was kept).")
    requests: int = Field(description="Tracker requests made.")
    writes: int = Field(description="Tracker writes made.")


class FailureOut(_Out):
    failure: str = Field(description="Failure class (agent_harness/failures.py).")
    action: str | None = Field(description="What the failure policy does: retry, park, ...")
    count: int = Field(description="How many times it happened.")
    last_at: float = Field(description="Epoch seconds of the latest.")
    last_message: str | None = Field(description="The latest words on it (provider, reason).")

    @classmethod
    def of(cls, count: FailureCount) -> FailureOut:
        return cls(
            failure=count.failure,
            action=count.action,
            count=count.count,
            last_at=count.last_at,
            last_message=count.last_message,
        )


class ParkedOut(_Out):
    key: str = Field(description="Endpoint (vendor:model or URL) that is parked.")
    until: float = Field(description="Epoch seconds it reopens.")
    reason: str = Field(description="Why.")


class RecentFailureOut(_Out):
    event: int = Field(description="Id of the attempt_failed event.")
    at: float = Field(description="Epoch seconds.")
    project: str = Field(description="owner/repo:plankey.")
    item: str | None = Field(description="Item id.")
    reason: str = Field(description="Why the attempt failed.")


class ErrorsOut(_Out):
    """Rate limits and failures by class, over the latest events (see first_event_id)."""

    by_class: list[FailureOut] = Field(
        description="Failures named by class (model calls, agent runs), most frequent first."
    )
    rate_limited: int = Field(description="Failures of the rate-limit classes burst/window/cap.")
    attempts_failed: int = Field(description="Attempts that failed.")
    attempts_by_class: list[FailureOut] = Field(
        description="The failed attempts by the class of their failure (which decided whether "
        "another attempt was made), most frequent first; attempts recorded before the class was "
        "are counted as 'unclassified'."
    )
    items_failed: int = Field(description="Items failed for good (all time).")
    parked: list[ParkedOut] = Field(description="Endpoints parked now.")
    recent: list[RecentFailureOut] = Field(
        description="The latest failed attempts, and items failed at their open pull request "
        "(a spent round budget), newest first."
    )
    first_event_id: int = Field(description="The counts cover events from this id to the newest.")

    @classmethod
    def of(cls, view: ErrorsView) -> ErrorsOut:
        return cls(
            by_class=[FailureOut.of(c) for c in view.by_class],
            rate_limited=view.rate_limited,
            attempts_failed=view.attempts_failed,
            attempts_by_class=[FailureOut.of(c) for c in view.attempts_by_class],
            items_failed=view.items_failed,
            parked=[ParkedOut(key=p.key, until=p.until, reason=p.reason) for p in view.parked],
            recent=[
                RecentFailureOut(
                    event=r.event_id, at=r.at, project=r.project, item=r.item, reason=r.reason
                )
                for r in view.recent
            ],
            first_event_id=view.first_event_id,
        )


class EventPage(_Out):
    """Events after a row id, oldest first."""

    events: list[EventOut] = Field(description="At most `limit` events.")
    next_after: int = Field(description="Pass as `after` for the next page (same when none).")


class SummaryOut(_Out):
    """Enough for a status line."""

    mode: Mode = Field(description="monitoring or supervised.")
    projects: int = Field(description="Projects known (queued or registered).")
    counts: dict[str, int] = Field(description="Items by state over every project.")
    live: int = Field(description="Live claims.")
    stale: int = Field(description="Lapsed claims nobody took over yet.")
    last_event_id: int = Field(description="Newest event's id: poll /api/events after it.")
    parked: int = Field(description="Model endpoints parked now.")
    running: list[str] = Field(description="Projects whose worker pool runs on this server.")

    @classmethod
    def of(cls, view: Summary, mode: Mode, running: list[str]) -> SummaryOut:
        return cls(
            mode=mode,
            projects=view.projects,
            counts=view.counts,
            live=view.live,
            stale=view.stale,
            last_event_id=view.last_event_id,
            parked=view.parked,
            running=running,
        )


# --- inception ---------------------------------------------------------------------------------


class InceptionStart(_Out):
    """A paragraph to argue into a plan, and the model that plans it."""

    paragraph: str = Field(
        min_length=1, max_length=20_000, description="The work in your words, a few sentences."
    )
    planner: str = Field(
        pattern=PLANNER_PATTERN,
        max_length=200,
        description="The planner's route, vendor:model (e.g. openai:gpt-4.1).",
    )


class InceptionScopeIn(_Out):
    """Propose the scope (no feedback), or revise the proposed one with feedback."""

    feedback: str | None = Field(
        default=None,
        max_length=5_000,
        description="What to change in the proposed scope; leave out for the first proposal.",
    )


class QuestionStep(_Out):
    """Settle one question: answer it, defer it (not while BLOCKING) or re-grade it."""

    action: Literal["answer", "defer", "regrade"] = Field(description="What to do.")
    answer: str | None = Field(
        default=None, max_length=5_000, description="The answer (action=answer)."
    )
    grade: Literal["BLOCKING", "IMPORTANT", "NICE"] | None = Field(
        default=None, description="The new grade (action=regrade)."
    )
    reason: str | None = Field(
        default=None, max_length=1_000, description="Why it is re-graded (action=regrade)."
    )


class InceptionPlanOut(_Out):
    """An approved session's PLAN.md, as `agent-harness plan` and /api/plan/parse read it."""

    session: str = Field(description="The session id.")
    markdown: str = Field(description="The PLAN.md text.")
    items: list[str] = Field(description="The plan's item ids, in order.")
    flagged: list[str] = Field(description="Items whose check cannot be observed by a command.")


# --- audit -------------------------------------------------------------------------------------


class RollupsOut(_Out):
    """The daily rollups maintenance made, oldest first: the long series, kept forever."""

    days: list[RollupDay] = Field(description="One entry per rolled-up UTC day.")


class BaselinesOut(_Out):
    """Every recorded baseline against what the audit measured."""

    baselines: list[Comparison] = Field(description="By label; empty when none is recorded.")


class BaselineIn(_Out):
    """A prior measurement of the workload, recorded once and never changed."""

    label: str = Field(pattern=LABEL_PATTERN, description="Its name, e.g. before-harness.")
    delivered: Count = Field(ge=0, le=MAX_TOTAL, description="Items delivered in the period.")
    days: float = Field(
        ge=MIN_DAYS,
        le=MAX_DAYS,
        allow_inf_nan=False,
        strict=True,
        description="Length of the period in days.",
    )

    def spec(self) -> str:
        """As the CLI's --baseline TOTAL:DAYS:LABEL."""
        return f"{self.delivered}:{self.days!r}:{self.label}"


class SkippedOut(_Out):
    """A line or record the ingest could not read."""

    where: str = Field(description="Where it is (file:line or record).")
    reason: str = Field(description="Why it was not read.")


class ReconcileOut(_Out):
    """What recording the work log into the audit did (as `agent-harness ingest`)."""

    source: str = Field(description="The work log read, by a name that survives restarts.")
    added: int = Field(description="Audit rows added now.")
    duplicates: int = Field(description="Rows already recorded (an ingest never adds twice).")
    deliveries: int = Field(description="Merged, closed or reverted outcomes among those added.")
    high_water: int = Field(description="Last work-log event id now recorded.")
    skipped: list[SkippedOut] = Field(description="What could not be read; the rest was.")

    @classmethod
    def of(cls, report: IngestReport) -> ReconcileOut:
        return cls(
            source=report.source,
            added=report.added,
            duplicates=report.duplicates,
            deliveries=report.deliveries,
            high_water=report.high_water,
            skipped=[SkippedOut(where=s.where, reason=s.reason) for s in report.skipped],
        )
