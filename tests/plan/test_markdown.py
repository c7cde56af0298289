"""The plan parser: what a person writing a plan sees come out of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.errors import InputError, PlanRefused
from agent_harness.plan.markdown import parse_plan, parse_plan_file
from agent_harness.plan.model import check_command

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "PLAN.md"


def ids(text: str) -> list[str]:
    return [item.id for item in parse_plan(text).items]


def test_example_plan_items_dependencies_and_report() -> None:
    plan = parse_plan_file(EXAMPLE)
    assert [i.id for i in plan.items] == ["T1", "T2", "T3", "T4", "T5", "T6", "T7"]
    assert plan.item("T5").depends_on == ("T1", "T2", "T4")
    assert plan.item("T4").depends_on == ("T1",)
    assert plan.item("T3").done is True
    assert plan.item("T1").milestone == "v0.1 — counting"
    assert plan.item("T5").milestone == "v0.2 — reporting"
    assert plan.item("T1").files == ("tally/words.py", "tests/test_words.py")
    assert {i.form for i in plan.items} == {"heading", "checkbox", "table"}
    assert [n.reason for n in plan.unread] == ["checkbox has no item id"]
    assert [i.id for i in plan.without_check] == ["T6"]


@pytest.mark.parametrize(
    "heading",
    [
        "### T1: Title here",
        "### T1 — Title here",
        "### T1. Title here",
        "# T1 - Title here",
        "###### [T1] Title here",
        "## **T1**: Title here",
    ],
)
def test_heading_forms(heading: str) -> None:
    plan = parse_plan(f"{heading}\n\nbody\n")
    assert [(i.id, i.title, i.form) for i in plan.items] == [("T1", "Title here", "heading")]


@pytest.mark.parametrize("item_id", ["T1", "T001", "AUTH-3", "API_V2-10"])
def test_id_shapes(item_id: str) -> None:
    assert ids(f"- [ ] {item_id} Do it\n") == [item_id]


def test_plain_headings_are_not_items_but_lookalikes_are_reported() -> None:
    plan = parse_plan("## Overview\n\n## Q3 goals\n\n### T1: real\n")
    assert [i.id for i in plan.items] == ["T1"]
    assert [n.line for n in plan.unread] == [3]
    assert "Q3" in plan.unread[0].reason


def test_body_runs_to_next_item_or_same_level_heading() -> None:
    text = "## T1: First\npara one\n\n### detail\nstill T1\n\n## Appendix\nnot T1\n"
    item = parse_plan(text).item("T1")
    assert "still T1" in item.body and "not T1" not in item.body


def test_metadata_lines_become_fields_and_leave_the_body() -> None:
    text = (
        "### T2: Thing\n"
        "Do the thing.\n\n"
        "**Labels:** a, `b`, a\n"
        "Milestone: M1\n"
        "Depends on: T1\n"
        "Acceptance: `make test` exits 0\n\n"
        "### T1: Base\n"
    )
    item = parse_plan(text).item("T2")
    assert item.labels == ("a", "b")
    assert item.milestone == "M1"
    assert item.depends_on == ("T1",)
    assert item.success_check == "`make test` exits 0"
    assert check_command(item.success_check) is None
    assert item.body == "Do the thing."


def test_checkbox_items_done_and_nested_metadata() -> None:
    text = "- [x] T1 Done already\n- [ ] T2: Next\n  - depends on: T1\n  - check: `pytest`\n"
    plan = parse_plan(text)
    assert plan.item("T1").done and not plan.item("T2").done
    assert plan.item("T2").depends_on == ("T1",)
    assert plan.item("T2").success_check == "`pytest`"
    assert check_command(plan.item("T2").success_check) == "pytest"


def test_nested_checkbox_items_are_separate_items() -> None:
    text = "- [ ] T1 Parent\n  - [ ] T2 Child\n  - [ ] a plain subtask\n"
    plan = parse_plan(text)
    assert [i.id for i in plan.items] == ["T1", "T2"]
    # The plain subtask follows T2 but lies outside T2's list item, so no body owns it:
    # it is reported rather than silently folded into T1.
    assert [(n.line, n.reason) for n in plan.unread] == [(3, "checkbox has no item id")]


def test_subtask_checkboxes_inside_an_item_are_body_not_errors() -> None:
    text = "### T1: Thing\n\n- [ ] write it\n- [x] test it\n"
    plan = parse_plan(text)
    assert plan.unread == ()
    assert "- [ ] write it" in plan.item("T1").body


def test_table_items_with_columns() -> None:
    text = (
        "| ID | Title | Labels | Milestone | Depends on | Check | Owner |\n"
        "|----|-------|--------|-----------|------------|-------|-------|\n"
        "| T1 | One | a, b | M1 | | `pytest` | me |\n"
        "| T2 | Two | | | T1 | | you |\n"
        "|    | Nobody | | | | | |\n"
        "| nope | Bad id | | | | | |\n"
    )
    plan = parse_plan(text)
    assert [(i.id, i.title) for i in plan.items] == [("T1", "One"), ("T2", "Two")]
    assert plan.item("T1").labels == ("a", "b") and plan.item("T1").milestone == "M1"
    assert plan.item("T2").depends_on == ("T1",)
    reasons = {n.line: n.reason for n in plan.unread}
    assert reasons[1].startswith("unknown table column")
    assert reasons[5] == "table row has an empty id cell"
    assert "not an item id" in reasons[6]


def test_tables_without_id_column_are_body_text() -> None:
    plan = parse_plan("### T1: x\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert [i.id for i in plan.items] == ["T1"] and "| 1 | 2 |" in plan.item("T1").body


def test_code_fences_and_html_never_hold_items() -> None:
    text = (
        "```\n- [ ] T9 inside a fence\n### T8: also inside\n```\n\n"
        "<div>\n- [ ] T7 html block\n</div>\n\n"
        "    - [ ] T6 indented code\n\n"
        "- [ ] T1 real\n"
    )
    assert ids(text) == ["T1"]


def test_unread_report_has_line_numbers_and_reasons() -> None:
    text = (
        "### T1: one\n"  # 1
        "depends on: T99\n"  # 2
        "owner: bob\n"  # 3
        "\n"
        "- [ ] no id\n"  # 5
        "\n"
        "labels: stray\n"  # 7
        "\n"
        "## Section\n"  # 9
        "labels: outside\n"  # 10
    )
    plan = parse_plan(text)
    got = [(n.line, n.reason) for n in plan.unread]
    assert (2, "T1 depends on unknown item T99; dependency ignored") in got
    assert (3, "unknown metadata key 'owner'") in got
    assert (10, "'labels:' line is outside any item") in got
    assert plan.item("T1").depends_on == ()


def test_duplicate_id_is_refused_naming_both_lines() -> None:
    with pytest.raises(PlanRefused, match=r"T1 is used twice \(lines 1 and 4\)"):
        parse_plan("### T1: a\n\nx\n- [ ] T1 again\n")


def test_dependency_cycle_is_refused_naming_the_cycle() -> None:
    text = (
        "- [ ] T1 a\n  - depends on: T3\n"
        "- [ ] T2 b\n  - depends on: T1\n"
        "- [ ] T3 c\n  - depends on: T2\n"
    )
    with pytest.raises(PlanRefused, match=r"cycle T1 -> T3 -> T2 -> T1"):
        parse_plan(text)


def test_self_dependency_is_a_cycle() -> None:
    with pytest.raises(PlanRefused, match="T1 -> T1"):
        parse_plan("- [ ] T1 a\n  - depends on: T1\n")


def test_hash_changes_with_content_not_with_position() -> None:
    a = parse_plan("### T1: One\nbody\n\n### T2: Two\nother\n")
    b = parse_plan("# Preface\n\nintro\n\n### T2: Two\nother\n\n### T1: One\nbody\n")
    c = parse_plan("### T1: One edited\nbody\n\n### T2: Two\nother\n")
    assert a.item("T1").content_hash == b.item("T1").content_hash
    assert a.item("T1").line != b.item("T1").line
    assert a.item("T1").content_hash != c.item("T1").content_hash
    assert a.item("T2").content_hash == c.item("T2").content_hash


def test_crlf_bom_and_front_matter_keep_line_numbers() -> None:
    text = "\ufeff---\r\ntitle: x\r\n---\r\n\r\n### T1: One\r\nlabels: a\r\n"
    plan = parse_plan(text)
    assert plan.item("T1").line == 5
    assert plan.item("T1").labels == ("a",)
    assert plan.item("T1").title == "One"


def test_milestone_section_rule_and_item_override() -> None:
    text = (
        "## Milestone: Beta\n\n### T1: a\n\n### T2: b\nmilestone: Gamma\n\n"
        "## Other section\n\n### T3: c\n"
    )
    plan = parse_plan(text)
    assert [plan.item(i).milestone for i in ("T1", "T2", "T3")] == ["Beta", "Gamma", None]


def test_acceptance_status_done_and_dependency_noise() -> None:
    text = "### T1: a\nstatus: done\n\n### T2: b\ndepends on: T1 and maybe later\n"
    plan = parse_plan(text)
    assert plan.item("T1").done
    assert plan.item("T2").depends_on == ("T1",)
    assert any("could not read dependency 'maybe later'" in n.reason for n in plan.unread)


def test_empty_plan_has_no_items() -> None:
    plan = parse_plan("")
    assert plan.items == () and plan.unread == ()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01binary", "looks like a binary file"),
        (b"### T1: caf\xe9\n", "not UTF-8 text (byte 0xe9 at offset 11)"),
    ],
)
def test_unreadable_files_are_one_line_errors(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "plan.md"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_plan_file(path)


def test_missing_file_directory_and_huge_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="plan file not found"):
        parse_plan_file(tmp_path / "nope.md")
    with pytest.raises(InputError, match="is a directory"):
        parse_plan_file(tmp_path)
    big = tmp_path / "big.md"
    with big.open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    with pytest.raises(InputError, match=r"50\.0 MB"):
        parse_plan_file(big)
