"""Heading items that are sections of items, not items themselves.

`## M1 — Foundations` right over `### T1: ...` headings, or `## P0: Must have` right over
`- [ ] T1 ...` checkboxes, reads as an item by its shape (an id, a separator, a title), yet no
one means an issue titled "Must have" for an agent to do. Such a heading, with nothing of its
own before the items it holds, is their section: reported, never made an item, and a
dependency on it is one on each of them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Protocol

from agent_harness.plan.grammar import id_prefix


class Drafted(Protocol):
    """What a section is judged by: a drafted item's id, form and lines."""

    @property
    def id(self) -> str: ...

    @property
    def form(self) -> str: ...

    @property
    def line0(self) -> int: ...

    @property
    def body_from(self) -> int: ...

    @property
    def scope_end(self) -> int: ...

    @property
    def level(self) -> int: ...


def find_sections(
    drafts: Sequence[Drafted], order: Sequence[int], lines: Sequence[str]
) -> tuple[dict[str, list[str]], list[tuple[int, str]]]:
    """(each section heading's id -> the items it holds, the notices saying so), for `drafts`
    in file order (`order` lists their indexes by first line)."""
    starts = [drafts[i].line0 for i in order]
    held_by: dict[str, list[str]] = {}
    notices: list[tuple[int, str]] = []
    for position, index in enumerate(order):
        draft = drafts[index]
        if draft.form != "heading":
            continue
        inside = bisect_left(starts, draft.scope_end, lo=position + 1)
        under = [drafts[i] for i in order[position + 1 : inside]]
        if not under:
            continue
        title = position == 0 and inside == len(order) and _document_title(draft, under)
        if not title and not _is_section(draft, under[0], lines):
            continue
        held = [d.id for d in under]
        held_by[draft.id] = held
        more = f" and {len(held) - 3} more" if len(held) > 3 else ""
        what = "is the document's title over every item" if title else "holds items of its own"
        notices.append(
            (
                draft.line0,
                f"heading {draft.id} {what} ({', '.join(held[:3])}{more}); read as their "
                "section, not as an item (a dependency on it is one on each of them)",
            )
        )
    leaves = {gid: [i for i in held if i not in held_by] for gid, held in held_by.items()}
    return leaves, notices


def _document_title(draft: Drafted, under: Sequence[Drafted]) -> bool:
    """A plan's `# PROJ-1234: Migrate billing` over all its items, which are named otherwise
    (`T1`, `T2`), is the document's title (a ticket's, an ADR's), even with text of its own:
    as an item, an agent would be set the whole plan beside the items that make it up."""
    prefix = id_prefix(draft.id)
    return draft.level == 1 and all(id_prefix(item.id) != prefix for item in under)


def _is_section(draft: Drafted, first: Drafted, lines: Sequence[str]) -> bool:
    """A heading over items is their section when it says nothing of its own before them:
    with text or a `key:` line of its own (`### T1: …`, `depends on: T0`, then `- [ ] T2 …`
    or `#### T2: …`) it is an item beside them, as it always was, its dependencies kept."""
    return not any(lines[n].strip() for n in range(draft.body_from, first.line0))
