"""What the markdown plan parser collects on its walk: item drafts, open sections, metadata
lines. `plan.markdown` settles them into the plan's items."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_harness.plan.grammar import KEYS, META, PROSE_DEPENDS, norm_key, read_title
from agent_harness.plan.model import ItemForm, _raw_value
from agent_harness.plan.titles import plain_text

if TYPE_CHECKING:
    from markdown_it.token import Token


@dataclass
class Draft:
    """An item as the walk over the plan's tokens first finds it, before its body and fields
    are settled."""

    id: str
    title: str
    line0: int  # 0-based line of the item itself
    body_from: int  # first body line (0-based)
    scope_end: int  # one past the last line the item can own
    form: ItemForm
    done: bool = False
    level: int = 0
    fields: dict[str, tuple[int, str]] = field(default_factory=dict)
    body: str | None = None
    title_labels: tuple[str, ...] = ()  # from markers such as [P] at the start of the title
    title_deps: str | None = None  # from a closing "(depends on ...)" on the item's line
    section_milestone: str | None = None  # the milestone the heading above it names
    # A checkbox id with only a space after it and a lower-case word next (`S3 bucket policy`):
    # an id only when another item's id has its prefix (`T1 fix it` beside `T2 …`).
    word_like: bool = False
    written: str = ""  # a checkbox's text after its box, as a notice quotes it
    # Sentences of its body that say what it waits for (`Depends on task 1.`), by line.
    prose_deps: list[tuple[int, str]] = field(default_factory=list)

    def read_title(self, raw: str) -> None:
        title = read_title(raw)
        self.title, self.title_labels, self.title_deps = title.text, title.labels, title.depends_on


@dataclass
class Section:
    """A plain heading still open, and the milestone it gives the items under it."""

    level: int
    line0: int
    milestone: str | None = None
    items: int = 0


# A Meta's key for a sentence that says what its item waits for (`Depends on task 1.`), not
# a `key: value` line: read only when it names items of the plan, and left in the body.
PROSE = "prose dependency"


@dataclass
class Meta:
    """A metadata line (`depends on: T1`), not yet given to the item whose body holds it."""

    line0: int
    key: str  # normalised field name, or "" when unknown
    raw_key: str
    value: str
    text: str
    drop_lines: tuple[int, int]  # source lines to drop from the body, [start, end)
    raw_value: str = ""  # the value as written, markdown kept (a check keeps its `code`)


def meta_lines(inline: Token, start: int, skip: int = 0) -> list[Meta]:
    """The `key: value` lines of a paragraph starting on line `start`, after `skip` lines, and
    its sentences that say what an item waits for (`PROSE`)."""
    group: list[Meta] = []
    plain_lines = plain_text(inline).split("\n")
    raw_lines = inline.content.split("\n")
    aligned = len(raw_lines) == len(plain_lines)
    for offset, line in enumerate(plain_lines[skip:], start=skip):
        match = META.match(line)
        line0 = start + offset
        if match:
            key = KEYS.get(norm_key(match.group(1)), "")
            raw_value = _raw_value(raw_lines[offset]) if aligned else match.group(2)
            name, value = match.group(1), match.group(2)
            group.append(Meta(line0, key, name, value, line, (line0, line0 + 1), raw_value))
        elif PROSE_DEPENDS.match(line):
            group.append(Meta(line0, PROSE, "", line, line, (line0, line0 + 1)))
    return group
