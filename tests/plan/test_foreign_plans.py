"""Plans written for other tools (spec-kit, ccpm, Taskmaster, a plain roadmap or PRD) come out
the way a careful reader would read them: items, dependencies, labels, milestones, or a plain
word that the file holds no items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.plan.markdown import parse_plan_file

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent / "fixtures"

PROSE = (
    "0 items; this looks like prose. Items are `### T1: ...` headings, "
    "`- [ ] T1 ...` checkboxes or table rows with an id column"
)


def test_spec_kit_tasks_keep_their_ids_markers_and_dependencies() -> None:
    plan = parse_plan_file(FIXTURES / "speckit-tasks.md")
    assert [item.id for item in plan.items] == [f"T{n:03d}" for n in range(1, 15)]
    assert [item.id for item in plan.items if item.done] == ["T001", "T002"]
    labels = {item.id: item.labels for item in plan.items if item.labels}
    assert labels == {
        "T003": ("parallel",),
        "T005": ("parallel",),
        "T006": ("parallel", "story:US1"),
        "T007": ("parallel", "story:US1"),
        "T008": ("parallel", "story:US1"),
        "T009": ("story:US1",),
        "T010": ("story:US1",),
        "T011": ("parallel", "story:US2"),
        "T012": ("story:US2",),
        "T013": ("parallel",),
    }
    deps = {item.id: item.depends_on for item in plan.items if item.depends_on}
    assert deps == {
        "T009": ("T004", "T008"),
        "T010": ("T009",),
        "T012": ("T009", "T011"),
        "T014": ("T010", "T012"),
    }
    assert plan.item("T009").title == "Implement LinkService in src/readinglist/services/links.py"
    assert plan.item("T006").title == (
        "Contract test for POST /links in tests/contract/test_save_link.py"
    )
    # spec-kit's phases are sections, not milestones.
    assert {item.milestone for item in plan.items} == {None}
    assert plan.unread == () and plan.notes == ()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-8-sig"])
def test_the_same_tasks_saved_by_a_windows_editor_read_the_same(
    tmp_path: Path, encoding: str
) -> None:
    text = (FIXTURES / "speckit-tasks.md").read_text(encoding="utf-8")
    data = text.replace("\n", "\r\n").encode(encoding)
    if encoding == "utf-16-be":
        data = "\ufeff".encode(encoding) + data
    saved = tmp_path / "tasks.md"
    saved.write_bytes(data)
    original = parse_plan_file(FIXTURES / "speckit-tasks.md")
    assert parse_plan_file(saved).items == original.items


def test_a_roadmap_of_milestones_gives_each_item_its_milestone() -> None:
    plan = parse_plan_file(FIXTURES / "roadmap-milestones.md")
    got = [(i.id, i.milestone, i.depends_on, i.labels, i.done) for i in plan.items]
    assert got == [
        ("HB-1", "M1: Foundations", (), (), True),
        ("HB-2", "M1: Foundations", ("HB-1",), (), False),
        ("HB-3", "M1: Foundations", ("HB-1",), ("config",), False),
        ("HB-4", "v0.1", ("HB-1", "HB-2"), (), False),
        ("HB-5", "v0.1", ("HB-1",), ("parallel",), False),
        ("HB-6", None, (), (), False),
    ]
    assert plan.item("HB-2").body == "" and plan.item("HB-5").title == (
        "Gzip responses for text types"
    )
    assert [(n.line, n.reason) for n in plan.unread] == [
        (
            23,
            "heading mentions a milestone but does not start with 'Milestone'; "
            "the items under it get no milestone from it",
        )
    ]


@pytest.mark.parametrize("name", ["ccpm-prd.md", "taskmaster-prd.txt", "taskmaster-task.md"])
def test_a_prd_says_it_holds_no_items(name: str) -> None:
    plan = parse_plan_file(FIXTURES / name)
    assert plan.items == () and plan.notes == (PROSE,)


def test_metadata_lines_of_a_taskmaster_task_file_are_reported_not_lost() -> None:
    plan = parse_plan_file(FIXTURES / "taskmaster-task.md")
    assert [(n.line, n.reason) for n in plan.unread] == [
        (5, "'Status:' line is outside any item"),
        (7, "'Dependencies:' line is outside any item"),
    ]


def test_the_plan_command_says_a_prd_holds_no_items(capsys: pytest.CaptureFixture[str]) -> None:
    prd = str(FIXTURES / "ccpm-prd.md")
    assert main(["plan", prd]) == 0
    shown = capsys.readouterr().out
    assert f"{prd}: {PROSE}" in " ".join(shown.split())
    assert "┃ id" not in shown  # no empty table of items
    assert main(["plan", prd, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["items"] == [] and data["notes"] == [PROSE]


def test_a_ccpm_epic_lists_its_numbered_tasks_as_lines_not_read() -> None:
    plan = parse_plan_file(FIXTURES / "ccpm-epic.md")
    assert plan.items == ()
    assert [(n.line, n.reason) for n in plan.unread] == [
        (line, "checkbox has no item id") for line in (23, 24, 25)
    ]
    assert plan.notes == (
        "0 items; 3 lines look like items but could not be read (each is listed with why). "
        "Items are `### T1: ...` headings, `- [ ] T1 ...` checkboxes or table rows with an "
        "id column",
    )
