"""`demo --inception`'s loop: a paragraph through one BLOCKING question to PLAN.md, which the
parser reads whole, syncs to the embedded forge and the pipeline works into merged PRs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.demo.run import run_demo
from agent_harness.plan.markdown import parse_plan_file
from agent_harness.sessions.headless import HeadlessHost
from agent_harness.store.database import open_store
from agent_harness.store.events import ModelCall

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_paragraph_becomes_merged_pull_requests(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    steps: list[str] = []
    report = run_demo(
        workdir, step=steps.append, inception=True, host=HeadlessHost(tmp_path / "sessions")
    )
    assert report.inception is not None
    assert report.inception.refused.startswith("approval refused: 1 BLOCKING question")
    plan = parse_plan_file(workdir / "PLAN.md")
    assert plan.unread == () and [item.id for item in plan.items] == ["T1", "T2"]
    assert plan.item("T2").depends_on == ("T1",)
    assert [(len(s.created), len(s.unchanged)) for s in report.syncs] == [(2, 0), (0, 2)]
    assert sorted(item_id for item_id, _ in report.merged) == ["T1", "T2"]
    assert {row["state"] for row in report.final_items()} == {"merged"}
    store = open_store(f"sqlite:///{workdir / 'harness.sqlite'}")
    try:
        session = store.all_events(project=f"inception:{report.inception.session}")
    finally:
        store.close()
    kinds = [event.kind for event in session]
    assert kinds.count("inception.question") == 1 and "inception.planned" in kinds
    assert [e.payload.role for e in session if isinstance(e.payload, ModelCall)] == [
        "planner",
        "planner",
    ]
