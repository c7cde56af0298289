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


def test_a_long_cycle_is_named_by_its_ends_in_a_short_line() -> None:
    # A cycle through 5,000 items was refused in one line of 44 KB.
    text = "".join(
        f"- [ ] T{n} x\n  - depends on: T{n - 1 if n > 1 else 5000}\n" for n in range(1, 5001)
    )
    with pytest.raises(PlanRefused) as refused:
        parse_plan(text)
    said = refused.value.message
    assert len(said) < 200 and "T1 -> T5000 -> T4999" in said and "… 4989 more …" in said
    assert said.endswith("T3 -> T2 -> T1")


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


def test_empty_plan_has_no_items_and_says_it_is_empty() -> None:
    plan = parse_plan("")
    assert plan.items == () and plan.unread == ()
    # It said "no work items found", as if the file held something.
    assert plan.notes == parse_plan("\n \n").notes == ("the file is empty",)


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


@pytest.mark.parametrize(
    ("heading", "milestone"),
    [
        ("## Milestone M1: Foundations", "M1: Foundations"),
        ("## Milestone: v0.1", "v0.1"),
        ("## Milestone — Beta", "Beta"),
        ("## Milestone - Beta", "Beta"),
        ("# MILESTONE 2", "2"),
        ("## **Milestone:** v0.3", "v0.3"),
    ],
)
def test_a_heading_starting_with_milestone_names_the_milestone(
    heading: str, milestone: str
) -> None:
    plan = parse_plan(f"{heading}\n\n- [ ] T1 a\n\n### T2: b\n")
    assert [item.milestone for item in plan.items] == [milestone, milestone]
    assert plan.unread == ()


def test_a_milestone_lasts_until_the_next_heading_at_its_level_or_above() -> None:
    text = (
        "## Milestone M1: Foundations\n\n"  # 1
        "### Storage\n\n"  # 3
        "- [ ] T1 a\n\n"  # 5
        "#### Details\n\n"  # 7
        "- [ ] T2 b\n\n"  # 9
        "## Later work\n\n"  # 11
        "- [ ] T3 c\n"  # 13
    )
    plan = parse_plan(text)
    assert [item.milestone for item in plan.items] == ["M1: Foundations"] * 2 + [None]
    assert plan.unread == ()


@pytest.mark.parametrize(
    ("heading", "reason"),
    [
        ("## Milestone-based planning", "heading mentions a milestone but does not start with"),
        ("## Notes for the beta milestone", "heading mentions a milestone but does not start with"),
        ("## Milestone", "milestone heading has no name"),
        ("## Milestone:", "milestone heading has no name"),
    ],
)
def test_headings_that_speak_of_a_milestone_but_name_none_are_reported(
    heading: str, reason: str
) -> None:
    plan = parse_plan(f"## Milestone: Old\n\n{heading}\n\n- [ ] T1 a\n")
    assert plan.item("T1").milestone is None
    assert [(n.line, n.reason.startswith(reason)) for n in plan.unread] == [(3, True)]


@pytest.mark.parametrize("heading", ["## Phase 1: Setup", "## Milestones"])
def test_other_headings_are_no_milestone_and_stay_quiet(heading: str) -> None:
    plan = parse_plan(f"{heading}\n\n- [ ] T1 a\n")
    assert plan.item("T1").milestone is None and plan.unread == ()


@pytest.mark.parametrize(
    "text",
    [
        "## M1 — Foundations\n\n### T1: a\n\nDo a.\n\n### T2: b\n\ndepends on: M1\n",
        "## P0: Must have\n\n- [ ] T1 a\n- [ ] T2 b (depends on P0)\n",
        "# Roadmap\n\n## V1: Launch\n- [ ] T1 a\n- [ ] T2 b\n  depends on: V1\n",
    ],
)
def test_a_heading_whose_section_holds_items_is_their_section_not_an_item(text: str) -> None:
    plan = parse_plan(text)
    assert [i.id for i in plan.items] == ["T1", "T2"]  # no issue titled "Foundations"
    [notice] = plan.unread
    assert "holds items of its own (T1, T2); read as their section, not as an item" in notice.reason
    assert plan.item("T2").depends_on == ("T1",)  # on the section: on each of its items


