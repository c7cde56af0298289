"""docs/EVENTS.md from the payload models: every kind, what it means and its fields.

Kept apart from `events` so the schema module holds only the schema; it is handed the tables
and imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel


def render_reference(
    kinds: Sequence[str],
    stored: Mapping[str, type[BaseModel]],
    notes: Mapping[str, type[BaseModel]],
) -> str:
    """The reference page, kinds in `kinds` order, stored events first, then notes."""
    lines = [
        "# Events",
        "",
        "Generated from `agent_harness/store/events.py` by "
        "`python -m agent_harness.store.events > docs/EVENTS.md`; a test fails when they differ.",
        "",
        "Every state change and every step of an attempt is an event in the append-only log",
        "(`agent-harness work show ID` lists an item's). Unknown cost is `null`, never 0. Kinds a",
        "version does not know are kept whole. Notes are told to observers (the live view,",
        "`run --json`) and never stored.",
        "",
    ]
    for title, table in (("Stored events", stored), ("Notes to observers", notes)):
        lines += [f"## {title}", ""]
        for kind in [k for k in kinds if k in table]:
            model = table[kind]
            doc = " ".join((model.__doc__ or "").split())
            lines += [f"### `{kind}`", ""]
            if model.__doc__ is not None and "__doc__" in model.__dict__:
                lines += [doc, ""]
            lines += ["| field | type | meaning |", "|---|---|---|"]
            for name, info in model.model_fields.items():
                shown = info.serialization_alias or info.alias or name
                kind_text = _type_text(info.annotation)
                lines.append(f"| `{shown}` | {kind_text} | {info.description or ''} |")
            lines.append("")
    return "\n".join(lines)


def _type_text(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "").replace("NoneType", "null").replace(" | None", " or null")
