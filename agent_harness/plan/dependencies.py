"""What every plan reader says of dependencies: unknown ones reported, cycles refused."""

from __future__ import annotations

from collections.abc import Iterable

from agent_harness.errors import HarnessError, PlanRefused
from agent_harness.plan.model import WorkItem

# How many unknown dependency ids one notice names.
UNKNOWN_DEPS_SHOWN = 10


def lines_by_id(items: Iterable[WorkItem], source: str, noun: str) -> dict[str, int]:
    """Each item's line by its id; an id used twice is refused, naming both lines."""
    seen: dict[str, int] = {}
    for item in items:
        if item.id in seen:
            first, second = sorted((seen[item.id], item.line))
            raise PlanRefused(
                f"{source}: {noun} id {item.id} is used twice (lines {first} and {second})"
            )
        seen[item.id] = item.line
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
                    raise PlanRefused(f"{source}: dependency cycle {' -> '.join(cycle)}")
                if not state.get(nxt):
                    stack.append((nxt, 0))
            else:
                state[node] = 2
                path.pop()