@pytest.mark.parametrize(
    "title", ["# PROJ-1234: Migrate billing to Stripe", "# ADR-7: Move billing to Stripe"]
)
def test_a_documents_title_over_all_its_items_is_no_item_even_with_words_of_its_own(
    title: str,
) -> None:
    # It was an item: an agent set the whole plan, beside the agents doing its parts.
    plan = parse_plan(
        f"{title}\n\nContext: we pay too much.\n\n## Tasks\n\n"
        "- [ ] T1 Add the client\n- [ ] T2 Move the hooks\n"
    )
    assert [i.id for i in plan.items] == ["T1", "T2"]
    [notice] = plan.unread
    assert notice.line == 1
    assert "is the document's title over every item (T1, T2); read as their section" in (
        notice.reason
    )


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        # Not the title over all: an item of the same name, one of two top headings, one under.
        ("# T1: Billing\n\nAll of it.\n\n## T2: The client\n\nDo it.\n", ["T1", "T2"]),
        (
            "# PROJ-1: Billing\n\nAll of it.\n\n- [ ] T2 a\n\n# PROJ-2: Reports\n\nThem.\n",
            ["PROJ-1", "T2", "PROJ-2"],
        ),
        (
            "- [ ] T1 first\n\n# PROJ-1: Billing\n\nAll of it.\n\n- [ ] T2 a\n",
            ["T1", "PROJ-1", "T2"],
        ),
        ("## PROJ-1: Billing\n\nAll of it.\n\n- [ ] T2 a\n", ["PROJ-1", "T2"]),
    ],
)
def test_a_top_heading_with_words_of_its_own_stays_an_item_unless_it_titles_the_whole_plan(
    text: str, ids: list[str]
) -> None:
    plan = parse_plan(text)
    assert [i.id for i in plan.items] == ids
    assert plan.unread == ()


def test_a_heading_item_with_words_of_its_own_stays_an_item_beside_the_checkboxes() -> None:
    plan = parse_plan("### T1: Schema\n\nMake it.\n\n- [ ] T2 Use it (depends on T1)\n")
    assert [(i.id, i.depends_on) for i in plan.items] == [("T1", ()), ("T2", ("T1",))]
    assert plan.unread == ()


def test_an_item_heading_at_a_milestones_level_ends_it_and_says_so() -> None:
    plan = parse_plan("## Milestone: v0.1\n\n## T1: a\n\n### Milestone: v0.2\n\n# T2: b\n")
    assert [item.milestone for item in plan.items] == [None, None]
    assert [(n.line, n.reason) for n in plan.unread] == [
        (
            1,
            "milestone 'v0.1' has no items: the item heading T1 on line 3 is at its level "
            "and ends it (give the items a deeper heading)",
        ),
        (
            5,
            "milestone 'v0.2' has no items: the item heading T2 on line 7 is above it "
            "and ends it (give the items a deeper heading)",
        ),
    ]


def test_a_milestone_that_held_items_ends_quietly_at_an_item_heading() -> None:
    plan = parse_plan("## Milestone: v0.1\n\n- [ ] T1 a\n\n## T2: b\n")
    assert [item.milestone for item in plan.items] == ["v0.1", None]
    assert plan.unread == ()


