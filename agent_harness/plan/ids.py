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
from collections.abc import Sequence
from dataclasses import dataclass

from agent_harness.errors import PlanRefused, UsageError
from agent_harness.plan.grammar import ID_RE, ITEM_FORMS, WORD_NOT_ID
from agent_harness.plan.lookalikes import NUMBERED_MARK
from agent_harness.plan.markdown import list_item_spans, parse_plan
from agent_harness.plan.model import Notice, Plan, shell_word, shown_path
from agent_harness.plan.numbered import READ_NOTE as NUMBERED_NOTE

# The reason the parser gives a checkbox with no id at all (not one with a near-miss id, such
# as `t1`, which a person should correct rather than have a second id written before it).
NO_ID = "checkbox has no item id"
# A checkbox as written: any blockquote marks, the bullet or number, the box.
_BULLET = r"(?:[ \t]*>)*(?:[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+)"
_BOX = re.compile(rf"{_BULLET}+\[[ xX/~-]\]")  # one bullet, or several: `* - [ ] x`
_BARE_BULLET = re.compile(r"(?:[ \t]*>)*[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]*(?:\r\n|\r|\n)?\Z")
_BOX_ALONE = re.compile(r"(?:[ \t]*>)*[ \t]*\[[ xX/~-]\]")
_LINE_END = re.compile(r"\r\n|\r|\n")


def _numbered_here(notice: Notice) -> bool:
    """Whether a reported checkbox is one `add_ids` gives an id: it has none, or it starts with
    a word shaped like one (`S3 bucket policy`)."""
    return notice.reason == NO_ID or (
        notice.reason.startswith(NO_ID) and WORD_NOT_ID in notice.reason
    )


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
    unplaced: tuple[Notice, ...] = ()  # reported checkboxes written in a way it cannot edit


def add_ids(text: str, source: str, prefix: str | None = None) -> IdsAdded:
    """Write an id (`PREFIX<n>`) into every checkbox of `text` the parser reads no item from,
    except those nested in one that gets an id. Without a prefix, the one every id of the plan
    starts with (`C` in a plan of C1, C2), else T. Refuses a prefix that would make no id, a
    plan read by its task numbers, and a result that would read otherwise than the plan plus
    the new items (nothing is written then)."""
    before = parse_plan(text, source)
    if prefix is None:
        prefix = usual_prefix(before)
    if len(prefix) > 32:
        raise UsageError(f"--id-prefix of {len(prefix)} characters: at most 32 (ids hold 64)")
    if not ID_RE.match(f"{prefix}1") or prefix[-1:].isdigit():
        raise UsageError(
            f"--id-prefix {prefix!r} makes no item id: give upper-case letters, such as T or TASK-"
        )
    if NUMBERED_NOTE in before.notes:
        raise UsageError(
            f"{source}'s items are numbered tasks (as Kiro writes them), and a named id would "
            "stop them being read so: number the checkboxes without one instead "
            f"(lines {line_numbers([n for n in before.unread if n.reason == NO_ID])})"
        )
    missing = [n for n in before.unread if _numbered_here(n) and n.text]
    left = tuple(n for n in before.unread if n.reason.startswith(NO_ID) and not _numbered_here(n))
    spans = list_item_spans(text)
    lines = _split_lines(text)
    taken = {item.id for item in before.items}
    width = _padded_width(prefix, before)
    numbers = (
        f"{n:0{width}d}"
        for n in itertools.count(_highest(prefix, text) + 1)
        if f"{prefix}{n:0{width}d}" not in taken
    )
    added: list[AddedId] = []
    nested: list[Notice] = []
    unplaced: list[Notice] = []
    inside_until = -1  # the line (0-based) the last checkbox given an id ends before
    for notice in missing:
        line0 = notice.line - 1
        if line0 < inside_until:
            nested.append(notice)
            continue
        place = _box_end(lines, line0)
        if place is None:
            unplaced.append(notice)
            continue
        row, offset = place
        item_id = f"{prefix}{next(numbers)}"
        rest = lines[row][offset:]
        gap = "" if rest[:1] in (" ", "\t") else " "  # the spacing as written stays after the id
        lines[row] = f"{lines[row][:offset]} {item_id}{gap}{rest}"
        added.append(AddedId(notice.line, item_id, notice.text))
        inside_until = spans.get(line0, line0 + 1)
    new_text = "".join(lines)
    after = _reread(new_text, source, before, added)
    return IdsAdded(new_text, tuple(added), tuple(nested), left, after, tuple(unplaced))


_NUMBERED_ID = re.compile(r"([A-Z][A-Z_-]*)[0-9]+")


def usual_prefix(plan: Plan) -> str:
    """What every id of `plan` starts with before its number (`C` for C1 and C3), so the ids
    written beside them look like theirs; T when they differ or there are none."""
    found = {match.group(1) for item in plan.items if (match := _NUMBERED_ID.fullmatch(item.id))}
    every = len(found) == 1 and all(_NUMBERED_ID.fullmatch(item.id) for item in plan.items)
    return found.pop() if every and found else "T"


