"""What every plan reader says of dependencies: unknown ones reported, cycles refused."""

from __future__ import annotations

import re
from collections.abc import Container, Iterable

from agent_harness.errors import HarnessError, PlanRefused
from agent_harness.git.naming import clean_name, slugify
from agent_harness.plan.grammar import ID, ID_ANYWHERE, NO_DEPS, heading_item_id
from agent_harness.plan.model import WorkItem

# How many unknown dependency ids one notice names.
UNKNOWN_DEPS_SHOWN = 10


def lines_by_id(items: Iterable[WorkItem], source: str, noun: str) -> dict[str, int]:
    """Each item's line by its id; an id used twice is refused, naming both lines (see
    `refuse_twins`), and so is a title that names another's branch (`refuse_branch_clash`)."""
    listed = list(items)
    lines = refuse_twins(((item.id, item.line) for item in listed), source, noun)
    refuse_branch_clash(listed, source)
    return lines


def refuse_branch_clash(items: Iterable[WorkItem], source: str) -> None:
    """Refuse an item whose branch (`<id>-<slug of its title>`) would read as another item's,
    whose id goes on from this one's: `bucket` titled "Store data" names
    `agent-harness/bucket-store-data`, which starts as `bucket-store`'s branches do, and the
    one could be taken for the other's work."""
    by_clean = {clean_name(item.id): item for item in items if not item.done}  # to work
    for mine, item in by_clean.items():
        named = f"{mine}-{slugify(item.title)}"
        # Each longer id the name could start with ends at one of its dashes past the id's own.
        ends = [n for n, char in enumerate(named) if char == "-" and n > len(mine)]
        other = next((by_clean[named[:n]] for n in ends if named[:n] in by_clean), None)
        if other is not None:
            raise PlanRefused(
                f"{source}: item {item.id}'s title {item.title[:60]!r} would name its branch "
                f"agent-harness/{named[:80]}, which reads as {other.id}'s (line {other.line}); "
                "retitle it, or give one of them another id"
            )


def refuse_twins(ids: Iterable[tuple[str, int]], source: str, noun: str) -> dict[str, int]:
    """Each id's line, from (id, line) pairs. An id used twice is refused, and so are two ids
    that would name one branch and worktree: told apart only by characters a branch name
    cannot hold (`T1.2`, `T1-2`) or by case (`tests`, `Tests`, one folder on macOS)."""
    seen: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for item_id, line in ids:
        if item_id in seen:
            first, second = sorted((seen[item_id], line))
            where = f"lines {first} and {second}" if first != second else f"both on line {first}"
            raise PlanRefused(f"{source}: {noun} id {item_id} is used twice ({where})")
        key = clean_name(item_id).casefold()
        other = spelled.get(key)
        if other is not None:
            raise PlanRefused(
                f"{source}: {noun} ids {other} (line {seen[other]}) and {item_id} (line {line}) "
                "would share one branch and worktree (names keep letters, digits, - and _, "
                "whatever their case); rename one"
            )
        seen[item_id] = line
        spelled[key] = item_id
    return seen


def brief(value: object) -> str:
    """A value read from a plan, named in a notice: a scalar as it was written (cut to 40
    characters), anything else by its kind. YAML aliases can make a small file a structure
    too large to ever spell out, and spelling it would hang the read."""
    if value is None or isinstance(value, str | int | float | bool):
        return repr(value)[:40]
    return f"a {type(value).__name__}"


def unknown_deps(item_id: str, unknown: list[str]) -> str:
    """One notice per line, however many unknown ids it names."""
    if len(unknown) == 1:
        return f"{item_id} depends on unknown item {unknown[0]}; dependency ignored"
    shown = _named(unknown)
    return f"{item_id} depends on {len(unknown)} unknown items ({shown}); dependencies ignored"


def _named(ids: list[str]) -> str:
    shown = ", ".join(ids[:UNKNOWN_DEPS_SHOWN])
    more = len(ids) - UNKNOWN_DEPS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


# A range of ids (spec-kit's `T003-T005`, `T3–T5`): the same prefix, numbers in order.
_ID_RANGE = re.compile(rf"(?<![A-Za-z0-9_-])({ID})\s*[-–]\s*({ID})(?![A-Za-z0-9_-])")
_RANGE_MAX = 1000  # ids one range may name: `T1-T999999` is a typo, not a thousand items
# A numbered task's id (Kiro's `2.1`), named as a dependency of another numbered task.
_TASK_NUMBER = re.compile(r"(?<![\w.])(\d{1,6}(?:\.\d{1,6}){0,3})(?![\w.]|\.\d)")


