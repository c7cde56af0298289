"""One audited row: an event as the audit keeps it, with its usage and its price.

Where usage comes from, and what it is called:
- `model.call` events: one call of the harness's own model client. Priced here, per call
  (`usage_source` "api").
- `agent_finished` and a CLI agent's `review`: what a CLI agent said about its own run, per
  attempt (`usage_source` "cli"). The CLI's own cost figure is kept as `reported_cost_usd`,
  beside (never instead of) the price computed here, which needs the model the CLI seldom names.
  A model reviewer's `review` is not usage: its calls are already `model.call` events.
- adapter rows (Claude Code transcripts, Codex session logs): "claude-code" / "codex".
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pydantic import ValidationError

from agent_harness.audit.pricing import (
    COUNTS_UNFIT,
    Extra,
    Price,
    Usage,
    billed_by,
    counts_fit,
    new_usage,
    price,
)
from agent_harness.store.events import (
    STORED_MODELS,
    USAGE_FROM_CALLS,
    AgentFinished,
    Event,
    ModelCall,
    Outcome,
    Reviewed,
    read_payload,
)
from agent_harness.store.model_events import ModelLost


def day_of(ts: float) -> str:
    """The UTC day an instant belongs to, as YYYY-MM-DD."""
    return _day_number(int(ts // 86_400))


@functools.lru_cache(maxsize=4096)
def _day_number(number: int) -> str:
    return datetime.fromtimestamp(number * 86_400, UTC).strftime("%Y-%m-%d")


class UsageFacts(NamedTuple):
    """Who used what: the role, where the call went, the tokens and any cost the tool reported.
    (Immutable tuples, as ingest builds one per model call and a frozen dataclass showed.)"""

    role: str
    vendor: str | None
    model: str | None
    usage_source: str
    usage: Usage
    reported_cost_usd: float | None = None


class AuditRow(NamedTuple):
    """A row of `audit_events` as its columns in the table's order, all but `ingested_at`
    (given when it is written). Build one with `audit_row`. A plain tuple underneath, so the
    insert's parameters are the row and the time (ingest builds one per event it reads)."""

    source_id: str
    source: str
    ts: float
    day: str
    project: str
    item: str | None
    kind: str
    payload: str
    outcome: str | None  # a review's verdict (approved, rejected) or an outcome's state
    role: str | None
    vendor: str | None
    model: str | None
    usage_source: str | None
    tokens_in: int | None
    tokens_out: int | None
    cache_read: int | None
    cache_write: int | None
    cost_usd: float | None
    cost_reason: str | None
    price_version: str | None
    reported_cost_usd: float | None

    def values(self, ingested_at: float) -> tuple[Any, ...]:
        return (*self, ingested_at)


# The columns from `role` to `reported_cost_usd` of a row that is not usage.
_NOT_USAGE: tuple[None, ...] = (None,) * 12
_NO_PRICE: tuple[None, None, None] = (None, None, None)
# `AuditRow._make` without its length check (every caller here builds all 21 columns).
_new_row = functools.partial(tuple.__new__, AuditRow)


def audit_row(
    source_id: str,
    source: str,
    ts: float,
    project: str,
    item: str | None,
    kind: str,
    payload: str,
    outcome: str | None = None,
    facts: UsageFacts | None = None,
    price: Price | None = None,
) -> AuditRow:
    """The row of one event: where it came from, what it says, and its usage and price."""
    head = (source_id, source, ts, day_of(ts), project, item, kind, payload, outcome)
    return _new_row(head + _usage_columns(facts, price))


def _usage_columns(facts: UsageFacts | None, cost: Price | None) -> tuple[Any, ...]:
    if facts is None:
        return _NOT_USAGE if cost is None else (None,) * 8 + (*cost, None)
    role, vendor, model, usage_source, usage, reported = facts
    counts = usage if counts_fit(usage) else _NO_COUNTS  # kept as a call whose usage is unknown
    return (role, vendor, model, usage_source, *counts, *(cost or _NO_PRICE), reported)


_NO_COUNTS: tuple[None, None, None, None] = (None, None, None, None)


def _unreadable_call(head: tuple[Any, ...], payload: str) -> AuditRow | None:
    """A model call whose counts are no whole numbers (`1000.5`, `"abc"`) as a call of unknown
    usage and price, so `audit cost` counts and names it instead of leaving it out; None when
    the payload says it failed, or its counts are whole and another field is what did not fit
    (such a call is kept, as no usage)."""
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("failure") is not None or data.get("parked"):
        return None
    counts = [data.get(name) for name in ("tokens_in", "tokens_out", "tokens_cached",
                                          "tokens_cache_write")]  # fmt: skip
    if all(n is None or type(n) is int for n in counts):
        return None  # the counts are whole: what does not fit is another field

    def text(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) else None

    role = text("role") or "unknown"
    cost = Price(None, COUNTS_UNFIT, None)
    return _new_row(
        (*head, None, role, text("vendor"), text("model"), "api", *_NO_COUNTS, *cost, None)
    )


