"""Random markdown never makes the parser raise anything but HarnessError."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_harness.errors import HarnessError
from agent_harness.plan.markdown import parse_plan

pytestmark = pytest.mark.unit

FRAGMENTS = [
    "### T1: a",
    "## T2 — b",
    "# Milestone: M",
    "- [ ] T3 c",
    "- [x] T4",
    "  - depends on: T1",
    "depends on: T2, T9",
    "labels: x, y",
    "check: `pytest`",
    "owner: me",
    "| id | title |",
    "|---|---|",
    "| T5 | e |",
    "|  | f |",
    "```",
    "<div>",
    "</div>",
    "---",
    "> - [ ] T6 q",
    "1. [ ] T7 ordered",
    "    - [ ] T8 code",
    "",
    "text: with colon",
    "- [ ]",
    "\t- [ ] T1 tab",
    "milestone:",
    "### T1.",
    "* [X] AUTH-3 x",
    "\r",
    "\ufeff",
    "## Milestone M1: Foundations",
    "## Milestone",
    "### Milestones",
    "## Notes on the milestone",
    "- [ ] T001 [P] [US1] Create model in src/models/user.py",
    "- [X] T002 [US2] x (depends on T001, T9)",
    "- [ ] T3 [T1] y (depends on nothing)",
    "  depends on: T1",
    "  check: `make`",
    "| T6 | [P] row (blocked by T5) |",
]

line = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line, max_size=40))
def test_parser_only_raises_harness_errors_and_lines_are_inside(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        plan = parse_plan(text)
    except HarnessError:
        return
    total = text.replace("\r\n", "\n").replace("\r", "\n").count("\n") + 1
    for item in plan.items:
        assert 1 <= item.line <= total
        assert item.id and item.title
    for notice in plan.unread:
        assert 1 <= notice.line <= total


@dataclass(frozen=True)
class Task:
    """One task of a generated spec-kit style plan, and what the parser should make of it."""

    number: int
    done: bool
    parallel: bool
    story: int | None
    deps: tuple[int, ...]
    nested_deps: bool  # the dependencies on a `depends on:` line under the box, not the title
    words: str

    @property
    def id(self) -> str:
        return f"T{self.number:03d}"

    def lines(self) -> list[str]:
        markers = ("[P] " if self.parallel else "") + (
            f"[US{self.story}] " if self.story is not None else ""
        )
        dep_ids = ", ".join(f"T{n:03d}" for n in self.deps)
        trailing = f" (depends on {dep_ids})" if self.deps and not self.nested_deps else ""
        box = "[X]" if self.done else "[ ]"
        out = [f"- {box} {self.id} {markers}{self.words}{trailing}"]
        if self.deps and self.nested_deps:
            out.append(f"  depends on: {dep_ids}")
        return out

    @property
    def labels(self) -> tuple[str, ...]:
        story = (f"story:US{self.story}",) if self.story is not None else ()
        return ("parallel",) * self.parallel + story


# Words start with a letter: a separator right after the id (`T1. Title`) is the id's own.
WORDS = st.builds(
    lambda first, rest: (first + rest).rstrip(),
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz /.", max_size=24),
)


@st.composite
def tasks_with_milestones(draw: st.DrawFn) -> tuple[list[str], list[tuple[Task, str | None]]]:
    """A spec-kit style plan: milestone headings (or other headings) over checkbox tasks with
    markers and dependencies on earlier tasks, written at the end of the line or under it."""
    lines: list[str] = []
    expected: list[tuple[Task, str | None]] = []
    milestone: str | None = None
    for number in range(1, draw(st.integers(1, 12)) + 1):
        if draw(st.integers(0, 3)) == 0:
            if draw(st.booleans()):
                milestone = f"M{number}: {draw(WORDS)}"
                lines += ["", f"## Milestone {milestone}", ""]
            else:
                milestone = None
                lines += ["", f"## Phase {number}: {draw(WORDS)}", ""]
        earlier = list(range(1, number))
        deps = tuple(sorted(draw(st.sets(st.sampled_from(earlier), max_size=3)))) if earlier else ()
        task = Task(
            number,
            draw(st.booleans()),
            draw(st.booleans()),
            draw(st.none() | st.integers(1, 9)),
            deps,
            draw(st.booleans()),
            draw(WORDS),
        )
        lines += task.lines()
        expected.append((task, milestone))
    return lines, expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks_with_milestones())
def test_generated_spec_kit_plans_come_out_as_written(
    plan: tuple[list[str], list[tuple[Task, str | None]]],
) -> None:
    lines, expected = plan
    parsed = parse_plan("\n".join(lines) + "\n")
    got = [(i.id, i.title, i.labels, i.depends_on, i.milestone, i.done) for i in parsed.items]
    want = [
        (t.id, t.words, t.labels, tuple(f"T{n:03d}" for n in t.deps), milestone, t.done)
        for t, milestone in expected
    ]
    assert got == want
    assert parsed.unread == () and parsed.notes == ()