def read_dependencies(
    item_id: str, value: str, known: Container[str], *, numbered: bool = False
) -> tuple[list[str], list[str]]:
    """The ids a `depends on:` value names, in order, each once, and the notices it gives:
    unknown ids, and words that name no item (`JWT`, `the API`). A range `T3-T5` names T3, T4
    and T5. In a plan of numbered tasks (`numbered`), task numbers (`1`, `2.1`) are ids."""
    if value.strip().lower() in NO_DEPS:
        return [], []
    named: list[str] = []
    rest = _ID_RANGE.sub(
        lambda m: m.group(0) if m.group(0) in known else (_expand(m, named) or m.group(0)), value
    )  # an id with a dash in it (`AUTH-2`, `T1-T3` where that is an item's id) is no range
    for dep in ID_ANYWHERE.findall(rest):
        if dep[-1].isdigit():
            named.append(dep)
    rest = ID_ANYWHERE.sub(lambda m: " " if m.group(1)[-1].isdigit() else m.group(0), rest)
    if numbered:
        named += _TASK_NUMBER.findall(rest)
        rest = _TASK_NUMBER.sub(" ", rest)
    found = [dep for dep in dict.fromkeys(named) if dep in known]
    unknown = [dep for dep in dict.fromkeys(named) if dep not in known]
    notices = [unknown_deps(item_id, unknown)] if unknown else []
    rest = re.sub(r"[,;#()\[\]`*&+]|\band\b", " ", rest, flags=re.IGNORECASE)
    words = " ".join(
        word.strip(".") for word in rest.split() if word.strip(".").lower() not in NO_DEPS
    )
    if words:
        notices.append(f"could not read dependency '{words}' of {item_id}")
    return found, notices


def _expand(match: re.Match[str], named: list[str]) -> str:
    """Name each id of the range `match` (`T3-T5`) in `named`; "" when it is no range (other
    prefixes, the numbers backwards, too many), which leaves the text to be read as it is."""
    start = re.match(r"^(.*?)(\d+)$", match.group(1))
    tail = re.match(r"^(.*?)(\d+)$", match.group(2))
    if start is None or tail is None or tail.group(1) != start.group(1):
        return ""  # `AUTH-LOGIN-2`, `DB-MIGRATION`: ids with dashes, not a range
    head, low, high = start.group(1), start.group(2), tail.group(2)
    if not low.isascii():
        return ""
    if not high.isascii() or not 0 < int(high) - int(low) < _RANGE_MAX:
        return ""
    width = len(low) if low.startswith("0") else 0  # T003-T005 keep their zeros
    named.extend(f"{head}{n:0{width}d}" for n in range(int(low), int(high) + 1))
    return " "


# A line of a plan's dependencies section, as spec-kit writes one: `T012 depends on T011`,
# `T008 blocks T009, T015`, `Tests (T004-T007) before implementation (T008-T014)`.
_WAITS = re.compile(
    rf"^\W*({ID})\s+(?i:depends\s+on|requires|needs|waits\s+for|(?:is\s+)?blocked\s+by)\s*:?\s+(.+)$"
)
_BLOCKS = re.compile(rf"^\W*({ID})\s+(?i:blocks|unblocks|comes\s+before)\s*:?\s+(.+)$")
_BEFORE_AFTER = re.compile(r"\b(before|after)\b", re.IGNORECASE)


def order_line(text: str, known: Container[str]) -> list[tuple[str, list[str]]]:
    """What one line of a dependencies section says waits for what: (item, the items it waits
    for), ids of the plan only. Nothing for a line that names no two items in such words."""
    line = text.replace("**", "").replace("`", "")
    waits = _WAITS.match(line)
    if waits and waits.group(1) in known:
        return [(waits.group(1), _ids_in(waits.group(2), known))]
    blocks = _BLOCKS.match(line)
    if blocks and blocks.group(1) in known:
        return [(target, [blocks.group(1)]) for target in _ids_in(blocks.group(2), known)]
    parts = _BEFORE_AFTER.split(line)
    if len(parts) != 3:  # one `before` or `after`, no more: a sentence of several is no rule
        return []
    left, word, right = _ids_in(parts[0], known), parts[1].lower(), _ids_in(parts[2], known)
    first, then = (left, right) if word == "before" else (right, left)
    return [(item, first) for item in then] if first else []


# A heading over what waits for what, and nothing else (spec-kit's `## Dependencies &
# Execution Order`, `## Dependencies`): not `## Update dependencies` or `## Dependency upgrades`.
ORDER_HEADING = re.compile(
    r"^\W*(?:task\s+)?(?:dependenc(?:y|ies)(?:\s*(?:&|and)\s*execution\s+order)?"
    r"|execution\s+order|dependency\s+order|order\s+of\s+work)\W*$",
    re.IGNORECASE,
)
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:\s+|$)(.*?)\s*$")  # its level, and its text
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_CHECKBOX_LINE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[[^\]]?\]")