INSERT_ROW = (
    "INSERT INTO audit_events (source_id, source, ts, day, project, item, kind, payload, outcome, "
    "role, vendor, model, usage_source, tokens_in, tokens_out, cache_read, cache_write, cost_usd, "
    "cost_reason, price_version, reported_cost_usd, ingested_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)


# A call under way when its run died: the usage source and why it has no price.
LOST = "lost"
LOST_REASON = "its run died while the call was under way: whether it was paid is not known"
# Why the run of an agent that reported neither tokens nor cost has no price.
NOTHING_REPORTED = "the agent reported neither its usage nor its cost"


def usage_of(payload: object) -> UsageFacts | None:
    """The usage an event's payload stands for, or None when it is not usage."""
    if isinstance(payload, ModelLost):
        role = payload.role or "unknown"
        return UsageFacts(role, payload.vendor, payload.model, LOST, Usage(None, None))
    if isinstance(payload, ModelCall):
        if payload.failure is not None or payload.parked:
            return None
        return UsageFacts(
            role=payload.role or "unknown",
            vendor=payload.vendor,
            model=payload.model,
            usage_source="api",
            usage=Usage(
                payload.tokens_in,
                payload.tokens_out,
                payload.tokens_cached,
                payload.tokens_cache_write,
            ),
        )
    if isinstance(payload, AgentFinished):
        if payload.usage_from == USAGE_FROM_CALLS:
            return None  # the executor's own calls: each is a `model.call` row already
        said = payload.tokens_in, payload.tokens_out, payload.cost_usd
        if said == (None, None, None) and (
            payload.usage_from is None or payload.state == "missing_binary"
        ):
            # An agent that was never started costs nothing; an event from before
            # `usage_from` may be the executor's, whose calls are counted already.
            return None
        return UsageFacts(
            role="implementer",
            vendor=None,
            model=None,
            usage_source="cli",
            usage=Usage(payload.tokens_in, payload.tokens_out),
            reported_cost_usd=payload.cost_usd,
        )
    if isinstance(payload, Reviewed) and payload.model is None:
        if payload.tokens_in is None and payload.tokens_out is None and payload.cost_usd is None:
            return None
        return UsageFacts(
            role="reviewer",
            vendor=payload.vendor,
            model=None,
            usage_source="cli",
            usage=Usage(payload.tokens_in, payload.tokens_out),
            reported_cost_usd=payload.cost_usd,
        )
    return None


def priced(facts: UsageFacts | None, ts: float, extra: Extra | None = None) -> Price | None:
    if facts is None:
        return None
    if facts.usage_source == LOST:
        return Price(None, LOST_REASON, None)
    if facts.usage_source == "cli" and facts.model is None:
        if facts.reported_cost_usd is None and facts.usage == Usage(None, None):
            return Price(None, NOTHING_REPORTED, None)
        return Price(None, "the CLI did not name its model; see its reported cost", None)
    return price(facts.vendor, facts.model, facts.usage, ts, extra)


def outcome_of(payload: object) -> str | None:
    """What an event decided, where that is counted: a review's verdict, an outcome's state."""
    if isinstance(payload, Reviewed):
        return "approved" if payload.approved else "rejected"
    if isinstance(payload, Outcome):
        return payload.to
    return None


# The kinds whose payload the audit reads (usage, verdicts, outcomes); any other event is kept
# as the text the work log holds, unparsed.
READ_KINDS = frozenset({"model.call", "model.lost", "agent_finished", "review", "outcome"})


def row_of_event(event: Event, log_id: str) -> AuditRow:
    """The audit row of one work-log event (see `row_of_stored`)."""
    return row_of_stored(
        (
            event.id,
            event.ts,
            event.project,
            event.item,
            event.kind,
            json.dumps(event.payload.as_dict(), sort_keys=True, default=str),
            event.external_id,
        ),
        log_id,
    )


_read_call = ModelCall.__pydantic_validator__.validate_json


def _typed(kind: str, payload: str) -> object:
    """The payload as its model, parsed straight from its JSON; as `read_payload` has it (a
    `RawPayload` with the problem) when its fields do not fit."""
    try:
        return STORED_MODELS[kind].__pydantic_validator__.validate_json(payload)
    except ValidationError:
        data = json.loads(payload)
        return read_payload(kind, data if isinstance(data, dict) else {})


def row_of_stored(stored: tuple[Any, ...], log_id: str) -> AuditRow:
    """The audit row of a work-log row (id, ts, project, item, kind, payload, external_id). An
    event that came from outside (an ingested JSONL line) keeps its own id, so the same line
    reaches the audit once whichever log carried it."""
    event_id, ts, project, item, kind, payload, external_id = stored
    if external_id is not None:
        source_id, source = f"ext:{external_id}", "jsonl"
    else:
        source_id, source = f"work:{log_id}:{event_id}", "work"
    ts = float(ts)
    if kind not in READ_KINDS:
        return _new_row(
            (source_id, source, ts, day_of(ts), project, item, kind, payload, None, *_NOT_USAGE)
        )
    head = (source_id, source, ts, day_of(ts), project, item, kind, payload)
    # Most of what is read: a model call goes straight to its columns (`usage_of` and `priced`
    # spelled out, as their objects showed in the profile of a log of model calls).
    if kind == "model.call":
        try:
            call = _read_call(payload)
        except ValidationError:
            unreadable = _unreadable_call(head, payload)
            if unreadable is not None:
                return unreadable
        else:
            if call.failure is not None or call.parked:
                return _new_row((*head, None, *_NOT_USAGE))
            usage = new_usage(
                (call.tokens_in, call.tokens_out, call.tokens_cached, call.tokens_cache_write)
            )
            vendor, model = call.vendor, call.model
            paid = price(billed_by(vendor, call.endpoint, model), model, usage, ts)
            role = call.role or "unknown"
            counts = _NO_COUNTS if paid.reason == COUNTS_UNFIT else usage  # `price` checked them
            return _new_row((*head, None, role, vendor, model, "api", *counts, *paid, None))
    typed = _typed(kind, payload)
    facts = usage_of(typed)
    cost = None if facts is None else priced(facts, ts)
    return _new_row((*head, outcome_of(typed), *_usage_columns(facts, cost)))
