"""The hidden notes that tie the tracker's records to plan items: an issue's marker (which item
of which plan, and its content hash) and a pull request's. They are how every sync and
reconcile finds its records again, with no local state."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent_harness.errors import UNREADABLE_JSON, read_json

MARKER_RE = re.compile(r"<!--\s*agent-harness\s+(.*?)\s*-->", re.DOTALL)
# What opens one (or something a person would read as one): defused in text of ours, and a
# sign of a damaged marker where no whole one follows.
_MARKER_START = re.compile(r"<!--\s*agent-harness", re.IGNORECASE)


@dataclass(frozen=True)
class Marker:
    """The hidden note tying an issue to one plan item."""

    item_id: str
    plan_key: str
    hash: str
    labels: tuple[str, ...] = ()
    # The plan file's path in its repository, when it is in one (see `plan_in_repo`): two plan
    # files under one key would rewrite each other's issues, and this tells them apart.
    source: str | None = None

    def render(self) -> str:
        data: dict[str, Any] = {
            "id": self.item_id,
            "plan": self.plan_key,
            "hash": self.hash,
            "labels": list(self.labels),
        }
        if self.source is not None:
            data["source"] = self.source
        # `<` and `>` escaped, as JSON allows: a `-->` in a path must not end the comment.
        text = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
        return f"<!-- agent-harness {text} -->"


class DamagedMarker(ValueError):
    """An issue carries something like our marker that cannot be read."""


def defuse_markers(text: str) -> str:
    """Text (an item's body, a check) made unable to pass for a marker: a zero-width space
    after `<!--` keeps what a person sees and stops the comment from reading as ours."""
    return _MARKER_START.sub(lambda m: m.group(0)[:4] + "\u200b" + m.group(0)[4:], text)


def read_marker(body: str) -> Marker | None:
    """The marker the harness appended to an issue body (the last one: an item's own text, and
    anything a person added above it, come first); None when there is none; DamagedMarker when
    it cannot be read."""
    matches = list(MARKER_RE.finditer(body))
    match = matches[-1] if matches else None
    if match is None:
        if _MARKER_START.search(body):
            raise DamagedMarker("an agent-harness comment is opened but never closed")
        return None
    try:
        data = read_json(match.group(1))
    except UNREADABLE_JSON:
        raise DamagedMarker("the agent-harness marker is not valid JSON") from None
    if not isinstance(data, dict):
        raise DamagedMarker("the agent-harness marker is not an object")
    missing = [key for key in ("id", "plan", "hash") if not isinstance(data.get(key), str)]
    if missing:
        raise DamagedMarker(f"the agent-harness marker lacks {', '.join(missing)}")
    labels = data.get("labels") or []
    source = data.get("source")
    return Marker(
        data["id"],
        data["plan"],
        data["hash"],
        tuple(str(x) for x in labels),
        source if isinstance(source, str) and source else None,
    )


PR_MARKER_RE = re.compile(r"<!--\s*agent-harness-pr\s+(\{.*?\})\s*-->", re.DOTALL)


@dataclass(frozen=True)
class PullMarker:
    """The hidden note tying a pull request to its item, so reconcile needs no local state."""

    item_id: str
    plan_key: str
    issue: int | None

    def render(self) -> str:
        data = {"id": self.item_id, "plan": self.plan_key, "issue": self.issue}
        return f"<!-- agent-harness-pr {json.dumps(data)} -->"


def read_pull_marker(body: str) -> PullMarker | None:
    """The item a pull request belongs to (by the last marker: the one the harness appended),
    or None (also for a marker damaged by hand)."""
    matches = list(PR_MARKER_RE.finditer(body or ""))
    match = matches[-1] if matches else None
    if match is None:
        return None
    try:
        data = read_json(match.group(1))
    except UNREADABLE_JSON:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return None
    issue = data.get("issue")
    return PullMarker(
        data["id"], str(data.get("plan") or ""), issue if isinstance(issue, int) else None
    )
