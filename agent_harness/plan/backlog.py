"""backlog.json: the versioned JSON form of a parsed plan, and the one door every plan enters by.

A backlog holds the items, the report of unread lines and where the plan came from, so the
round trip plan -> backlog -> items loses nothing. `load_plan` accepts either form, which is
why every command that takes a plan also takes a backlog.json (or Taskmaster's tasks.json).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from agent_harness.errors import InputError, read_json
from agent_harness.plan.dependencies import lines_by_id, refuse_unmet
from agent_harness.plan.markdown import parse_plan
from agent_harness.plan.model import Notice, Plan, WorkItem, shown_path
from agent_harness.plan.source import read_plan_text
from agent_harness.plan.taskmaster import from_taskmaster, is_taskmaster

BACKLOG_FORMAT = "agent-harness/backlog"
BACKLOG_VERSION = 1


class BacklogItem(WorkItem):
    """A work item as stored in backlog.json: the item plus its content hash, for readers."""

    hash: str = Field(description="content_hash of the item when the backlog was written.")


class Backlog(BaseModel):
    """The document written to backlog.json (format version 1)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["agent-harness/backlog"] = "agent-harness/backlog"
    version: int = Field(default=BACKLOG_VERSION, description="Bumped on any incompatible change.")
    source: str = Field(description="The plan file the backlog was made from.")
    items: list[BacklogItem]
    unread: list[Notice] = Field(default_factory=list)
    notes: list[str] = Field(
        default_factory=list, description="Remarks on the whole plan; left out when there are none."
    )

    @model_serializer(mode="wrap")
    def _without_empty_notes(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Most plans have no notes: leaving the key out keeps their backlog.json as it was.
        data: dict[str, Any] = handler(self)
        if not data.get("notes"):
            data.pop("notes", None)
        return data


def to_backlog(plan: Plan) -> Backlog:
    items = [BacklogItem(**item.model_dump(), hash=item.content_hash) for item in plan.items]
    return Backlog(
        source=shown_path(plan.source),
        items=items,
        unread=list(plan.unread),
        notes=list(plan.notes),
    )


def dumps(plan: Plan) -> str:
    """The backlog.json text for a plan: stable key order, one trailing newline."""
    data = to_backlog(plan).model_dump(mode="json")
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def from_backlog(doc: Backlog, source: str = "backlog.json") -> Plan:
    """The plan a backlog holds, refused if its dependencies could never all be met (edited by
    hand, or written by another tool): an item would wait for ever on one that is not there."""
    items = tuple(WorkItem(**item.model_dump(exclude={"hash"})) for item in doc.items)
    lines_by_id(items, source, "item")  # an id used twice is refused
    refuse_unmet(
        list(items),
        source,
        "the backlog",
        error=InputError,
        hint="; fix the backlog or write it again with `plan --backlog`",
    )
    return Plan(source=doc.source, items=items, unread=tuple(doc.unread), notes=tuple(doc.notes))


def loads(text: str, source: str = "backlog.json") -> Plan:
    try:
        raw: Any = read_json(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except ValueError as exc:  # a number too long to read
        raise InputError(f"{source} is not valid JSON ({exc})") from None
    except RecursionError:
        # The decoder recurses per bracket: a hostile file of 100,000 `[` gets here.
        raise InputError(f"{source} is not a backlog: its JSON is nested too deeply") from None
    if not isinstance(raw, dict) or raw.get("format") != BACKLOG_FORMAT:
        if is_taskmaster(raw):
            return from_taskmaster(raw, text, source)
        raise InputError(
            f'{source} is not an agent-harness backlog (no "format": "{BACKLOG_FORMAT}") '
            "nor a Taskmaster tasks.json (no tasks list)"
        )
    version = raw.get("version")
    if not isinstance(version, int) or version > BACKLOG_VERSION:
        raise InputError(
            f"{source} is backlog version {version}; this agent-harness reads up to "
            f"{BACKLOG_VERSION} (upgrade agent-harness)"
        )
    try:
        doc = Backlog.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"{source}: {where}: {first['msg']}") from None
    return from_backlog(doc, source)


def load_plan(path: Path | str) -> Plan:
    """Load a markdown plan or a backlog.json, whichever `path` holds."""
    path = Path(path)
    text = read_plan_text(path)
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        return loads(text, source=str(path))
    return parse_plan(text, source=str(path))


def write_backlog(plan: Plan, target: Path) -> None:
    """Write backlog.json atomically: a crash leaves the old file or the new one, never half,
    and a write that fails leaves nothing of its own behind."""
    if target.name in ("", ".", "..") or target.is_dir():
        raise InputError(f"cannot write {shown_path(str(target))}: it is a directory; name a file")
    text = dumps(plan)  # before any file is made: what cannot be said makes nothing
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(
                f"cannot write {shown_path(str(target))}: {exc.strerror or exc}"
            ) from None
        raise
