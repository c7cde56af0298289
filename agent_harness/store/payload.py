"""The base of every event payload, and the payload of a kind this version does not know.

Each part's kinds and payload models live beside the schema (`events` for the pipeline's,
`inception_events` for inception's, `executor_events` for the executor's); they all derive
from `Payload` here, so the schema module can gather them without an import circle.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


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