@pytest.mark.parametrize(
    ("title", "deps"),
    [
        ("Build it (depends on T1, T2)", ("T1", "T2")),
        ("Build it (Depends on: T2)", ("T2",)),
        ("Build it (blocked by T1)", ("T1",)),
        ("Build it (deps: T2)", ("T2",)),
        ("Build it (depends on T1 and T2)", ("T1", "T2")),
    ],
)
def test_a_dependency_at_the_end_of_an_item_line_is_a_dependency(
    title: str, deps: tuple[str, ...]
) -> None:
    text = f"- [ ] T1 a\n- [ ] T2 b\n- [ ] T3 {title}\n\n### T4: {title}\n"
    plan = parse_plan(text)
    for item_id in ("T3", "T4"):
        assert (plan.item(item_id).title, plan.item(item_id).depends_on) == ("Build it", deps)
    assert plan.unread == ()


@pytest.mark.parametrize(
    "title",
    [
        "Build it (see T1 notes)",
        "Build it (after lunch)",
        "Use (requires TLS13)",  # `(after T1)`, naming an item, is a dependency: test_near_items
    ],
)
def test_a_closing_parenthesis_that_is_no_dependency_stays_in_the_title(title: str) -> None:
    plan = parse_plan(f"- [ ] T1 a\n- [ ] T2 {title}\n")
    assert (plan.item("T2").title, plan.item("T2").depends_on) == (title, ())


def test_words_in_a_trailing_dependency_that_are_not_ids_are_reported() -> None:
    plan = parse_plan("- [ ] T1 a\n- [ ] T2 b (depends on T1 and the auth story)\n")
    assert plan.item("T2").depends_on == ("T1",)
    assert [(n.line, n.reason) for n in plan.unread] == [
        (2, "could not read dependency 'the auth story' of T2")
    ]


def test_trailing_and_nested_dependencies_add_up() -> None:
    text = "- [ ] T1 a\n- [ ] T2 b\n- [ ] T3 c (depends on T1)\n  - depends on: T2, T1\n"
    assert parse_plan(text).item("T3").depends_on == ("T1", "T2")


@pytest.mark.parametrize(
    "text",
    [
        "- [ ] T1 a\n- [ ] T2 b\n  depends on: T1\n  check: `make`\n",
        "- [ ] T1 a\n- [ ] T2 b\n  Depends on: T1\n  check: `make`\n\n  More words.\n",
        "- [ ] T1 a\n* [ ] T2: b\n  **Depends on:** T1\n  check: `make`\n",
    ],
)
def test_a_depends_on_line_right_under_a_checkbox_is_read(text: str) -> None:
    item = parse_plan(text).item("T2")
    assert (item.title, item.depends_on, item.success_check) == ("b", ("T1",), "`make`")
    assert "epends" not in item.body and "check" not in item.body


def test_prose_right_under_a_checkbox_stays_in_its_body() -> None:
    item = parse_plan("- [ ] T1 a\n  Note: the old API is gone\n").item("T1")
    assert item.body == "Note: the old API is gone" and item.depends_on == ()


@pytest.mark.parametrize(
    ("line", "title", "labels"),
    [
        (
            "- [ ] T001 [P] [US1] Create model in src/models/user.py",
            "Create model in src/models/user.py",
            ("parallel", "story:US1"),
        ),
        ("- [ ] T001 [US12] Wire it up", "Wire it up", ("story:US12",)),
        ("- [x] T001 [P] Lint", "Lint", ("parallel",)),
        ("### T001: [P] [US2] Heading form", "Heading form", ("parallel", "story:US2")),
        ("- [ ] T001 [backend] [P] Other markers", "Other markers", ("backend", "parallel")),
        ("- [ ] T001 [T3] An id is no marker", "[T3] An id is no marker", ()),
        ("- [ ] T001 Mid-title [P] stays", "Mid-title [P] stays", ()),
    ],
)
def test_bracketed_markers_at_the_start_of_a_title_become_labels(
    line: str, title: str, labels: tuple[str, ...]
) -> None:
    item = parse_plan(line + "\n").item("T001")
    assert (item.title, item.labels) == (title, labels)


