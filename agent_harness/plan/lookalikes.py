"""Lines that look like items and are not: why each is not, so no typo drops work silently.

Each reader takes a heading's (or a checkbox's first line's) text and answers the reason it
is no item, or None when it does not look like one in that way.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Container, Sequence
from typing import TYPE_CHECKING

from agent_harness.plan.grammar import (
    ALMOST_ID,
    DOTTED_ID,
    ID,
    ID_RE,
    LOOSE_ID,
    dotted_id_reason,
    heading_item_id,
    id_prefix,
)

if TYPE_CHECKING:
    from markdown_it.token import Token

    from agent_harness.plan.drafts import Draft

QUOTED = "inside a quote (`>`), so not an item"


def past_block(tokens: list[Token], index: int) -> int:
    """The index after the block that opens at `index` (a table in a quote: not items)."""
    level, closing = tokens[index].level, tokens[index].type.replace("_open", "_close")
    for at in range(index + 1, len(tokens)):
        if tokens[at].type == closing and tokens[at].level == level:
            return at + 1
    return len(tokens)


def dotted(text: str) -> str | None:
    """An id with a dot in it (`T1.1:`): read as it stands it would be item T1, its title
    starting "1:"."""
    match = DOTTED_ID.match(text)
    return None if match is None else dotted_id_reason(match.group(1))


def not_quite_an_id(text: str) -> str | None:
    """An id with lower-case letters (`Ab1:`, `Auth-1:`): ids are upper case."""
    almost = ALMOST_ID.match(text)
    if almost is None or ID_RE.match(almost.group(1)) or not almost.group(1)[-1].isdigit():
        return None
    word = almost.group(1)
    return (
        f"'{word}' is not an item id (ids are upper case, like {word.upper()}); not read as an item"
    )


def hidden_in_an_id(text: str) -> str | None:
    """A heading that would be an item but for invisible characters (a zero-width space, a
    right-to-left override): never taken out silently, as the heading a person sees is then
    not the one the file holds."""
    hidden = sorted({char for char in text if unicodedata.category(char) == "Cf"})
    if not hidden or heading_item_id("".join(c for c in text if c not in hidden)) is None:
        return None
    names = ", ".join(f"U+{ord(char):04X}" for char in hidden)
    return f"heading holds invisible characters ({names}); not read as an item"


def struck(text: str) -> str | None:
    """A heading item struck through (`### ~~T11: Dropped~~`)."""
    if not text.startswith("~~") or heading_item_id(text.removeprefix("~~")) is None:
        return None
    return "heading is struck through (~~); not read as an item"


def loose(text: str) -> str | None:
    """A heading that starts with an id but has no separator after it (`## Q3 goals`)."""
    match = LOOSE_ID.match(text)
    if match is None or not match.group(1)[-1].isdigit():
        return None
    if not any(char.isalpha() for char in match.group(1)):
        return None
    return (
        f"heading starts with '{match.group(1)}' but has no ':', '.' or '—' after it; "
        "not read as an item"
    )


# What may stand before an id that a person would still call an item's: a status word (`TODO`,
# `DONE`, `Task`), a checkbox, a mark (`🚧`, `❌`) or a number (`1.`).
_BEFORE_ID = re.compile(r"^(\[[^\]]{0,3}\]|[^\w\s\[(]{1,4}|\d{1,3}[.)]|[A-Za-z]{2,10})\s+(.*)$")
_PAREN_ID = re.compile(rf"^\(({ID})\)\s*\S")


def prefixed(text: str) -> str | None:
    """A heading whose id comes after something else (`### TODO T1: …`, `### [ ] T3: …`,
    `### 🚧 T7: …`, `### 1. T14: …`, `### (T11) …`)."""
    paren = _PAREN_ID.match(text)
    if paren is not None and paren.group(1)[-1].isdigit():
        item_id, before = paren.group(1), "parentheses around it"
    else:
        match = _BEFORE_ID.match(text)
        item_id = heading_item_id(match.group(2)) if match else None
        if match is None or item_id is None:
            return None
        before = f"'{match.group(1)}' before it"
    return (
        f"heading has its id {item_id} with {before}; an item heading starts with its id "
        f"(`### {item_id}: …`); not read as an item"
    )


# A heading that numbers a task among a plan's items: `## Task 1: Create the schema` (not `##
# Phase 1: Setup`, spec-kit's section over its items, nor `## Step 1: install`, a README's).
_TASK_NUMBERED = re.compile(r"^(?i:task)\s+(\d{1,4})\s*[.:)\u2014\u2013-]\s*(\S.*?)$")


def task_heading(text: str, taken: Container[str] = ()) -> str | None:
    """Why `Task 1: Create the schema` as a heading is no item, and what would be one: `T1`,
    or `TASK-1` where an item of the plan (`taken`) is T1 already."""
    match = _TASK_NUMBERED.match(text)
    if match is None:
        return None
    number = match.group(1)
    item_id = f"T{number}" if f"T{number}" not in taken else f"TASK-{number}"
    return (
        f"heading numbers its task {NUMBERED_MARK} it with an id; write "
        f"`### {item_id}: {match.group(2)}` to make it an item"
    )


def heading_lookalike(text: str) -> str | None:
    """Why a heading that is no item looks like one, if it does."""
    for reader in (not_quite_an_id, hidden_in_an_id, struck, loose, prefixed):
        reason = reader(text)
        if reason is not None:
            return reason
    return None


# A heading numbered rather than named: `## Task 1: Set up`, `### Step 2 - CI`, `## 3. Docs`.
_NUMBERED_HEADING = re.compile(
    r"^ {0,3}#{1,6}\s+(?:([A-Za-z]{2,12})\s+)?(\d{1,4})\s*[.:)\u2014\u2013-]\s*(\S.*?)\s*#*\s*$"
)


# Words every note of `numbered_headings` holds, by which a plan's notes are told apart.
NUMBERED_MARK = "instead of naming"


def numbered_headings(lines: list[str]) -> str | None:
    """For a plan with no item at all: its headings that number tasks instead of naming them
    with ids (`## Task 1: Set up`, as plans written by a model often do), said with the form
    that would be read; None when it has none (then it is prose)."""
    found = [(n, m) for n, line in enumerate(lines, 1) if (m := _NUMBERED_HEADING.match(line))]
    if not found:
        return None
    line, first = found[0]
    heads = (
        f"1 heading numbers its task {NUMBERED_MARK} it with an id"
        if len(found) == 1
        else f"{len(found)} headings number their tasks {NUMBERED_MARK} them with ids"
    )
    return (
        f"0 items; {heads} (line {line}: "
        f"`{lines[line - 1].strip()}`): write `### T{first.group(2)}: {first.group(3)}`"
    )


def no_items(lookalikes: int, lines: list[str]) -> str:
    """What a file with no items at all is said to hold: lines that look like items (each
    reported with why), headings that number tasks, or prose."""
    if lookalikes:
        said = (
            "1 line looks like an item"
            if lookalikes == 1
            else f"{lookalikes} lines look like items"
        )
        return f"0 items; {said} but could not be read (each is listed with why)"
    return numbered_headings(lines) or "0 items; this looks like prose"


# A checkbox marked with a state the plan does not read: `[>]` forwarded, `[!]` important,
# `[?]` a question, `[<]`, `[*]`, `[+]` (Obsidian's and its themes' custom states), `[ x ]` and
# `[✓]` (a done mark spelled otherwise), `[]` (an empty box).
_ODD_BOX = re.compile(r"^\[( ?[xX✓✔✗☑] ?|[>!?<*+]|)\](?![(\[])\s*(\S.*)$")
# A list line that starts with an id and a separator, or an id in brackets, but no checkbox.
_ID_BULLET = re.compile(rf"^(?:\[?({ID})\]?\s*(?::|—|–|-{{1,2}}|\.|\))\s+\S|\[({ID})\]\s+\S)")


def list_line_lookalike(text: str, *, in_item: bool) -> str | None:
    """Why a list line that is no item looks like one, if it does: a checkbox in a state the
    plan does not read, or (outside any item's body) an id with no checkbox before it."""
    odd = _ODD_BOX.match(text)
    if odd is not None:
        return (
            f"checkbox marked [{odd.group(1)}]: the plan reads [ ] and [x] (done), and [-], "
            "[/], [~] (under way); not read as an item"
        )
    match = None if in_item else _ID_BULLET.match(text)
    item_id = (match.group(1) or match.group(2)) if match else None
    if item_id is None or not item_id[-1].isdigit():
        return None
    return f"a list line with the id {item_id} but no checkbox (`- [ ] {item_id} …` is an item)"


def table_without_ids(header: list[str], row: list[str]) -> str | None:
    """A table no column of which is named as the id's (`| Key | Summary |`, `| # | Task |`)
    while a row's first cell is an id: its rows are not read, which is said, not done quietly."""
    first = row[0].strip("*` ") if row else ""
    if not ID_RE.match(first) or not first[-1].isdigit():
        return None
    named = ", ".join(name for name in header if name) or "none named"
    return (
        f"table has no id column (its columns: {named}); name the one holding {first} `ID` to "
        "read its rows as items"
    )


def words_not_ids(
    drafts: list[tuple[str, bool]], named: Container[str] = (), idless: int = 0
) -> set[int]:
    """Of a plan's item drafts, each `(id, word_like)` (a checkbox's id with only a space and a
    lower-case word after it), those whose id reads as a word of the task: `S3 bucket policy`,
    `EC2 instance sizing`. Only where the plan shows it: the same word starts two tasks (and
    is nowhere an id for sure); and then, in a plan with no run of ids of its own (no `T1`
    beside `T2`) and no id written for sure (`T1:`, `[T1]`, a heading), every such lone word
    (`EC2`, `HTTP2` beside `S3` twice); so too the one such draft of a plain checklist, among
    two or more checkboxes with no id (`idless`: the top-level ones, not an item's steps),
    unless it is shaped like an id of ours (`T3`, `TASK-4`). An id another item names as a
    dependency (`named`) is an id; so is `DOC1 write the readme` beside `T1`, `T2`, and `T1
    fix it` alone. Returns their positions."""
    prefixes: dict[str, set[str]] = {}
    sure: set[str] = set()  # ids written at least once as nothing but an id
    uses: dict[str, int] = {}
    for item_id, word_like in drafts:
        prefixes.setdefault(id_prefix(item_id), set()).add(item_id)
        uses[item_id] = uses.get(item_id, 0) + 1
        if not word_like:
            sure.add(item_id)
    words = {item_id for item_id, count in uses.items() if count > 1 and item_id not in sure}
    followed = any(len(ids) > 1 for ids in prefixes.values())

    plain = len(drafts) == 1 and idless >= 2 and not followed and not sure

    def a_word(item_id: str) -> bool:
        if item_id in named or prefixes[id_prefix(item_id)] != {item_id}:
            return False
        # T<n>, and an id with a dash or an underscore (TASK-4), are ids' own shapes.
        shaped = id_prefix(item_id) == "T" or "-" in item_id or "_" in item_id
        lone = bool(words) or (plain and not shaped)
        return item_id in words or (lone and not followed and not sure)

    return {
        index for index, (item_id, word_like) in enumerate(drafts) if word_like and a_word(item_id)
    }


def task_headings(
    headings: list[tuple[int, str]], drafts: Sequence[Draft], lines: list[str]
) -> list[tuple[int, str]]:
    """Of a plan's `## Task 1: …` headings (line, text), those to report among its items, with
    why: not those with items under them, which name a group of them (`## Task 1: Auth` over
    `- [ ] T1 …`)."""
    if not drafts:
        return []
    taken = {draft.id for draft in drafts}
    starts = sorted(draft.line0 for draft in drafts)
    found = []
    for line0, text in headings:
        after = bisect_right(starts, line0)  # the next item, if a heading, is none of them
        between = lines[line0 + 1 : starts[after] + 1] if after < len(starts) else ["#"]
        if any(line.lstrip().startswith("#") for line in between):
            found.append((line0, task_heading(text, taken) or ""))
    return found