def _box_end(lines: list[str], line0: int) -> tuple[int, int] | None:
    """Where the checkbox the parser reported at `line0` ends: its line and the offset after
    its `]`. A bullet alone on its line may have its box on the next one."""
    line = lines[line0]
    bom = 1 if line0 == 0 and line.startswith("\ufeff") else 0
    box = _BOX.match(line, bom)
    if box is not None:
        return line0, box.end()
    if _BARE_BULLET.match(line, bom) and line0 + 1 < len(lines):
        box = _BOX_ALONE.match(lines[line0 + 1])
        if box is not None:
            return line0 + 1, box.end()
    return None


def _reread(text: str, source: str, before: Plan, added: list[AddedId]) -> Plan:
    """The plan with its new ids, which must hold every item it held and the new ones."""
    try:
        after = parse_plan(text, source)
    except PlanRefused as exc:
        raise PlanRefused(
            f"writing the ids would make the plan unreadable ({exc}); nothing was written"
        ) from None
    had = [item.id for item in before.items]
    expected = sorted([*had, *(a.id for a in added)])
    if sorted(item.id for item in after.items) != expected:
        lost = sorted(set(had) - {item.id for item in after.items})
        said = f"it would lose {', '.join(lost)}" if lost else "it would read otherwise"
        raise PlanRefused(f"{source}: ids were not written, since {said}; write them by hand")
    return after


def line_numbers(notices: Sequence[Notice]) -> str:
    """The notices' line numbers, the first 20 of them and how many more."""
    shown = ", ".join(str(n.line) for n in notices[:20])
    return shown + (f" and {len(notices) - 20} more" if len(notices) > 20 else "")


def idless(plan: Plan) -> int:
    """How many of the plan's checkboxes `add_ids` would look at (nested ones included); 0 for
    a plan read by its task numbers, which it leaves alone."""
    if NUMBERED_NOTE in plan.notes:
        return 0
    return sum(1 for notice in plan.unread if _numbered_here(notice) and notice.text)


def add_ids_hint(plan: Plan) -> str:
    """The command that turns the plan's checkboxes without an id into items ("" for none)."""
    count = idless(plan)
    if not count:
        return ""
    boxes = "1 checkbox has" if count == 1 else f"{count} checkboxes have"
    return (
        f"{boxes} no id: `agent-harness plan {shell_word(plan.source)} --add-ids` writes ids "
        "into them (add --dry-run to see them first)"
    )


def no_items_message(plan: Plan) -> str:
    """Why a plan gives nothing to run, in one line, with what to do about it."""
    hint = add_ids_hint(plan)
    if hint:
        return f"{shown_path(plan.source)} has no items; {hint}"
    source = shell_word(plan.source)
    if plan.unread:
        lines = "1 line looks" if len(plan.unread) == 1 else f"{len(plan.unread)} lines look"
        return (
            f"{shown_path(plan.source)} has no items: {lines} like items but could not be read "
            f"(`agent-harness plan {source}` says why)"
        )
    numbered = [note for note in plan.notes if NUMBERED_MARK in note]
    if numbered:  # `## Task 1: ...` headings: the note says the form to write
        return f"{shown_path(plan.source)} has no items: {numbered[0].removeprefix('0 items; ')}"
    return f"{shown_path(plan.source)} has no items. {ITEM_FORMS}"


def _split_lines(text: str) -> list[str]:
    """The lines of `text` with their own endings, split only where the parser splits them."""
    lines: list[str] = []
    start = 0
    for end in _LINE_END.finditer(text):
        lines.append(text[start : end.end()])
        start = end.end()
    lines.append(text[start:])
    return lines


def _padded_width(prefix: str, plan: Plan) -> int:
    """How many digits the plan's own ids of `prefix` are padded to (3 for spec-kit's T001 to
    T023, so the next is T024, not T24); 1 when they are not padded, or not alike."""
    suffixes = (item.id[len(prefix) :] for item in plan.items if item.id.startswith(prefix))
    numbers = [suffix for suffix in suffixes if suffix.isascii() and suffix.isdigit()]
    widths = {len(number) for number in numbers}
    padded = any(number.startswith("0") for number in numbers)
    return widths.pop() if len(widths) == 1 and padded else 1


def _highest(prefix: str, text: str) -> int:
    """The highest n of a `PREFIX<n>` the text mentions anywhere, in any case and whatever
    follows it (`T1-setup` is read as item T1; `t9` is one a person is told to write as T9);
    0 for none. A new id must be none of them."""
    pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(prefix)}(\d+)(?![0-9])", re.IGNORECASE)
    # A number too long to be an id someone numbered (`T9999…` 5,000 digits long, past what
    # int() reads) can never equal the small one this gives next: it is left out, not a crash.
    numbers = (found.group(1) for found in pattern.finditer(text))
    return max((int(digits) for digits in numbers if len(digits) <= 18), default=0)
