"""Shapes of real plans other tools and people write, which a probe found misread: each is now
read as its author meant, or reported, never dropped in silence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.plan.backlog import load_plan
from agent_harness.plan.markdown import parse_plan

pytestmark = pytest.mark.unit


def test_kiros_in_progress_mark_and_its_cousins_are_open_tasks_not_dropped() -> None:
    plan = parse_plan(
        "- [x] 1. Set up project\n"
        "- [-] 2. Implement CSS\n"
        "  - [-] 2.1 Create custom properties\n"
        "  - [ ] 2.2 Build layout\n"
        "- [-] 3. Configure tooling\n"
        "- [ ] 4. Write docs\n"
    )
    assert [(i.id, i.done) for i in plan.items] == [
        ("1", True), ("2.1", False), ("2.2", False), ("3", False), ("4", False)
    ]  # fmt: skip
    named = parse_plan("- [/] T1 Half done\n- [~] T2 Started\n- [X] T3 Finished\n")
    assert [(i.id, i.done) for i in named.items] == [("T1", False), ("T2", False), ("T3", True)]


@pytest.mark.parametrize(
    "status", ["Done ✅", "✅ Done", "done.", "Done (2025-01-02)", "**Complete**", "completed"]
)
def test_every_way_people_write_done_is_done(status: str) -> None:
    plan = parse_plan(
        f"### T1: a\n\nstatus: {status}\n\n### T2: b\n\nstatus: not done\n\n"
        "### T3: c\n\nstatus: Done by Friday\n\n### T4: d\n\nstatus: Complete: 40%\n"
    )
    assert [(i.id, i.done) for i in plan.items] == [
        ("T1", True), ("T2", False), ("T3", False), ("T4", False)
    ]  # fmt: skip
    table = parse_plan(f"| ID | Title | Status |\n|---|---|---|\n| T1 | a | {status} |\n")
    assert table.item("T1").done


def test_a_table_without_a_title_column_is_titled_by_its_description() -> None:
    plan = parse_plan(
        "| ID | Description | Dependencies |\n|----|----|----|\n"
        "| T1 | Create schema | None |\n| T2 | Add endpoints | T1 |\n"
    )
    assert [(i.id, i.title, i.body, i.depends_on) for i in plan.items] == [
        ("T1", "Create schema", "", ()),
        ("T2", "Add endpoints", "", ("T1",)),
    ]
    assert plan.unread == ()


def test_words_in_a_dependency_line_that_name_no_item_are_reported() -> None:
    plan = parse_plan(
        "### T1: a\n\n### T2: b\n\ndepends on: T1, JWT\n\n### T3: c\n\ndepends on: DB\n"
    )
    assert plan.item("T2").depends_on == ("T1",)
    assert [(n.line, n.reason) for n in plan.unread] == [
        (5, "could not read dependency 'JWT' of T2"),
        (9, "could not read dependency 'DB' of T3"),
    ]


def test_a_range_of_ids_names_each_of_them() -> None:
    plan = parse_plan(
        "- [ ] T001 a\n- [ ] T002 b\n- [ ] T003 c\n- [ ] T004 d (depends on T001-T003)\n"
    )
    assert plan.item("T004").depends_on == ("T001", "T002", "T003")


@pytest.mark.parametrize(
    "line",
    [
        "- [ ] T002 Build it (Depends on T001).",
        "- [ ] T002 [P] Build it (depends on T001) [P]",
        "- [ ] T002 Build it (depends on T001) [US1]",
    ],
)
def test_a_closing_dependency_is_read_before_a_full_stop_or_a_marker(line: str) -> None:
    plan = parse_plan(f"- [ ] T001 First\n{line}\n")
    item = plan.item("T002")
    assert (item.title, item.depends_on) == ("Build it", ("T001",))


def test_one_marker_may_name_several_stories() -> None:
    plan = parse_plan("- [ ] T004 [US1,US2] Integration testing\n")
    item = plan.item("T004")
    assert (item.title, item.labels) == ("Integration testing", ("story:US1", "story:US2"))


def test_a_heading_marked_done_is_a_done_item_and_a_struck_one_is_reported() -> None:
    plan = parse_plan("### ✅ T12: Shipped\n\n### ~~T11: Dropped~~\n\n### T13: Open\n")
    assert [(i.id, i.done) for i in plan.items] == [("T12", True), ("T13", False)]
    assert [(n.line, n.reason) for n in plan.unread] == [
        (3, "heading is struck through (~~); not read as an item")
    ]


def test_numbered_tasks_depend_on_each_other_by_number() -> None:
    plan = parse_plan(
        "- [ ] 1. Set up\n- [ ] 2. Add endpoints\n  depends on: 1\n"
        "- [ ] 3. Document\n  depends on: 2, 1\n"
    )
    assert [(i.id, i.depends_on) for i in plan.items] == [
        ("1", ()),
        ("2", ("1",)),
        ("3", ("2", "1")),
    ]
    assert plan.unread == ()


def test_a_sentence_that_says_what_a_task_waits_for_is_read_when_it_names_the_plans_items() -> None:
    # Kiro's tasks and people say it in words, with no `depends on:` field: it was dropped.
    plan = parse_plan(
        "- [ ] 1. Set up\n  - Create the folders\n"
        "- [ ] 2. Add models\n  - Depends on task 1\n  - _Requirements: 2.1_\n"
        "- [ ] 3. Add the API\n  - This depends on tasks 1 and 2.\n"
        "- [ ] 4. Test it all (after task 3)\n"
    )
    assert [(i.id, i.depends_on, i.title) for i in plan.items] == [
        ("1", (), "Set up"),
        ("2", ("1",), "Add models"),
        ("3", ("1", "2"), "Add the API"),
        ("4", ("3",), "Test it all"),
    ]
    assert plan.items[1].body == "- Depends on task 1\n- _Requirements: 2.1_"  # kept for the agent
    assert plan.unread == ()
    assert plan.notes[-1] == (
        "dependencies read from 2 sentences in items' text (line 4: 'Depends on task 1'); "
        "a `depends on:` line says it plainly"
    )


def test_a_sentence_is_a_dependency_only_when_every_id_it_names_is_an_item() -> None:
    plan = parse_plan(
        "## T1: Schema\nMake it.\n\n"
        "## T2: API\nBuild it on the schema.\nDepends on T1.\nRequires TLS13\n"
        "After T1 lands, rebase.\n\n"
        "## T3: UI\n- Blocked by T2 and T9\n- needs the API key from ops\n"
    )
    assert [(i.id, i.depends_on) for i in plan.items] == [("T1", ()), ("T2", ("T1",)), ("T3", ())]
    assert "Requires TLS13" in plan.items[1].body
    assert plan.items[2].body == "- Blocked by T2 and T9\n- needs the API key from ops"
    assert plan.notes == (
        "dependencies read from 1 sentence in items' text (line 6: 'Depends on T1.'); "
        "a `depends on:` line says it plainly",
    )


def test_a_taskmaster_file_whose_only_tag_is_not_master_says_which_it_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.json"
    task = {"id": 1, "title": "Set up", "status": "pending", "dependencies": []}
    path.write_text(json.dumps({"feature-a": {"tasks": [task]}}))
    plan = load_plan(path)
    assert [i.id for i in plan.items] == ["1"]
    assert "Taskmaster tag feature-a read (the file's only tag)" in plan.notes


def test_a_todo_list_whose_lines_start_with_versions_is_no_numbered_plan() -> None:
    from agent_harness.plan.ids import add_ids

    text = "- [ ] 2.0 release blog post\n- [x] 3.14 rounding bug in totals\n- [ ] Update docs\n"
    plan = parse_plan(text)
    assert plan.items == () and [n.line for n in plan.unread] == [1, 2, 3]
    added = add_ids(text, "TODO.md")  # ... so --add-ids makes each line an item
    assert [(i.id, i.title, i.done) for i in added.plan.items] == [
        ("T1", "2.0 release blog post", False),
        ("T2", "3.14 rounding bug in totals", True),
        ("T3", "Update docs", False),
    ]


def test_a_title_wrapped_mid_phrase_onto_the_next_line_is_joined() -> None:
    plan = parse_plan(
        "- [ ] T001 Setup\n"
        "- [ ] T003 [P] Contract test POST /api/users in\n"
        "  tests/contract/test_users_post.py\n"
        "  depends on: T001\n"
        "- [ ] T004 Add login\n"
        "  Users sign in with email.\n"
        "- [ ] T005 Let users sign in\n"
        "  They use GitHub OAuth.\n"
    )
    wrapped, whole = plan.item("T003"), plan.item("T004")
    assert wrapped.title == "Contract test POST /api/users in tests/contract/test_users_post.py"
    assert (wrapped.body, wrapped.depends_on, wrapped.labels) == ("", ("T001",), ("parallel",))
    # A title that ends where a title may end keeps its next line as the body.
    assert (whole.title, whole.body) == ("Add login", "Users sign in with email.")
    signed = plan.item("T005")  # "in" ends a phrase here: its next line is the body
    assert (signed.title, signed.body) == ("Let users sign in", "They use GitHub OAuth.")


def test_a_heading_with_words_of_its_own_over_item_headings_stays_an_item() -> None:
    plan = parse_plan("### T0: Base\n\n## T1: Auth\n\ndepends on: T0\n\n### T2: Login\n")
    assert [(i.id, i.depends_on) for i in plan.items] == [("T0", ()), ("T1", ("T0",)), ("T2", ())]
    assert plan.unread == ()
