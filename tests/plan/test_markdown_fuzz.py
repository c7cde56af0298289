"""Random markdown never makes the parser raise anything but HarnessError."""

from __future__ import annotations

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