def test_title_markers_come_before_the_labels_line_and_table_titles_have_them_too() -> None:
    plan = parse_plan(
        "- [ ] T1 [P] a\n  - labels: core, parallel\n\n"
        "| id | title |\n|---|---|\n| T2 | [US3] table row (depends on T1) |\n"
    )
    assert plan.item("T1").labels == ("parallel", "core")
    assert (plan.item("T2").title, plan.item("T2").labels) == ("table row", ("story:US3",))
    assert plan.item("T2").depends_on == ("T1",)


PROSE = (
    "0 items; this looks like prose. Items are `### T1: ...` headings, "
    "`- [ ] T1 ...` checkboxes or table rows with an id column"
)


def test_a_file_of_prose_says_it_holds_no_items() -> None:
    plan = parse_plan("# Vision\n\nWe want a faster build.\n\n## Goals\n\n- speed\n")
    assert plan.items == () and plan.notes == (PROSE,)
    assert parse_plan("- [ ] T1 a\n\nprose\n").notes == ()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "# Plan\n\n## Task 1: Set up repo\n\nDo it.\n\n## Task 2: Add CI\n",
            "0 items; 2 headings number their tasks instead of naming them with ids (line 3: "
            "`## Task 1: Set up repo`): write `### T1: Set up repo`",
        ),
        (
            "## 1. Set up\n",
            "0 items; 1 heading numbers its task instead of naming it with an id (line 1: "
            "`## 1. Set up`): write `### T1: Set up`",
        ),
    ],
)
def test_a_plan_of_numbered_headings_is_told_how_to_name_them_not_called_prose(
    text: str, said: str
) -> None:
    # A common shape in plans a model writes; it read "0 items; this looks like prose".
    plan = parse_plan(text)
    assert plan.items == () and plan.notes == (f"{said}. {PROSE.split('. ', 1)[1]}",)
    # What `run` and a sync say of a plan with no items names the form too.
    from agent_harness.plan.ids import no_items_message

    assert no_items_message(plan).startswith(
        f"<string> has no items: {said.removeprefix('0 items; ')}"
    )
    # Where items are read, numbered headings are sections, not lookalikes.
    assert parse_plan("## Phase 1: Setup\n\n- [ ] T1 a\n").notes == ()


