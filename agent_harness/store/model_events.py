"""The events of calls to model endpoints (the reviewer's, the planner's, the direct-API
executor's): a call's end, a retry after a wait, an endpoint parked until its window resets."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from agent_harness.store.payload import Payload


class ModelKind(StrEnum):
    """The kinds of the events of model calls."""

    MODEL_CALL = "model.call"
    MODEL_RETRY = "model.retry"
    MODEL_PARKED = "model.parked"
    MODEL_LOST = "model.lost"
    ASKED_AGAIN = "model.asked_again"


# --- model calls -----------------------------------------------------------------------------


class ModelEvent(Payload):
    """A call to a model endpoint; never carries the key."""

    KIND: ClassVar[ModelKind]
    role: str | None = Field(default=None, description="reviewer, planner, implementer, ...")
    worker: str | None = Field(default=None, description="Worker that made the call.")
    vendor: str | None = Field(default=None, description="Vendor of the route.")
    model: str | None = Field(default=None, description="Model of the route.")
    endpoint: str | None = Field(default=None, description="Endpoint called.")
    attempt: int | None = Field(default=None, description="Try number within this call.")
    latency_s: float | None = Field(default=None, description="Seconds the try took.")
    failure: str | None = Field(default=None, description="Failure class; null on success.")
    failure_message: str | None = Field(default=None, description="The provider's words.")


class ModelCall(ModelEvent):
    """A call to a model endpoint ended (answered, failed, or refused because parked)."""

    KIND = ModelKind.MODEL_CALL
    tokens_in: int | None = Field(default=None, description="Input tokens, when reported.")
    tokens_out: int | None = Field(default=None, description="Output tokens, when reported.")
    tokens_cached: int | None = Field(default=None, description="Cached input tokens.")
    tokens_cache_write: int | None = Field(default=None, description="Cache-written input tokens.")
    stop_reason: str | None = Field(default=None, description="Why the model stopped.")
    parked: bool = Field(default=False, description="Refused locally: the endpoint is parked.")
    parked_until: float | None = Field(default=None, description="Epoch seconds it reopens.")


class ModelRetry(ModelEvent):
    """A model call failed in a way worth another try, after a wait."""

    KIND = ModelKind.MODEL_RETRY
    wait_s: float | None = Field(default=None, description="Seconds waited before the next try.")


class ModelParked(ModelEvent):
    """A model endpoint's window is spent: it is parked until it resets."""

    KIND = ModelKind.MODEL_PARKED
    parked_until: float | None = Field(default=None, description="Epoch seconds it reopens.")


class ModelLost(ModelEvent):
    """A paid call (a review) that was under way when its run died (killed while it waited):
    whether it was answered, and what it cost, is not known. Counted as a call of unknown
    price, never as nothing."""

    KIND = ModelKind.MODEL_LOST
    sha: str | None = Field(default=None, description="The commit it was about.")
    run_id: str | None = Field(default=None, description="The run that made it.")


class ReviewAskedAgain(Payload):
    """The reviewer's answer held no usable verdict, so it is asked once more: a second paid
    call, under way until its `model.call` is recorded (a run that dies before counts it as
    `model.lost`)."""

    KIND = ModelKind.ASKED_AGAIN
    problem: str = Field(description="What was wrong with the first answer.")
