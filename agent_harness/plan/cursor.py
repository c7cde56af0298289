"""Cursor's plan files (`.cursor/plans/*.plan.md`), read as plans.

Cursor's plan mode writes a markdown file whose YAML front matter holds the plan's `name`, an
`overview` and its `todos`: each a mapping with an `id` (a short name such as `setup-db`), the
task's `content` (one line), a `status` (pending, in_progress, completed, cancelled) and, at
times, `dependencies` (other todos' ids). The markdown under it explains the plan. Read here as:

- each todo is an item, with its own id; its title is its content; its body names the plan and
  gives its overview (the same for every item; the plan file itself is in the repository);
- completed and cancelled todos are done: never worked, no issue made for them;
- a dependency on an id no todo has is reported and dropped; an id used twice or a cycle is
  refused, as in every plan;
- the markdown below the front matter is not read for items (a note says so).

Any markdown plan whose front matter has a `todos:` list is read this way.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from agent_harness.errors import InputError
from agent_harness.plan.dependencies import brief, lines_by_id, refuse_cycles, unknown_deps
from agent_harness.plan.model import Notice, Plan, WorkItem

DONE = frozenset({"completed", "cancelled", "canceled", "done"})
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TODOS = re.compile(r"^todos\s*:", re.MULTILINE)
_FRONT_MATTER_END = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
_ENTRY = re.compile(r"^\s*-\s+id\s*:")
_ANY_ENTRY = re.compile(r"^\s*-\s+[A-Za-z_][\w-]*\s*:")
# Front matter is a few kilobytes; this bounds the YAML parser's work on a hostile file.
FRONT_MATTER_MAX = 1024 * 1024
DEPENDENCIES_MAX = 1000
NOTE = "read as a Cursor plan: the front matter's todos are the items; the text below is not read"


def front_matter(text: str) -> str | None:
    """The YAML between a leading `---` line and the next `---` (or `...`) line, of text with
    `\\n` line ends; None when the text has none."""
    if not text.startswith("---\n"):
        return None
    match = _FRONT_MATTER_END.search(text, 4)
    return text[4 : match.start()] if match else None


# libyaml's safe loader where it is built in, Python's own where not (same documents read).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_KEY_LINE = re.compile(r"^[A-Za-z_][\w.-]*\s*:(?:\s|$)")


def is_front_matter(front: str) -> bool:
    """Whether the block between two `---` lines at the top is front matter: YAML that is empty
    or a mapping of keys. Anything else (`---` used as a rule above a list of tasks) is the
    plan's own text."""
    if len(front) > FRONT_MATTER_MAX:
        return False
    try:
        data = yaml.load(front, Loader=_LOADER)
    except yaml.YAMLError:  # `title: Plan: v2` is front matter all the same, written loosely
        first = next((line for line in front.split("\n") if line.strip()), "")
        return _KEY_LINE.match(first) is not None
    return data is None or isinstance(data, dict)


def blank_front_matter(text: str) -> str:
    """`text` (with `\n` line ends) with its front matter blanked: the lines between a first
    `---` line and the next `---` (or `...`) line, when they read as YAML front matter."""
    front = front_matter(text)
    if front is None or not is_front_matter(front):
        return text
    stop = text.find("\n", 4 + len(front))
    stop = len(text) if stop == -1 else stop + 1
    # Blanked, not cut, so every line number stays true to the file.
    return "\n" * text.count("\n", 0, stop) + text[stop:]


def has_todos(front: str | None, source: str = "<string>") -> bool:
    """Whether front matter lists todos at its top level as Cursor's plans do: a list holding
    at least one mapping. An empty list (`todos: []`) or one of plain words is some other
    tool's note, and the markdown below it is the plan."""
    if front is None or _TODOS.search(front) is None:
        return False
    todos = _load(front, source).get("todos")
    return not isinstance(todos, list) or any(isinstance(todo, dict) for todo in todos)


def from_cursor(front: str, source: str) -> Plan:
    """The plan the front matter's todos make (`front` as `front_matter` gives it)."""
    data = _load(front, source)
    todos = data.get("todos")
    if not isinstance(todos, list):
        raise InputError(f"{source}: the front matter's todos are not a list")
    name, overview = data.get("name"), data.get("overview")
    parts = [f"From the plan **{name.strip()}**." if isinstance(name, str) and name.strip() else ""]
    parts.append(overview.strip() if isinstance(overview, str) else "")
    intro = "\n\n".join(part for part in parts if part)
    lines = front.split("\n")
    unread: list[Notice] = []
    drafts: list[tuple[WorkItem, list[Any]]] = []
    for index, (todo, line) in enumerate(zip(todos, _lines_of(todos, lines), strict=True), 1):
        item = _item(todo, index, line, intro, unread)
        if item is not None:
            deps = todo.get("dependencies") or []
            deps = deps if isinstance(deps, list) else [deps]
            if len(deps) > DEPENDENCIES_MAX:  # YAML aliases can hand one list to every todo
                said = f"{item.id} names {len(deps)} dependencies, over {DEPENDENCIES_MAX}; ignored"
                unread.append(Notice(line=line, reason=said))
                deps = []
            drafts.append((item, deps))
    return Plan(
        source=source,
        items=tuple(_resolved(drafts, source, unread)),
        unread=tuple(sorted(unread, key=lambda notice: notice.line)),
        notes=(NOTE,),
    )


