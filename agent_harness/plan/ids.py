"""Ids written into a plan's checkboxes that have none, so its tasks become items.

Plans other tools and people write are often plain checklists (`- [ ] Add a cache`). An item
needs an id that stays when its text is edited (it is how its issue is found again), so the
parser reads no item from such a line and says so. `add_ids` writes one into each such line
(`- [ ] T7 Add a cache`), numbered after every id of that form the file already mentions, and
leaves everything else as it was, byte for byte. A checkbox nested in another that gets an id
is left alone: it becomes a step of that item, in its body, as the parser reads it.
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass

from agent_harness.errors import UsageError
from agent_harness.plan.grammar import ID_ANYWHERE, ID_RE, ITEM_FORMS
from agent_harness.plan.markdown import list_item_spans, parse_plan
from agent_harness.plan.model import Notice, Plan

# The reason the parser gives a checkbox with no id at all (not one with a near-miss id, such
# as `t1`, which a person should correct rather than have a second id written before it).
NO_ID = "checkbox has no item id"
# A checkbox as written: any blockquote marks, the bullet or number, the box.
_BOX = re.compile(r"^(?:[ \t]*>)*[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX]\]")
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class AddedId:
    """One id written into a checkbox."""

    line: int  # 1-based, in the file
    id: str
    text: str  # the checkbox's text, as the parser quoted it


@dataclass(frozen=True)
class IdsAdded:
    """The plan's new text, what was written into it, and what was left for a person."""

    text: str
    added: tuple[AddedId, ...]
    nested: tuple[Notice, ...]  # checkboxes left as steps of the item they sit in
    left: tuple[Notice, ...]  # checkboxes whose id a person must write (e.g. `t1`)
    plan: Plan  # the new text, parsed


def add_ids(text: str, source: str, prefix: str = "T") -> IdsAdded:
    """Write an id (`PREFIX<n>`) into every checkbox of `text` the parser reads no item from,
    except those nested in one that gets an id. Refuses a prefix that would make no id."""
    if not ID_RE.match(f"{prefix}1") or prefix[-1:].isdigit():
        raise UsageError(
            f"--id-prefix {prefix!r} makes no item id: give upper-case letters, such as T or TASK-"
        )
    before = parse_plan(text, source)
    missing = [n for n in before.unread if n.reason == NO_ID and n.text]
    left = tuple(n for n in before.unread if n.reason.startswith(NO_ID) and n.reason != NO_ID)
    spans = list_item_spans(text)
    lines = _split_lines(text)
    numbers = itertools.count(_highest(prefix, text) + 1)
    added: list[AddedId] = []
    nested: list[Notice] = []
    inside_until = -1  # the line (0-based) the last checkbox given an id ends before
    for notice in missing:
        line0 = notice.line - 1
        if line0 < inside_until:
            nested.append(notice)
            continue
        box = _BOX.match(lines[line0].lstrip("\ufeff") if line0 == 0 else lines[line0])
        if box is None:  # not where the parser said (it never is): leave it be
            continue
        item_id = f"{prefix}{next(numbers)}"
        offset = box.end() + (1 if line0 == 0 and lines[0].startswith("\ufeff") else 0)
        rest = lines[line0][offset:].lstrip(" \t")
        lines[line0] = f"{lines[line0][:offset]} {item_id} {rest}"
        added.append(AddedId(notice.line, item_id, notice.text))
        inside_until = spans.get(line0, line0 + 1)
    new_text = "".join(lines)
    return IdsAdded(new_text, tuple(added), tuple(nested), left, parse_plan(new_text, source))


def idless(plan: Plan) -> int:
    """How many of the plan's checkboxes `add_ids` would give an id (nested ones included)."""
    return sum(1 for notice in plan.unread if notice.reason == NO_ID and notice.text)


def add_ids_hint(plan: Plan) -> str:
    """The command that turns the plan's checkboxes without an id into items ("" for none)."""
    count = idless(plan)
    if not count:
        return ""
    boxes = "1 checkbox has" if count == 1 else f"{count} checkboxes have"
    return (
        f"{boxes} no id: `agent-harness plan {shlex.quote(plan.source)} --add-ids` writes ids "
        "into them (add --dry-run to see them first)"
    )


def no_items_message(plan: Plan) -> str:
    """Why a plan gives nothing to run, in one line, with what to do about it."""
    hint = add_ids_hint(plan)
    if hint:
        return f"{plan.source} has no items; {hint}"
    source = shlex.quote(plan.source)
    if plan.unread:
        lines = "1 line looks" if len(plan.unread) == 1 else f"{len(plan.unread)} lines look"
        return (
            f"{plan.source} has no items: {lines} like items but could not be read "
            f"(`agent-harness plan {source}` says why)"
        )
    return f"{plan.source} has no items. {ITEM_FORMS}"


def _split_lines(text: str) -> list[str]:
    """The lines of `text` with their own endings, split only where the parser splits them."""
    lines: list[str] = []
    start = 0
    for end in _LINE_END.finditer(text):
        lines.append(text[start : end.end()])
        start = end.end()
    lines.append(text[start:])
    return lines


def _highest(prefix: str, text: str) -> int:
    """The highest n of a `PREFIX<n>` the text mentions anywhere (0 for none): a new id must
    not be one a dependency or a note already names."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    highest = 0
    for found in ID_ANYWHERE.finditer(text):
        number = pattern.match(found.group(1))
        if number is not None:
            highest = max(highest, int(number.group(1)))
    return highest
