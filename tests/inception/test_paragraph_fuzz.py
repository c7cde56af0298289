"""Any paragraph through the scripted planner ends in a plan the parser reads whole, or in one
clear line saying why not: never a crash, never a half-written plan."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_harness.errors import HarnessError
from agent_harness.inception.answers import accept_defaults
from agent_harness.plan.markdown import parse_plan
from tests.inception.conftest import Rig

pytestmark = pytest.mark.integration

WORDS = st.sampled_from(
    [
        "Add",
        "count",
        "words",
        "in",
        "src/app.py",
        "tests/test_app.py",
        "Leave",
        "README.md",
        "alone",
        "Should",
        "it",
        "fail?",
        "#",
        "- [ ]",
        "T1:",
        "check:",
        "depends on:",
        "|",
        "`code`",
        "Milestone:",
        "not",
        "\n\n",
        ".",
        "docs/guide.md",
        "[P]",
        "(depends on T2)",
    ]
)
PARAGRAPHS = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=40).map(" ".join),
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(paragraph=PARAGRAPHS)
def test_any_paragraph_gives_a_readable_plan_or_a_clear_error(rig: Rig, paragraph: str) -> None:
    try:
        session = rig.start(paragraph)
        session.propose_scope()
        accept_defaults(session)
        session.approve()
        view = session.plan()
    except HarnessError as exc:
        assert exc.message and "\n" not in exc.message
        return
    assert view.plan is not None
    plan = parse_plan(view.plan)
    assert plan.unread == ()
    assert tuple(item.id for item in plan.items) == view.items
    assert all(item.files and item.success_check and item.milestone for item in plan.items)
