"""The base of every event payload, and the payload of a kind this version does not know.

Each part's kinds and payload models live beside the schema (`events` for the pipeline's,
`inception_events` for inception's, `executor_events` for the executor's); they all derive
from `Payload` here, so the schema module can gather them without an import circle.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

# No one agent run or model call costs more: a larger figure is a fault in what was reported
# (`1e308` once stopped a project for good, every later call refused as over its budget).
MOST_ONE_CALL_COSTS_USD = 100_000.0


def plausible_usd(value: object) -> float | None:
    """A cost as a tool reported it, in dollars; None (unknown, never 0) when it is none: not a
    number (`true`, `"12.5"`), not finite, below zero (it gave budget back) or more than
    MOST_ONE_CALL_COSTS_USD."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    usd = float(value)
    if not math.isfinite(usd) or usd < 0 or usd > MOST_ONE_CALL_COSTS_USD:
        return None
    return usd


# A payload's reported cost: what no call can cost is read as unknown.
ReportedUsd = Annotated[float | None, BeforeValidator(plausible_usd)]


class Payload(BaseModel):
    """What an event says. Subclasses name their kind; fields unknown to this version are kept."""

    model_config = ConfigDict(
        frozen=True, extra="allow", populate_by_name=True, serialize_by_alias=True
    )
    KIND: ClassVar[StrEnum]
    STORED: ClassVar[bool] = True  # False for notes that only observers hear

    @property
    def kind(self) -> str:
        return self.KIND.value

    def as_dict(self) -> dict[str, Any]:
        """The payload as stored: field names as written (`from`, not `from_`), JSON types."""
        return self.model_dump(mode="json", by_alias=True)


class RawPayload(BaseModel):
    """A payload of a kind this version does not know, kept exactly as it was read."""

    model_config = ConfigDict(frozen=True)
    raw_kind: str
    data: dict[str, Any] = Field(default_factory=dict)
    problem: str | None = None  # why a known kind could not be read as its model

    @property
    def kind(self) -> str:
        return self.raw_kind

    def as_dict(self) -> dict[str, Any]:
        return dict(self.data)
