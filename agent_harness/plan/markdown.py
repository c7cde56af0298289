"""Markdown plan -> typed work items, plus a report of every line that could not be read.

The parser walks markdown-it-py's token stream (never regexes over raw lines), so code fences,
HTML blocks and nesting are understood the way a markdown renderer understands them. Items are
headings, checkboxes or table rows whose text starts with an id such as `T1` or `AUTH-3`."""

from __future__ import annotations

import re
import textwrap
from bisect import bisect_right
from pathlib import Path
from typing import TYPE_CHECKING

from agent_harness.plan.cursor import blank_front_matter, from_cursor, front_matter, has_todos
from agent_harness.plan.dependencies import (
    ORDER_HEADING,
    ordered_by_sections,
    prose_note,
    read_dependencies,
    refuse_branch_clash,
    refuse_cycles,
    refuse_twins,
)
from agent_harness.plan.drafts import PROSE, Draft, Meta, Section, meta_lines
from agent_harness.plan.grammar import (
    BULLET_TEXT,
    CHECKBOX,
    CHECKBOX_ITEM,
    DONE_BOX,
    DONE_MARKS,
    HEADING_ITEM,
    ID_ANYWHERE,
    ID_RE,
    ITEM_FORMS,
    KEYS,
    META,
    NO_TITLE_COLUMN,
    PLACEHELD,
    PROSE_DEPENDS,
    TABLE_COLUMNS,
    checkbox_without_id,
    issue_dependency,
    norm_key,
    placeholder,
    prose_dependencies,
    read_labels,
    read_milestone_heading,
    soft_dependencies,
    split_files,
    status_done,
    status_open,
    unquoted_check,
    value_below,
    word_not_id,
    wrapped_title,
)
from agent_harness.plan.lookalikes import (
    QUOTED,
    dotted,
    heading_lookalike,
    list_line_lookalike,
    no_items,
    past_block,
    table_without_ids,
    task_heading,
    task_headings,
    words_not_ids,
)
from agent_harness.plan.model import Notice, Plan, WorkItem, _raw_value
from agent_harness.plan.numbered import READ_NOTE, fold_groups, numbered_task
from agent_harness.plan.sections import find_sections
from agent_harness.plan.source import line_ends, read_plan_text
from agent_harness.plan.titles import (
    box_title,
    heading_title,
    plain_text,
    struck,
    title_text,
    without_hidden,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from markdown_it import MarkdownIt
    from markdown_it.token import Token

NOTICE_TEXT_MAX = 200  # how much of a line a notice quotes
MAX_ID_CHARS = 64  # the longest item id: the queue's and the API's limit (queue.projects)
_MD: MarkdownIt | None = None


def _markdown() -> MarkdownIt:
    global _MD  # a cached, immutable-after-build parser; building it costs more than a parse
    if _MD is None:
        from markdown_it import MarkdownIt

        _MD = MarkdownIt("commonmark").enable("table")
    return _MD


def parse_plan_file(path: Path | str) -> Plan:
    """Parse the plan at `path` (or '-' for stdin)."""
    path = Path(path)
    return parse_plan(read_plan_text(path), source=str(path))


def parse_plan(text: str, source: str = "<string>") -> Plan:
    """Parse markdown text into a Plan; refuse duplicate ids and dependency cycles."""
    text = line_ends(text)
    if not text.strip():  # said so, not "no work items found" as if it held something
        return Plan(source=source, items=(), unread=(), notes=("the file is empty",))
    front = front_matter(text)
    if has_todos(front, source):  # a Cursor plan: its front matter lists the items
        assert front is not None
        return from_cursor(front, source)
    text = blank_front_matter(text)
    lines = text.split("\n")
    tokens = _markdown().parse(text)
    walker = _Walker(lines)
    walker.walk(tokens)
    if walker.drafts or not walker.numbered_seen or walker.plain_beside_numbered():
        return walker.finish(source)
    # No item of the usual forms, but numbered tasks: read them as items (see plan.numbered).
    # A number used twice is refused as a named id would be: syncing a plan that lost its
    # items to a typo would leave every issue of it orphaned.
    numbered = _Walker(lines, numbered=True)
    numbered.walk(tokens)
    plan = fold_groups(numbered.finish(source))
    return plan.model_copy(update={"notes": (READ_NOTE, *plan.notes)})


def list_item_spans(text: str) -> dict[int, int]:
    """Each list item of `text` by its first line: the line after its last (0-based, as the
    parser reads them, nested lists inside)."""
    tokens = _markdown().parse(blank_front_matter(line_ends(text)))
    return {
        token.map[0]: token.map[1]
        for token in tokens
        if token.type == "list_item_open" and token.map is not None
    }


class _Walker:
    """One pass over the token stream, collecting item drafts and metadata lines."""

    def __init__(self, lines: list[str], *, numbered: bool = False) -> None:
        self.lines = lines
        self.numbered = numbered  # numbered checkboxes are items (see plan.numbered)
        self.numbered_seen = 0  # checkboxes that would be items if they were
        self.numbered_spans: list[tuple[int, int]] = []  # their lines, sub-lists and all
        self.plain_boxes: list[int] = []  # checkboxes with neither an id nor a task number
        self.whole_numbers = 0  # numbered tasks whose number is whole (`1.`), not dotted
        self.drafts: list[Draft] = []
        self.metas: list[Meta] = []
        self.unread: list[Notice] = []
        self.loose_checkboxes: list[tuple[int, str]] = []
        self.numbered_tasks: list[tuple[int, str]] = []  # `## Task 1: …` headings
        self.quotes = 0  # how many quotes (`>`) the walk is inside
        self.open_headings: list[Draft] = []
        self.sections: list[Section] = []
        self.has_text = False  # any paragraph or heading: a file of prose, if it has no items
        self.lookalikes: set[int] = set()  # lines reported as almost an item
        self.groups: dict[str, list[str]] = {}  # heading id -> the items it holds (see _groups)
        self.order_sections: list[tuple[int, int]] = []  # (level, line) of `## Dependencies`
        self.notes_read: list[str] = []  # how the plan was read, said under its items
        self.prose_read: list[tuple[int, str]] = []  # sentences naming what an item waits for
        self.item_tables: list[int] = []  # the header line of each table whose rows are items

    def plain_beside_numbered(self) -> bool:
        """A to-do list whose lines start with versions (`- [ ] 2.0 release post`, `- [ ] 3.14
        rounding bug`) beside plain ones, not Kiro's tasks: no task numbered whole (`1.`) and
        a checkbox with no number outside them. Its lines are reported; `--add-ids` helps."""
        return not self.whole_numbers and any(
            not any(start < line0 < end for start, end in self.numbered_spans)
            for line0 in self.plain_boxes
        )

    # -- helpers ------------------------------------------------------------------------------
    def _text(self, line0: int) -> str:
        text = self.lines[line0].strip() if 0 <= line0 < len(self.lines) else ""
        # A notice quotes its line so a person can find it, not to copy it: a hostile line of
        # megabytes, quoted by each of its thousand notices, would multiply the output.
        if len(text) > NOTICE_TEXT_MAX:
            text = text[: NOTICE_TEXT_MAX - 1] + "…"
        return text

    def _note(self, line0: int, reason: str) -> None:
        self.unread.append(Notice(line=line0 + 1, reason=reason, text=self._text(line0)))

    def _milestone_section(self) -> Section | None:
        for section in reversed(self.sections):
            if section.milestone is not None:
                return section
        return None

    # -- the walk -----------------------------------------------------------------------------
    def walk(self, tokens: list[Token]) -> None:
        index = 0
        count = len(tokens)
        list_stack: list[list[Meta]] = []
        while index < count:
            token = tokens[index]
            kind = token.type
            if kind == "heading_open":
                if not self._quoted_lookalike(tokens[index + 1], heading=True):
                    self._heading(token, tokens[index + 1])
                index += 3
                continue
            if kind == "bullet_list_open" or kind == "ordered_list_open":
                list_stack.append([])
            elif kind == "bullet_list_close" or kind == "ordered_list_close":
                self._take_metas(list_stack.pop())
            elif kind == "list_item_open":
                index = self._list_item(tokens, index, list_stack)
                continue
            elif kind == "paragraph_open":
                self.has_text = True
                inline = tokens[index + 1]
                self._paragraph(inline, token)
                index += 3
                continue
            elif kind == "table_open":
                index = self._table(tokens, index) if not self.quotes else past_block(tokens, index)
                continue
            elif kind in ("blockquote_open", "blockquote_close"):
                self.quotes += 1 if kind == "blockquote_open" else -1
            index += 1
        end = len(self.lines)
        for draft in self.open_headings:
            draft.scope_end = end

    def _heading(self, token: Token, inline: Token) -> None:
        level = int(token.tag[1])
        start, end = token.map or (0, 1)
        self.has_text = True
        for draft in self.open_headings:
            if draft.level >= level:
                draft.scope_end = start
        self.open_headings = [d for d in self.open_headings if d.level < level]
        text = plain_text(inline).strip()
        done = text.startswith(DONE_MARKS)  # `### ✅ T12: Ship it`, a finished item
        text = text.lstrip("".join(DONE_MARKS)).strip() if done else text
        match = None if self._dotted(start, text) else HEADING_ITEM.match(text)
        if match and (match.group(1) or match.group(3))[-1].isdigit():
            item_id = match.group(1) or match.group(3)
            self._close_sections(level, f"the item heading {item_id} on line {start + 1}")
            draft = Draft(item_id, "", start, end, len(self.lines), "heading", level=level)
            draft.done = done
            draft.read_title(heading_title(title_text(inline).strip(), match, done))
            self._add_draft(draft)
            self.open_headings.append(draft)
            self.sections.append(Section(level, start))
            return
        self._close_sections(level, None)
        self._section_heading(level, start, text)

    def _close_sections(self, level: int, item: str | None) -> None:
        """End the sections a heading at `level` ends. A milestone ended by an item heading
        before any item came under it is reported: the items were most likely meant for it."""
        for section in self.sections:
            if section.level < level or section.milestone is None or section.items or not item:
                continue
            where = "at its level" if section.level == level else "above it"
            self._note(
                section.line0,
                f"milestone '{section.milestone}' has no items: {item} is {where} and ends it "
                "(give the items a deeper heading)",
            )
        self.sections = [section for section in self.sections if section.level < level]

    def _section_heading(self, level: int, start: int, text: str) -> None:
        """A heading that is no item: maybe a milestone, maybe a near miss to report."""
        section = Section(level, start)
        self.sections.append(section)
        if ORDER_HEADING.match(text):  # spec-kit's `## Dependencies & Execution Order`
            self.order_sections.append((level, start))
        milestone = read_milestone_heading(text)
        if milestone is not None:
            section.milestone = milestone.name
            if milestone.problem:
                self._note(start, milestone.problem)
            return
        reason = heading_lookalike(text)
        if reason is not None:
            self._lookalike(start, reason)
        elif task_heading(text) is not None:
            self.numbered_tasks.append((start, text))  # said once the plan has items

    def _too_deep(self, tokens: list[Token], index: int, start: int, end: int) -> bool:
        """markdown-it stops building tokens past its nesting limit: a list item there comes
        out empty though its lines are not. Report those lines rather than lose them."""
        limit = int(_markdown().options["maxNesting"])
        following = tokens[index + 1].type if index + 1 < len(tokens) else ""
        if tokens[index].level < limit - 2 or following != "list_item_close":
            return False
        readable = (limit - 2) // 2  # each level of list costs two: the list and its item
        for line0 in range(start, end):
            if BULLET_TEXT.match(self.lines[line0] if line0 < len(self.lines) else ""):
                self._note(line0, f"a list nested more than {readable} deep; not read")
        return True

    def _quoted_lookalike(self, inline: Token, *, heading: bool) -> bool:
        """Inside a quote (`> ...`, someone's words: an example of the format, a note) no
        checkbox or heading is an item or a section; one that would be outside is reported,
        so a person who meant it can take the `>` off. Its fields are read as anywhere else
        (a lazy line after a quote belongs to it in markdown). True when inside a quote."""
        if not self.quotes:
            return False
        text = inline.content.partition("\n")[0].strip()
        box = None if heading else CHECKBOX.match(text)
        looks = HEADING_ITEM.match(text) if heading else box and CHECKBOX_ITEM.match(box.group(2))
        if looks and inline.map is not None:
            self._lookalike(inline.map[0], QUOTED)
        return True

    def _lookalike(self, line0: int, reason: str) -> None:
        """Report a line that looks like an item and is not, with why."""
        self.lookalikes.add(line0)
        self._note(line0, reason)

    def _dotted(self, line0: int, text: str) -> bool:
        reason = dotted(text)
        if reason is not None:
            self._lookalike(line0, reason)
        return reason is not None

    def _add_draft(self, draft: Draft) -> None:
        section = self._milestone_section()
        if section is not None and section.milestone is not None:
            draft.section_milestone = section.milestone
        for open_section in self.sections:
            open_section.items += 1
        self.drafts.append(draft)

    def _list_item(self, tokens: list[Token], index: int, list_stack: list[list[Meta]]) -> int:
        item_token = tokens[index]
        start, end = item_token.map or (0, 1)
        if self._too_deep(tokens, index, start, end):
            return index + 1
        if index + 2 < len(tokens) and tokens[index + 1].type == "paragraph_open":
            inline = tokens[index + 2]
            raw = inline.content
            quoted_box = raw.startswith("[") and CHECKBOX.match(plain_text(inline))
            if quoted_box and self._quoted_lookalike(inline, heading=False):
                return index + 4  # the paragraph is consumed; nested lists are walked
            if raw.startswith("["):
                box = CHECKBOX.match(plain_text(inline))
                if box:
                    self._checkbox(box, inline, start, end)
                    return index + 4  # the paragraph is consumed; nested lists are walked
            in_item = bool(self.open_headings) or len(list_stack) > 1  # an item's body
            reason = list_line_lookalike(plain_text(inline).partition("\n")[0], in_item=in_item)
            if reason is not None:
                self._lookalike(start, reason)
            para_start, para_end = tokens[index + 1].map or (start, start + 1)
            if para_end - para_start == 1 and list_stack:
                plain = plain_text(inline)
                match = META.match(plain) if ":" in raw else None
                if match:
                    key = KEYS.get(norm_key(match.group(1)), "")
                    name, value = match.group(1), match.group(2)
                    meta = (para_start, key, name, value, raw, (start, end), _raw_value(raw))
                    list_stack[-1].append(Meta(*meta))
                    return index + 4
                if PROSE_DEPENDS.match(plain):  # `- Depends on task 1`: read, kept in the body
                    list_stack[-1].append(Meta(para_start, PROSE, "", plain, raw, (start, end)))
                    return index + 4
        return index + 1

    def _checkbox(self, box: re.Match[str], inline: Token, start: int, end: int) -> None:
        done = box.group(1) in DONE_BOX
        first_line, _, rest = box.group(2).partition("\n")
        if self._dotted(start, first_line.strip()):
            return
        if not done and struck(first_line.strip()):  # `- [ ] T1 ~~Support IE11~~ (dropped)`
            self._lookalike(start, "checkbox is struck through (~~); not read as an item")
            return
        match = CHECKBOX_ITEM.match(first_line.strip())
        task = None if match else numbered_task(first_line)
        if task is not None:
            self.numbered_seen += 1
            self.numbered_spans.append((start, end))
            self.whole_numbers += "." not in task[0]  # `1. Set up`, as Kiro writes a task
        elif not match:
            self.plain_boxes.append(start)
        marked: tuple[str, ...] = ()  # labels a numbered task's own mark gives
        if match and match.group(1)[-1].isdigit():
            item_id, title = match.group(1), box_title(inline, match)
        elif task is not None and self.numbered:
            item_id, title, marked = task
        else:
            self.loose_checkboxes.append((start, first_line.strip()))
            return
        wrapped = wrapped_title(title, rest.partition("\n")[0])
        title = f"{title.rstrip()} {wrapped}" if wrapped else title
        under = start + (2 if wrapped else 1)
        draft = Draft(item_id, "", start, under, end, "checkbox", done=done)
        if match is not None:
            after = first_line.strip()[len(item_id) :]
            written = match.group(2)
            draft.word_like = after[:1].isspace() and after.lstrip() == written
            draft.word_like &= written[:1].islower()
            draft.written = first_line.strip()
        draft.read_title(title)
        draft.title_labels = (*marked, *draft.title_labels)
        self._add_draft(draft)
        # Lines right under the checkbox, in its own paragraph, may be metadata too.
        self._take_metas(meta_lines(inline, start, skip=under - start))

    def _paragraph(self, inline: Token, para: Token) -> None:
        lines = inline.content.split("\n")
        if ":" in inline.content or any(PROSE_DEPENDS.match(line) for line in lines):
            self._take_metas(meta_lines(inline, (para.map or (0, 1))[0]))

    def _take_metas(self, group: list[Meta]) -> None:
        """A paragraph's `key: value` lines count only when one of them is a key we know, so a
        lone `Note: ...` line in prose stays prose. A sentence naming what an item waits for is
        always taken (it is read only if it names items)."""
        if any(meta.key and meta.key != PROSE for meta in group):
            self.metas.extend(group)
        else:
            self.metas.extend(meta for meta in group if meta.key == PROSE)

    def _table(self, tokens: list[Token], index: int) -> int:
        columns: list[str] = []
        header_line = (tokens[index].map or (0, 1))[0]
        drafts_before = len(self.drafts)
        index += 1
        row: list[str] = []
        raw_row: list[str] = []
        written_row: list[str] = []  # cells as written: a title's (see `title_text`)
        row_line = 0
        in_head = True
        unknown: list[str] = []
        header: list[str] = []
        while tokens[index].type != "table_close":
            token = tokens[index]
            kind = token.type
            if kind == "tbody_open":
                in_head = False
            elif kind == "tr_open":
                row, raw_row, written_row = [], [], []
                row_line = (token.map or (0, 1))[0]
            elif kind == "inline":
                row.append(plain_text(token).strip())
                raw_row.append(token.content.strip())
                written_row.append(title_text(token).strip())
            elif kind == "tr_close":
                if in_head:
                    header = row
                    for name in row:
                        column = TABLE_COLUMNS.get(norm_key(name), "")
                        columns.append(column)
                        if not column and name:
                            unknown.append(name)
                    if "id" not in columns:
                        columns = []
                    elif not {"title", "body"} & set(columns):
                        # `| ID | Risk | Likelihood |`: a register of something else, whose
                        # rows would be items titled by their ids alone.
                        self._note(header_line, NO_TITLE_COLUMN)
                        columns, unknown, header = [], [], []  # said once: no second word
                elif columns:
                    self._table_row(columns, row, raw_row, written_row, row_line)
                elif header and (reason := table_without_ids(header, row)):
                    self._lookalike(header_line, reason)
                    header = []  # said once for the table
            index += 1
        if columns and unknown:
            self._note(header_line, f"unknown table column(s) ignored: {', '.join(unknown)}")
        if len(self.drafts) > drafts_before:  # its header is no part of the item above it
            self.item_tables.append(header_line)
        return index + 1

    def _table_row(
        self, columns: list[str], cells: list[str], raw: list[str], written: list[str], line0: int
    ) -> None:
        values: dict[str, str] = {}
        for column, cell, raw_cell, as_written in zip(columns, cells, raw, written, strict=False):
            if column and column not in values:
                kept = raw_cell if column in ("success_check", "body") else cell
                values[column] = as_written if column == "title" else kept
        item_id = values.get("id", "").strip("*`_ ")
        if not item_id:
            self._note(line0, "table row has an empty id cell")
            return
        if not ID_RE.match(item_id) or not item_id[-1].isdigit():
            self.lookalikes.add(line0)
            self._note(line0, f"'{item_id}' is not an item id (expected something like T1)")
            return
        draft = Draft(item_id, "", line0, line0 + 1, line0 + 1, "table")
        body = values.get("body", "")
        title = values.get("title", "")
        if not title and "title" not in columns and "body" in columns:
            # `| ID | Description | ... |`: the description is what the task is called.
            at = columns.index("body")
            title, body = (written[at] if at < len(written) else ""), ""
        draft.read_title(title or item_id)
        for name in ("labels", "milestone", "depends_on", "success_check", "files", "status"):
            if values.get(name):
                draft.fields[name] = (line0, values[name])
        draft.body = body
        self._add_draft(draft)

    # -- assembling ---------------------------------------------------------------------------
    def finish(self, source: str) -> Plan:
        drafts = self.drafts = self._ids_not_words()
        # A plan of them alone is told so in its note.
        for line0, reason in task_headings(self.numbered_tasks, drafts, self.lines):
            self._lookalike(line0, reason)
        order = sorted(range(len(drafts)), key=lambda i: drafts[i].line0)
        starts = [drafts[i].line0 for i in order]
        body_end: dict[int, int] = {}
        tables = sorted(self.item_tables)
        for position, draft_index in enumerate(order):
            draft = drafts[draft_index]
            next_start = starts[position + 1] if position + 1 < len(order) else len(self.lines)
            at = bisect_right(tables, draft.line0)  # a table of items after it ends its body
            if at < len(tables):
                next_start = min(next_start, tables[at])
            body_end[draft_index] = min(draft.scope_end, next_start)

        def owner_of(line0: int) -> Draft | None:
            """The item whose body holds the line, if any (a table row has no body)."""
            position = bisect_right(starts, line0) - 1
            if position < 0:
                return None
            draft = drafts[order[position]]
            inside = draft.body_from <= line0 < body_end[order[position]]
            return draft if inside and draft.form != "table" else None

        dropped = self._assign_metas(owner_of)
        for line0, text in self.loose_checkboxes:
            if owner_of(line0) is None:
                self.lookalikes.add(line0)
                self.unread.append(
                    Notice(line=line0 + 1, reason=checkbox_without_id(text), text=text)
                )

        seen = refuse_twins(((draft.id, draft.line0 + 1) for draft in drafts), source, "item")

        self.groups, notices = find_sections(drafts, order, self.lines)
        for line0, notice in notices:
            self._note(line0, notice)
        items: list[WorkItem] = []
        for index, draft in enumerate(drafts):
            if draft.id in self.groups:
                continue
            if len(draft.id) > MAX_ID_CHARS:
                # No branch, marker or queue could hold it: `run` failed on it at the worktree.
                self._note(draft.line0, f"item id of {len(draft.id)} characters; at most "
                           f"{MAX_ID_CHARS}")  # fmt: skip
                continue
            items.append(self._build(draft, body_end[index], dropped, seen))
        items, read = ordered_by_sections(items, self.lines, self.order_sections)
        self.notes_read += read
        refuse_cycles(items, source)
        refuse_branch_clash(items, source)
        self.unread.sort(key=lambda notice: notice.line)
        return Plan(
            source=source, items=tuple(items), unread=tuple(self.unread), notes=self._notes()
        )

    def _ids_not_words(self) -> list[Draft]:
        """The drafts, less the checkboxes whose id reads as a word (see `words_not_ids`; an
        id a title or a `depends on:` line names is an id), each reported as a checkbox with
        no id, which `--add-ids` numbers."""
        texts = [f"{draft.title} {draft.title_deps or ''}" for draft in self.drafts]
        texts += [meta.value for meta in self.metas if meta.key == "depends_on"]
        named = {found for text in texts for found in ID_ANYWHERE.findall(text)}
        drafts = [(draft.id, draft.word_like) for draft in self.drafts]
        # The checkboxes with no id that are tasks of their own, not steps nested in an item.
        top = [n for n, _ in self.loose_checkboxes if self.lines[n][:2].strip(" \t")]
        words = words_not_ids(drafts, named, idless=len(top))
        for index in sorted(words):
            draft = self.drafts[index]
            self.lookalikes.add(draft.line0)
            reason = word_not_id(draft.id)
            self.unread.append(Notice(line=draft.line0 + 1, reason=reason, text=draft.written))
        return [draft for index, draft in enumerate(self.drafts) if index not in words]

    def _assign_metas(self, owner_of: Callable[[int], Draft | None]) -> set[int]:
        """Give each metadata line to the item whose body holds it; the lines taken leave the
        body (returned). The rest are reported, unless nothing marks them as metadata."""
        dropped: set[int] = set()
        for meta in self.metas:
            draft = owner_of(meta.line0)
            if meta.key == PROSE:  # a sentence: read once the plan's ids are known, and kept
                if draft is not None:
                    draft.prose_deps.append((meta.line0, meta.value))
                continue
            if draft is None:
                if meta.key:
                    self._note(meta.line0, f"'{meta.raw_key}:' line is outside any item")
                continue
            if not meta.key:
                self._note(meta.line0, f"unknown metadata key '{meta.raw_key}'")
                continue
            if meta.key in draft.fields:
                self._note(meta.line0, f"second '{meta.raw_key}:' line for {draft.id} ignored")
                continue
            value = meta.raw_value if meta.key == "success_check" else meta.value
            below = range(0)
            if not value.strip():  # `Files:` over a list, `check:` over a fenced command
                value, below = value_below(self.lines, meta.drop_lines[1] - 1, meta.key)
            if meta.key in PLACEHELD and value.strip() and placeholder(value):
                self._note(meta.line0, f"'{meta.raw_key}: {value.strip()}' holds a place: "
                           f"{draft.id} gets no {PLACEHELD[meta.key]} from it")  # fmt: skip
                value = ""
            draft.fields[meta.key] = (meta.line0, value)
            if meta.key == "status" and not status_done(value) and not status_open(value):
                # `Status: Blocked on legal review` says something the agent should read.
                self._note(meta.line0, f"{draft.id}'s status '{value.strip()}' is not read as "
                           "done: the item stays open, and the line stays in its body")  # fmt: skip
                continue
            dropped.update(range(*meta.drop_lines), below)
        return dropped

    def _notes(self) -> tuple[str, ...]:
        """A word on a file with no items at all, so an empty table is never the whole answer;
        and how the plan was read, where it was read unusually."""
        if self.prose_read:
            self.notes_read.append(prose_note(self.prose_read))
        if self.drafts or not (self.has_text or self.unread):
            return tuple(self.notes_read)
        return (f"{no_items(len(self.lookalikes), self.lines)}. {ITEM_FORMS}",)

    def _depends(self, draft: Draft, soft: str | None, known: dict[str, int]) -> list[str]:
        """What the item waits for: its title's closing words, then its `depends on:` line; a
        section named stands for each of its items (but the item itself, when one of them)."""
        fields = draft.fields
        sources = [(draft.line0, deps)] if (deps := draft.title_deps or soft) else []
        if "depends_on" in fields:
            sources.append(fields["depends_on"])
        for line0, sentence in draft.prose_deps:  # `Depends on tasks 1 and 2.`
            if (named := prose_dependencies(sentence, known)) is not None:
                sources.append((line0, named))
                self.prose_read.append((line0, sentence))
        depends: list[str] = []
        for line0, value in sources:
            found, notices = read_dependencies(draft.id, value, known, numbered=self.numbered)
            for dep in found:  # a plain self-dependency stays, to be refused as a cycle
                group = self.groups.get(dep)
                leaves = [d for d in group if d != draft.id] if group is not None else [dep]
                depends += [leaf for leaf in leaves if leaf not in depends]
            for notice in notices:
                self._note(line0, notice)
        return depends

    def _build(self, draft: Draft, end: int, dropped: set[int], known: dict[str, int]) -> WorkItem:
        if draft.body is None:
            kept = [self.lines[n] for n in range(draft.body_from, end) if n not in dropped]
            body = textwrap.dedent("\n".join(kept)).strip("\n")
            body = "\n".join(line.rstrip() for line in body.split("\n")).strip()
        else:
            body = draft.body
        fields = draft.fields
        labels, too_long = read_labels(draft.title_labels, fields.get("labels", (0, ""))[1])
        for reason in too_long:  # GitHub would refuse the issue: said now, left out
            self._note(fields["labels"][0], reason)
        milestone = fields["milestone"][1].strip() if "milestone" in fields else None
        if not milestone:
            milestone = draft.section_milestone
        title, soft = soft_dependencies(draft.title, known)  # `(after T1)`, `(needs T1)`
        if (on_an_issue := issue_dependency(title)) is not None:
            self._note(draft.line0, f"{draft.id}: {on_an_issue}")
        title, hidden = without_hidden(title)
        if hidden:
            self._note(draft.line0, f"{draft.id}'s title {hidden}")
        depends = self._depends(draft, soft, known)
        check = fields["success_check"][1].strip() if "success_check" in fields else None
        if check and (unquoted := unquoted_check(draft.id, check)):
            self._note(fields["success_check"][0], unquoted)
        files = split_files(fields["files"][1]) if "files" in fields else []
        done = draft.done
        if "status" in fields and status_done(fields["status"][1]):
            done = True
        if not title:
            self._note(draft.line0, f"item {draft.id} has no title; its id is used instead")
        return WorkItem(
            id=draft.id,
            title=title or draft.id,
            body=body,
            labels=tuple(labels),
            milestone=milestone or None,
            depends_on=tuple(depends),
            success_check=check or None,
            files=tuple(files),
            done=done,
            line=draft.line0 + 1,
            form=draft.form,
        )