def _load(front: str, source: str) -> dict[str, Any]:
    if len(front) > FRONT_MATTER_MAX:
        raise InputError(f"{source}: the front matter is over {FRONT_MATTER_MAX // 1024} KB")
    try:
        data = yaml.load(front, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        raise InputError(f"{source}: the front matter is not YAML{where}") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: the front matter is not a mapping of keys")
    return data


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _lines_of(todos: list[Any], lines: list[str]) -> list[int]:
    """The file's line of each todo (the front matter starts on line 2): where its `- id:` is,
    when each todo starts so (as Cursor writes them); else where its id is named, or `todos:`."""
    starts = [n + 2 for n, line in enumerate(lines) if _ENTRY.match(line)]
    if len(starts) == len(todos):
        return starts
    todos_line = next((n + 2 for n, line in enumerate(lines) if _TODOS.match(line)), 1)
    # Every entry of the list, whatever key it starts with (`- content: …` has no id).
    first = next((line for line in lines[todos_line - 1 :] if _ANY_ENTRY.match(line)), "")
    indent = first[: len(first) - len(first.lstrip())]
    entries = [
        n + 2
        for n, line in enumerate(lines)
        if n + 2 > todos_line and _ANY_ENTRY.match(line) and line.startswith(indent + "-")
    ]
    if first and len(entries) == len(todos):
        return entries
    found: list[int] = []
    for todo in todos:
        todo_id = todo.get("id") if isinstance(todo, dict) else None
        line = todos_line
        if isinstance(todo_id, str | int) and not isinstance(todo_id, bool):
            wanted = re.compile(rf"^\s*-?\s*id\s*:\s*['\"]?{re.escape(str(todo_id))}['\"]?\s*$")
            line = next((n + 2 for n, text in enumerate(lines) if wanted.match(text)), line)
        found.append(line)
    return found


def _item(todo: object, index: int, line: int, intro: str, unread: list[Notice]) -> WorkItem | None:
    if not isinstance(todo, dict):
        unread.append(Notice(line=line, reason=f"todo {index} is not a mapping; left out"))
        return None
    raw_id, content = todo.get("id"), todo.get("content")
    item_id = str(raw_id).strip() if isinstance(raw_id, str | int) else ""
    if raw_id is None:  # it said "id None is no item id"
        unread.append(Notice(line=line, reason=f"todo {index} has no id; left out"))
        return None
    if isinstance(raw_id, bool) or not _ID.fullmatch(item_id):
        shown = brief(raw_id)
        said = f"todo {index}: id {shown} is no item id (letters, digits, . _ -); left out"
        unread.append(Notice(line=line, reason=said))
        return None
    if not _text(content):
        unread.append(Notice(line=line, reason=f"todo {item_id} has no content; left out"))
        return None
    status = todo.get("status")
    return WorkItem(
        id=item_id,
        title=" ".join(str(content).split()),
        body=intro,
        done=isinstance(status, str) and status.strip().lower() in DONE,
        line=line,
        form="table",
    )


def _resolved(
    drafts: list[tuple[WorkItem, list[Any]]], source: str, unread: list[Notice]
) -> list[WorkItem]:
    seen = lines_by_id((item for item, _ in drafts), source, "todo")
    items: list[WorkItem] = []
    for item, wanted in drafts:
        found: dict[str, None] = {}  # an ordered set
        unknown: list[str] = []
        for dep in wanted:
            name = str(dep).strip() if isinstance(dep, str | int) else brief(dep)
            if name == item.id:
                said = f"{item.id} depends on itself; dependency ignored"
                unread.append(Notice(line=item.line, reason=said))
            elif name in seen:
                found[name] = None
            else:
                unknown.append(name)
        if unknown:
            unread.append(Notice(line=item.line, reason=unknown_deps(item.id, unknown)))
        items.append(item.model_copy(update={"depends_on": tuple(found)}))
    refuse_cycles(items, source)
    return items