def ordered_by_sections(
    items: list[WorkItem], lines: list[str], sections: list[tuple[int, int]]
) -> tuple[list[WorkItem], list[str]]:
    """`items` with what each dependencies section (`(level, line)` of its heading) says added
    to their dependencies (`T012 depends on T011`, `T008 blocks T009`, `Tests (T004-T007)
    before implementation (T008-T014)`), and a note of how many each section gave."""
    known = {item.id for item in items}
    declared = {item.id: set(item.depends_on) for item in items}
    extra: dict[str, list[str]] = {}
    notes: list[str] = []
    for level, start in sections:
        added = 0
        fenced = False
        for line0 in range(start + 1, len(lines)):
            line = lines[line0]
            if _FENCE.match(line):
                fenced = not fenced
            heading = None if fenced else _ATX.match(line)
            # The section ends at a heading of its level or above, or at any item heading.
            if heading and (len(heading.group(1)) <= level or heading_item_id(heading.group(2))):
                break
            if fenced or _CHECKBOX_LINE.match(line):  # code, or an item: no word on order
                continue
            for item_id, deps in order_line(line, known):
                had = declared[item_id] | set(extra.get(item_id, []))
                new = [d for d in dict.fromkeys(deps) if d != item_id and d not in had]
                extra.setdefault(item_id, []).extend(new)
                added += len(new)
        if added:
            word = "dependency" if added == 1 else "dependencies"
            notes.append(f"{added} {word} read from the section on line {start + 1}")
    ordered = [
        item.model_copy(
            update={"depends_on": tuple(dict.fromkeys([*item.depends_on, *extra[item.id]]))}
        )
        if item.id in extra
        else item
        for item in items
    ]
    return ordered, notes


def _ids_in(text: str, known: Container[str]) -> list[str]:
    """The plan's ids a piece of text names, ranges (`T004-T007`) spelt out."""
    found, _ = read_dependencies("", text, known)
    return found


def refuse_unmet(
    items: list[WorkItem],
    source: str,
    whole: str,
    *,
    error: type[HarnessError] = PlanRefused,
    hint: str = "",
) -> None:
    """Refuse items whose dependencies could never all be met, where no reader dropped the
    unknown ones first (a backlog, items added over the API): a dependency on an id no item
    of `whole` has, then a cycle. Kept, such an item waits for ever."""
    ids = {item.id for item in items}
    for item in items:
        missing = [dep for dep in item.depends_on if dep not in ids]
        if missing:
            raise error(
                f"{source}: item {item.id} depends on {_named(missing)}, which no item of "
                f"{whole} is, so it could never start{hint}"
            )
    refuse_cycles(items, source)


# The most ids a cycle is shown with: a cycle through 5,000 items was one line of 44 KB.
CYCLE_SHOWN = 12


def _shown_cycle(cycle: list[str]) -> str:
    """`T1 -> T2 -> T1`; a long one by its first and last steps and how many between."""
    if len(cycle) <= CYCLE_SHOWN:
        return " -> ".join(cycle)
    head, tail = cycle[: CYCLE_SHOWN // 2], cycle[-(CYCLE_SHOWN // 2) :]
    between = len(cycle) - len(head) - len(tail)
    return f"{' -> '.join(head)} -> … {between} more … -> {' -> '.join(tail)}"


def refuse_cycles(items: list[WorkItem], source: str) -> None:
    graph = {item.id: item.depends_on for item in items}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    for root in graph:
        if state.get(root):
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            node, child = stack.pop()
            if child == 0:
                state[node] = 1
                path.append(node)
            deps = graph.get(node, ())
            if child < len(deps):
                stack.append((node, child + 1))
                nxt = deps[child]
                if state.get(nxt) == 1:
                    cycle = [*path[path.index(nxt) :], nxt]
                    raise PlanRefused(f"{source}: dependency cycle {_shown_cycle(cycle)}")
                if not state.get(nxt):
                    stack.append((nxt, 0))
            else:
                state[node] = 2
                path.pop()


def prose_note(read: list[tuple[int, str]]) -> str:
    """How many of the items' sentences (`Depends on task 1.`; line, text) were read as what
    they wait for, quoting the first."""
    count, (line0, sentence) = len(read), min(read)
    return (
        f"dependencies read from {count} sentence{'s' if count > 1 else ''} in items' text "
        f"(line {line0 + 1}: '{sentence.strip()}'); a `depends on:` line says it plainly"
    )
