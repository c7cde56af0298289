"""One row of the append-only event log, as every reader sees it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Event(BaseModel):
    """One row of the append-only log."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="Row id; increases in commit order, page by it.")
    ts: float = Field(description="Epoch seconds when the event happened.")
    project: str = Field(description="Project the event belongs to.")
    item: str | None = Field(default=None, description="Work item id, if any.")
    kind: str = Field(description="What happened, e.g. claimed or failed.")
    payload: dict[str, Any] = Field(default_factory=dict, description="Details of the event.")
    external_id: str | None = Field(default=None, description="Id given by an outside source.")