def test_a_file_whose_items_all_fail_to_read_says_so_rather_than_prose() -> None:
    plan = parse_plan("# Tasks\n\n- [ ] do a\n- [ ] t2 do b\n")
    assert plan.notes == (
        "0 items; 2 lines look like items but could not be read (each is listed with why). "
        "Items are `### T1: ...` headings, `- [ ] T1 ...` checkboxes or table rows with an "
        "id column",
    )


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig", "utf-32"])
def test_text_with_a_byte_order_mark_is_read_in_its_encoding(tmp_path: Path, encoding: str) -> None:
    text = (
        "# Plan\r\n\r\n### T1: Café crème\r\nlabels: ü\r\n\r\n- [ ] T2 Ölfass (depends on T1)\r\n"
    )
    data = text.encode(encoding)
    if encoding in ("utf-16-le", "utf-16-be"):
        data = "\ufeff".encode(encoding) + data  # these codecs write no mark of their own
    path = tmp_path / "plan.md"
    path.write_bytes(data)
    plan = parse_plan_file(path)
    assert [(i.id, i.title, i.line) for i in plan.items] == [
        ("T1", "Café crème", 3),
        ("T2", "Ölfass", 6),
    ]
    assert plan.item("T1").labels == ("ü",) and plan.item("T2").depends_on == ("T1",)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe" + b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 40, "looks like a binary file"),
        (b"\xff\xfe" + "### T1: a\n".encode("utf-16-le") + b"\x00\xd8", "not UTF-16 text"),
        ("### T1: a\n".encode("utf-16-le"), "looks like UTF-16 text without a byte-order mark"),
        # Text beyond ASCII (an emoji, CJK, a right-to-left mark) was called binary.
        (
            "# Plan 🚀\n\n### T1: 中文 café \u200f\n".encode("utf-16-be"),
            "looks like UTF-16 text without a byte-order mark",
        ),
    ],
)
def test_binaries_behind_a_byte_order_mark_are_still_refused(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "plan.md"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        parse_plan_file(path)


def test_a_quote_holds_no_items_and_says_which_lines_looked_like_one() -> None:
    text = (
        "# Plan\n\n- [ ] T1 Real task\n\n"
        "> Write tasks like this:\n> - [ ] T7 Quoted task\n> ## T8: Quoted heading\n"
        "> > - [x] T9 Deeper\n> depends on: T1\n\n"
        "- [ ] T2 Another\n  > - [ ] T10 Quoted under an item\n  > - [ ] an example, no id\n"
    )
    plan = parse_plan(text, "PLAN.md")
    assert [item.id for item in plan.items] == ["T1", "T2"]
    assert plan.item("T1").depends_on == ()
    quoted = [(n.line, n.text) for n in plan.unread if "quote" in n.reason]
    assert quoted == [
        (6, "> - [ ] T7 Quoted task"),
        (7, "> ## T8: Quoted heading"),
        (8, "> > - [x] T9 Deeper"),
        (12, "> - [ ] T10 Quoted under an item"),
    ]


def test_an_inserted_spec_kit_id_is_named_and_a_dependency_on_it_is_not_kept_in_a_title() -> None:
    text = (
        "- [ ] T012 Service in src/services/user.py\n"
        "- [ ] T012a Add validation to the service (depends on T012)\n"
        "- [ ] T013 Endpoint (depends on T012a)\n"
    )
    plan = parse_plan(text, "tasks.md")
    assert [(item.id, item.title) for item in plan.items] == [
        ("T012", "Service in src/services/user.py"),
        ("T013", "Endpoint"),
    ]
    reasons = {n.line: n.reason for n in plan.unread}
    assert reasons == {
        2: "checkbox has no item id: 'T012a' is not one (an id ends in its number); "
        "give the task a number of its own",
        3: "could not read dependency 'T012a' of T013",
    }


def test_fields_in_a_quote_are_read_as_anywhere_and_a_quoted_table_is_no_items() -> None:
    text = (
        "- [ ] T1: Do X\n"
        "  > a note from the lead\n"
        "  Depends on: T2\n"  # a lazy line: markdown puts it in the quote above
        "- [ ] T2: Do Y\n"
        "  > Depends on: T3\n"
        "- [ ] T3: Do Z\n\n"
        "> | id | title |\n> |----|-------|\n> | T9 | an example row |\n"
    )
    plan = parse_plan(text, "PLAN.md")
    assert [(i.id, i.depends_on) for i in plan.items] == [
        ("T1", ("T2",)),
        ("T2", ("T3",)),
        ("T3", ()),
    ]


@pytest.mark.parametrize("check", ["` `", "``   ``", "`\t`"])
def test_a_blank_code_span_names_no_check_command(check: str) -> None:
    # A blank command exits 0 in a shell: such a check would pass without checking anything.
    assert check_command(check) is None


def test_titles_keep_what_rendering_would_drop() -> None:
    """An issue's title is shown as written: `__init__` is no bold "init", `<String>` no tag."""
    plan = parse_plan(
        "- [ ] T1 Move helpers into __init__.py\n"
        "- [ ] T2 Return Vec<String> from parse_args, not &str\n"
        "- [ ] T3 Handle a<b and c>d comparisons\n"
        "- [ ] T4 Link [the RFC](https://example.com/rfc) and <https://example.com/x>\n"
        "- [ ] T5 [README](README.md) needs an install section\n"
        "- [ ] T6 Add `--dry-run` to **deploy** and _escape_ \\*this\\*\n"
        "### T7: Port __main__.py to <details>\n"
        "\n| id | title |\n|----|-------|\n| T8 | Wrap a<b in __x__ |\n"
    )
    titles = {item.id: item.title for item in plan.items}
    assert titles == {
        "T1": "Move helpers into __init__.py",
        "T2": "Return Vec<String> from parse_args, not &str",
        "T3": "Handle a<b and c>d comparisons",
        "T4": "Link [the RFC](https://example.com/rfc) and https://example.com/x",
        "T5": "[README](README.md) needs an install section",
        "T6": "Add --dry-run to deploy and _escape_ *this*",
        "T7": "Port __main__.py to <details>",
        "T8": "Wrap a<b in __x__",
    }
    assert all(not item.labels for item in plan.items)  # `[README](…)` is no marker


def test_a_rule_on_the_first_line_is_no_front_matter_hiding_the_tasks_under_it() -> None:
    rule_first = (
        "---\n## Sprint 12\n- [ ] T1 Upgrade Django\n- [ ] T2 Drop /v0\n---\n- [ ] T3 Add a log\n"
    )
    assert ids(rule_first) == ["T1", "T2", "T3"]
    # Real front matter (a mapping of keys) is still not read, and line numbers stay true.
    front = "---\ntitle: Sprint 12\ntags: [infra]\nnote: '- [ ] T8 not a task'\n---\n- [ ] T1 x\n"
    plan = parse_plan(front)
    assert [(item.id, item.line) for item in plan.items] == [("T1", 6)]
    # Keys written loosely (`Plan: v2` is no YAML) are front matter all the same.
    loose = parse_plan("---\ntitle: Plan: v2\n---\n- [ ] T1 x\n")
    assert [item.id for item in loose.items] == ["T1"] and loose.unread == loose.notes == ()


@pytest.mark.parametrize(
    ("text", "items", "words"),
    [
        # A word written twice is no id used twice: the plan is read, not refused.
        (
            "- [ ] S3 bucket policy\n- [ ] EC2 instance sizing\n- [ ] S3 lifecycle rules\n"
            "- [ ] HTTP2 support in the proxy\n",
            [],
            ["S3", "EC2", "S3", "HTTP2"],
        ),
        # Beside a plan's own run of ids, a word twice is still a word, and only that.
        (
            "- [ ] T1 Add caching\n- [ ] T2 Add metrics\n- [ ] S3 bucket policy\n"
            "- [ ] S3 lifecycle rules\n- [ ] DOC1 write the readme\n",
            ["T1", "T2", "DOC1"],
            ["S3", "S3"],
        ),
        # Nothing says these are words: a plan of one, ids of two teams, a separator written.
        ("- [ ] T1 fix the login\n", ["T1"], []),
        ("- [ ] FE1 build the form\n- [ ] BE1 add the route\n", ["FE1", "BE1"], []),
        # A `depends on:` line naming one makes it an id, whatever its task says.
        (
            "- [ ] S3 a\n- [ ] S3 b\n- [ ] EC2 sizing\n- [ ] T9 c\n  depends on: EC2\n",
            ["EC2"],
            ["S3", "S3", "T9"],
        ),
        # An id another item waits for is an id (R1 was lost, and T2 ran at once).
        (
            "- [ ] R1 refactor auth\n- [ ] R1X2 tidy\n- [ ] R1X2 again\n"
            "- [ ] T2: add CI (after R1)\n",
            ["R1", "T2"],
            ["R1X2", "R1X2"],
        ),
        (
            "- [ ] T1 Add caching\n- [ ] T2 Add metrics\n- [ ] Q3: plan the offsite\n",
            ["T1", "T2", "Q3"],
            [],
        ),
    ],
)
def test_an_acronym_starting_a_task_is_a_word_when_the_plan_shows_it(
    text: str, items: list[str], words: list[str]
) -> None:
    plan = parse_plan(text)
    assert [item.id for item in plan.items] == items
    said = [n.reason.split("'")[1] for n in plan.unread if "reads as a word" in n.reason]
    assert said == words
    assert all("write `" in n.reason for n in plan.unread if "reads as a word" in n.reason)


def test_placeholders_statuses_and_unquoted_commands_are_said_not_taken_at_their_word() -> None:
    plan = parse_plan(
        "### T1: First\nfiles: N/A\nlabels: none\ncheck: TBD\n\n"
        "### T2: Second\nStatus: Blocked on legal review\ncheck: python -m pytest -q tests/x.py\n\n"
        "### T3: Third\nStatus: WIP\ncheck: `pytest -q`\n"
    )
    first, second, third = plan.items
    # A placeholder is no file called `N/A`, no label `none`, no check `TBD`.
    assert (first.files, first.labels, first.success_check) == ((), (), None)
    said = {(n.line, n.reason) for n in plan.unread}
    assert (2, "'files: N/A' holds a place: T1 gets no file list from it") in said
    assert (4, "'check: TBD' holds a place: T1 gets no success check from it") in said
    # A status that is neither done nor plainly open stays where the agent reads it, and is said.
    assert not second.done and second.body == "Status: Blocked on legal review"
    assert any(
        line == 7 and "'Blocked on legal review' is not read as done" in r for line, r in said
    )
    # A command without backticks is read by the reviewer, and never run: the plan says so.
    assert any(
        line == 8 and "reads like a command but is not in backticks" in r for line, r in said
    )
    # Plainly open, or a command in backticks: nothing to say.
    assert third.body == "" and not any(line >= 10 for line, _ in said)
    # However dressed: an emoji before it kept the line in the body, and every issue changed.
    dressed = parse_plan("### T1: x\nStatus: 🟡 In Progress\n\n### T2: y\nStatus: **Todo**\n")
    assert [i.body for i in dressed.items] == ["", ""] and dressed.unread == ()


def test_a_struck_checkbox_and_a_register_with_ids_but_no_titles_are_no_items() -> None:
    plan = parse_plan(
        "- [ ] T1 ~~Support IE11~~ (dropped)\n- [ ] ~~T2 Old approach~~\n- [x] T3 ~~Shipped~~\n"
        "- [ ] T4 Keep this\n\n"
        "| ID | Risk | Likelihood |\n|----|------|------------|\n| R1 | Costs | Medium |\n"
    )
    # Struck through, it was worked (or, without its id, numbered by --add-ids); a done one is
    # done either way.
    assert [(item.id, item.done) for item in plan.items] == [("T3", True), ("T4", False)]
    said = {n.line: n.reason for n in plan.unread}
    assert said[1] == said[2] == "checkbox is struck through (~~); not read as an item"
    # A risk register's rows were items R1, R2… titled by their ids alone.
    assert said[6].startswith("table has an id column but no title column")
    assert len(said) == 3


def test_characters_that_make_a_title_read_otherwise_are_left_out_and_said() -> None:
    plan = parse_plan(
        "- [ ] T1 Pay \u202einvoice\u202c now\n- [ ] T2 Zero\u200bwidth\n"
        "- [ ] T3 \u0625\u0636\u0627\u0641\u0629 and a family \U0001f468\u200d\U0001f469\n"
    )
    titles = {item.id: item.title for item in plan.items}
    assert titles["T1"] == "Pay invoice now" and titles["T2"] == "Zerowidth"
    # Right-to-left text and the joiner emoji need are no trick: kept, and nothing said.
    assert titles["T3"] == "\u0625\u0636\u0627\u0641\u0629 and a family \U0001f468\u200d\U0001f469"
    said = [(n.line, n.reason) for n in plan.unread]
    assert said == [
        (1, "T1's title held invisible or direction-changing characters (U+202C, U+202E); "
            "they are left out of it"),
        (2, "T2's title held invisible or direction-changing characters (U+200B); they are "
            "left out of it"),
    ]  # fmt: skip


def test_a_table_of_items_after_a_heading_item_is_no_part_of_its_body() -> None:
    plan = parse_plan(
        "### T3: Heading item\nSome text.\n\n| id | title |\n|----|-------|\n| T4 | Four |\n"
    )
    # Its body ended with the table's header and rule, the agent told to read them.
    assert plan.item("T3").body == "Some text."
    assert plan.item("T4").title == "Four"


def test_ids_written_in_a_link_or_emphasis_stay_ids_while_titles_keep_what_they_wrote() -> None:
    # Read from the text as written, these were lost: "id after '['", "no item id".
    plan = parse_plan(
        "- [ ] [T1](https://x/issues/1) do it\n- [ ] __T2__: do it\n- [ ] _T3_ Third\n\n"
        "| id | title | depends on | labels |\n|---|---|---|---|\n"
        "| [T4](https://x/issues/4) | Vec<String> | [T1](https://x/issues/1) | [ui](https://x) |\n"
    )
    assert [(i.id, i.title, i.depends_on, i.labels) for i in plan.items] == [
        ("T1", "do it", (), ()),
        ("T2", "do it", (), ()),
        ("T3", "Third", (), ()),
        ("T4", "Vec<String>", ("T1",), ("ui",)),
    ]
    assert plan.unread == ()


def test_the_colon_a_chinese_keyboard_types_separates_an_id_from_its_title() -> None:
    # `：` (U+FF1A): the heading was no item and no line was reported; the checkbox was
    # reported as having no id, and --add-ids would have written `T13 T4：…`.
    plan = parse_plan("### T1：全角冒号标题\nDo it.\n\n- [ ] T2：添加缓存层\n", "PLAN.md")
    assert [(i.id, i.title) for i in plan.items] == [("T1", "全角冒号标题"), ("T2", "添加缓存层")]
    assert plan.unread == ()


def test_a_task_numbered_heading_among_items_is_reported_not_dropped() -> None:
    # Read nowhere and said nowhere: the task never got an issue, and nobody was told.
    text = (
        "### T1: First\nx\n\n## Task 1: Create the schema\ny\n\n## Task 2: Backfill data\n\n"
        "## Phase 1: Setup\n\n## Step 1: install\n"
    )
    plan = parse_plan(text, "PLAN.md")
    assert [i.id for i in plan.items] == ["T1"]
    assert [(n.line, n.reason) for n in plan.unread] == [
        (4, "heading numbers its task instead of naming it with an id; write "
            "`### TASK-1: Create the schema` to make it an item"),
        (7, "heading numbers its task instead of naming it with an id; write "
            "`### T2: Backfill data` to make it an item"),
    ]  # fmt: skip


def test_an_html_comment_in_a_title_is_a_note_to_readers_not_part_of_the_title() -> None:
    plan = parse_plan("- [ ] T1 Add cache <!-- owner: dee -->\n### T2: Other <!-- x --> thing\n")
    assert [(i.id, i.title) for i in plan.items] == [("T1", "Add cache"), ("T2", "Other thing")]
    # HTML-like text that is no comment stays as written.
    assert parse_plan("### T3: Return Vec<String>\n").items[0].title == "Return Vec<String>"


def test_a_task_numbered_heading_over_items_names_their_group_and_is_not_reported() -> None:
    text = "## Task 1: Auth\n- [ ] T1 login\n- [ ] T2 logout\n\n## Task 2: Backfill\n\n### T3: X\n"
    plan = parse_plan(text, "PLAN.md")
    assert [i.id for i in plan.items] == ["T1", "T2", "T3"]
    assert [n.line for n in plan.unread] == [5]  # the one with no item under it


def test_a_dependency_on_an_issue_number_is_reported_not_kept_silently() -> None:
    plan = parse_plan("- [ ] T4 D (depends on #12)\n- [ ] T5 E (after #3 and #4)\n", "PLAN.md")
    assert [i.depends_on for i in plan.items] == [(), ()]
    assert [n.reason for n in plan.unread] == [
        "T4: a dependency on issue #12 is not read: a plan's items wait for items; name their "
        "ids (`depends on: T3`)",
        "T5: a dependency on issues #3 and #4 is not read: a plan's items wait for items; name "
        "their ids (`depends on: T3`)",
    ]
