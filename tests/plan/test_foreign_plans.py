"""Plans written for other tools (spec-kit, ccpm, Taskmaster, a plain roadmap or PRD) come out
the way a careful reader would read them: items, dependencies, labels, milestones, or a plain
word that the file holds no items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.plan.markdown import parse_plan, parse_plan_file

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


def test_kiro_tasks_are_read_by_their_numbers_with_sub_tasks_as_the_items() -> None:
    plan = parse_plan_file(FIXTURES / "kiro-tasks.md")
    # 2 and 3 have sub-tasks (2's follow it, 3's are nested in it): the sub-tasks are the work.
    assert [(item.id, item.line) for item in plan.items] == [
        ("1", 3),
        ("2.1", 9),
        ("2.2", 13),
        ("3.1", 17),
        ("3.2", 19),
        ("4", 23),
    ]
    assert [item.id for item in plan.items if item.done] == ["1"]
    assert {item.id: item.labels for item in plan.items if item.labels} == {"2.2": ("optional",)}
    assert plan.item("3.2").title == "Add POST /links that saves one link"
    assert plan.item("3.2").body == (
        "Part of task 3: Serve the list over HTTP\n\n"
        "- Answer 400 with the reason for a bad url\n"
        "- _Requirements: 3.2, 2.1_"
    )
    assert plan.item("4").body == "- _Requirements: 4.1_"  # the requirements it serves, kept
    assert plan.unread == ()
    assert plan.notes == (
        "numbered tasks (as Kiro's tasks.md writes them) are read as items, their numbers as "
        "their ids",
        "tasks with sub-tasks (2, 3) are the sections of their sub-tasks, not items: each "
        "sub-task is worked on its own",
    )


def test_numbered_checkboxes_beside_named_items_are_not_items(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mixed = tmp_path / "PLAN.md"
    mixed.write_text(
        "### T1: Count words\n\n- [ ] 1. write the test first\n- [ ] 2. then the code\n\n"
        "## Later\n\n- [ ] 3. think about unicode\n"
    )
    plan = parse_plan_file(mixed)
    assert [item.id for item in plan.items] == ["T1"]
    assert "- [ ] 1. write the test first" in plan.item("T1").body  # its own steps
    assert [(n.line, n.reason) for n in plan.unread] == [(8, "checkbox has no item id")]
    assert plan.notes == ()
    # A number used twice is refused, as a named id is: a typo in a Kiro spec must not sync as
    # a plan with no items (every issue of it orphaned). A bare number is no task number.
    days = tmp_path / "tasks.md"
    days.write_text("- [ ] 1. Shop\n- [ ] 2. Cook\n- [ ] 2. Wash up\n- [ ] 3 eggs\n")
    assert main(["plan", str(days)]) == 3
    assert f"{days}: item id 2 is used twice (lines 2 and 3)" in capsys.readouterr().err
    days.write_text("- [ ] 1. Shop\n- [ ] 2. Cook\n- [ ] 3 eggs\n")
    assert [(n.line, n.reason) for n in parse_plan_file(days).unread] == [
        (3, "checkbox has no item id")
    ]


def test_the_plan_command_says_how_it_read_numbered_tasks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", str(FIXTURES / "kiro-tasks.md")]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "note: numbered tasks (as Kiro's tasks.md writes them) are read as items" in shown
    assert "6 items (1 done), 0 lines not read" in shown


def test_a_taskmaster_tasks_json_is_read_as_a_plan() -> None:
    from agent_harness.plan.backlog import load_plan

    plan = load_plan(FIXTURES / "taskmaster-tasks.json")
    # Task 2 has sub-tasks: they are the items, and they take what task 2 said and waits for.
    assert [(i.id, i.depends_on, i.labels, i.done) for i in plan.items] == [
        ("1", (), ("priority:high",), True),
        ("2.1", ("1",), ("priority:high",), False),
        ("2.2", ("2.1", "1"), ("priority:high",), False),
        ("3", ("2.1", "2.2"), ("priority:medium",), False),  # waits for all of task 2
        ("4", ("2.1",), ("priority:low",), True),  # cancelled: never worked
    ]
    assert [i.line for i in plan.items] == [5, 26, 35, 46, 57]  # where each "id" is
    first, record = plan.item("1"), plan.item("2.1")
    assert first.body == (
        "Create the src/readinglist package and its tests directory.\n\n"
        "Use a src/ layout; python -m unittest discovers tests/."
    )
    assert first.success_check == "python -m unittest runs and finds no tests yet"
    assert record.success_check == "python -m unittest tests.test_link"
    assert record.body == (
        "Part of task 2: Store saved links\n\n"
        "> Links are kept in a SQLite file.\n>\n"
        "> The task as a whole is checked by: Unit tests of the store\n\n"
        "url, title and tags; a url needs a scheme."
    )
    assert [(n.line, n.reason) for n in plan.unread] == [
        (46, "3 depends on unknown item 9; dependency ignored")
    ]
    assert plan.notes == (
        "Taskmaster tag master read; not read: feature-tags",
        "tasks with sub-tasks (2) are the sections of their sub-tasks, not items: each "
        "sub-task is worked on its own",
    )


def test_taskmaster_statuses_between_to_do_and_done_are_read_as_open_and_said(
    tmp_path: Path,
) -> None:
    from agent_harness.plan.backlog import load_plan

    tasks = [
        {"id": n, "title": f"Task {n}", "status": status}
        for n, status in enumerate(["pending", "in-progress", "review", "deferred", "blocked"], 1)
    ]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"tasks": tasks}, indent=2))
    plan = load_plan(path)
    assert not any(item.done for item in plan.items)
    # Review, deferred and blocked were worked as new with not a word said.
    said = [n.reason.split(" in Taskmaster")[0] for n in plan.unread]
    assert said == ["task 3 is 'review'", "task 4 is 'deferred'", "task 5 is 'blocked'"]


def test_odd_taskmaster_dependencies_are_reported_never_turned_into_others(tmp_path: Path) -> None:
    from agent_harness.plan.backlog import load_plan

    path = tmp_path / "tasks.json"
    path.write_text(
        '{"tasks": ['
        '{"id": 3, "title": "Serve", "dependencies": ["3.1"], "subtasks": ['
        '{"id": 1, "title": "GET", "dependencies": [3, 1]},'
        '{"id": 2, "title": "POST", "dependencies": [3, 1, null, "7\\n8", "x|y"]}]},'
        '{"id": 4, "title": "Docs", "dependencies": [3], "priority": "high\\nlow"}]}'
    )
    plan = load_plan(path)
    assert [(i.id, i.depends_on) for i in plan.items] == [
        ("3.1", ()),  # its own task says nothing; task 3's wait on 3.1 is its sub-tasks' order
        ("3.2", ("3.1",)),
        ("4", ("3.1", "3.2")),
    ]
    assert plan.item("4").labels == ()  # a priority that is no label is left out, and said
    reasons = sorted(n.reason for n in plan.unread)
    assert reasons == [
        "3.1 depends on itself (1); dependency ignored",
        "3.1 depends on task 3, which it is part of; dependency ignored",
        "3.2 depends on 3 unknown items (None, '7\\n8', 'x|y'); dependencies ignored",
        "3.2 depends on task 3, which it is part of; dependency ignored",
        "4: priority 'high\\nlow' is no label; left out",
    ]
    assert all("\n" not in reason for reason in reasons)


@pytest.mark.parametrize(
    ("document", "said"),
    [
        (
            '{"tasks": [{"id": 1, "title": "a"}, {"id": 1, "title": "b"}]}',
            "task id 1 is used twice (both on line 1)",  # it said "(lines 1 and 1)"
        ),
        (
            '{"tasks": [{"id": 1, "title": "a", "dependencies": [2]},'
            ' {"id": 2, "title": "b", "dependencies": [1]}]}',
            "dependency cycle 1 -> 2 -> 1",
        ),
        ('{"tasks": [{"id": "one", "title": "a"}]}', "a task has id 'one', not a whole number"),
        ('{"tasks": [{"id": 1.5, "title": "a"}]}', "a task has id 1.5, not a whole number"),
        ('{"tasks": [{"title": "a"}]}', "a task has no id"),
        ('{"tasks": [{"id": 1}]}', "task 1 (line 1) has no title"),
        ('{"tasks": [{"id": 1, "title": "a", "subtasks": [{"id": 1}]}]}', "task 1.1 (line 1)"),
        ('{"tasks": [{"id": 1, "title": "a", "subtasks": 3}]}', "task 1: subtasks is not a list"),
        ('{"a": {"tasks": []}, "b": {"tasks": []}}', "Taskmaster tags a, b and no master"),
        ('{"items": []}', "nor a Taskmaster tasks.json"),
    ],
)
def test_a_broken_tasks_json_is_one_line_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str, said: str
) -> None:
    path = tmp_path / "tasks.json"
    path.write_text(document)
    assert main(["plan", str(path)]) in (2, 3)
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def test_a_kiro_task_with_sub_tasks_hands_them_what_it_said(tmp_path: Path) -> None:
    path = tmp_path / "tasks.md"
    path.write_text(
        "- [ ] 1. Lay out the package\n\n"
        "- [x] 2. Store saved links\n"
        "  - Use SQLite; every write goes through one module\n"
        "  - labels: backend\n"
        "  - milestone: v0.1\n"
        "  - [ ] 2.1 Write the Link record\n"
        "    - labels: model\n"
        "  - [ ] 2.2 Save links\n\n"
        "- [ ] 3. Serve the list\n"
        "  - [ ] 3.1 Add GET /links\n"
    )
    plan = parse_plan_file(path)
    assert [(i.id, i.labels, i.milestone, i.done) for i in plan.items] == [
        ("1", (), None, False),
        ("2.1", ("backend", "model"), "v0.1", True),  # task 2 was checked off: so are they
        ("2.2", ("backend",), "v0.1", True),
        ("3.1", (), None, False),
    ]
    assert plan.item("2.2").body == (
        "Part of task 2: Store saved links\n\n> - Use SQLite; every write goes through one module"
    )
    assert plan.item("3.1").body == "Part of task 3: Serve the list"


def test_a_kiro_specs_plan_key_is_its_spec_spelled_as_a_key_may_be() -> None:
    from pathlib import PurePosixPath

    from agent_harness.plan.model import default_plan_key

    def key(path: str) -> str:
        return default_plan_key(PurePosixPath(path))

    assert key("/repo/.kiro/specs/link-store/tasks.md") == "link-store"
    assert key(".kiro/specs/link-store/tasks.md") == "link-store"
    assert key("/repo/specs/001-links/tasks.md") == "tasks"  # not Kiro's layout: the file's name
    assert key("/repo/PLAN.md") == "PLAN"
    # A name a key cannot hold gets dashes and a hash of itself: two such specs never meet.
    spaced, accented = (
        key("/r/.kiro/specs/my spec/tasks.md"),
        key("/r/.kiro/specs/my spéc/tasks.md"),
    )
    assert spaced.startswith("my-spec-") and accented.startswith("my-sp-c-")
    assert len({spaced, accented, key("/r/.kiro/specs/my-spec/tasks.md")}) == 3
    assert len(key("/r/.kiro/specs/" + "a" * 80 + "/tasks.md")) <= 64
    # A folder named in Latin-1 (b"caf\xe9", which Python holds as a lone surrogate) is hashed
    # as its bytes, apart from the same name in UTF-8.
    latin1 = key("/r/.kiro/specs/caf\udce9/tasks.md")
    assert latin1.startswith("caf-") and latin1 != key("/r/.kiro/specs/café/tasks.md")
    # A file named with a newline wrote it into every issue's marker; now it is spelled too.
    newline = key("/repo/new\nline.md")
    assert newline.startswith("new-line-") and newline.isprintable()
    assert key("/repo/My Plan.md") == "My Plan"  # a printable name stays as it always was


@pytest.mark.unit
def test_taskmaster_ids_written_with_leading_zeros_keep_their_own_lines(tmp_path: Path) -> None:
    from agent_harness.plan.backlog import load_plan

    path = tmp_path / "tasks.json"
    path.write_text(
        '{"tasks": [\n'
        '  {"id": "01", "title": "Set up"},\n'
        '  {"id": " 02 ", "title": "Store",\n'
        '   "subtasks": [\n'
        '     {"id": "007", "title": "Schema"},\n'
        '     {"id": 8, "title": "Queries"}]},\n'
        '  {"id": 3, "title": "Serve"}]}\n'
    )
    plan = load_plan(path)
    assert [(i.id, i.line) for i in plan.items] == [("1", 2), ("2.7", 5), ("2.8", 6), ("3", 7)]


def test_taskmaster_dependencies_written_with_leading_zeros_name_their_tasks(
    tmp_path: Path,
) -> None:
    from agent_harness.plan.backlog import load_plan

    path = tmp_path / "tasks.json"
    path.write_text(
        '{"tasks": [\n'
        '  {"id": 7, "title": "Set up"},\n'
        '  {"id": 9, "title": "Store", "subtasks": [\n'
        '     {"id": 1, "title": "Schema"},\n'
        '     {"id": 2, "title": "Queries", "dependencies": ["01", "07"]}]},\n'
        '  {"id": 10, "title": "Serve", "dependencies": ["07", "09.01", 9]}]}\n'
    )
    plan = load_plan(path)
    by_id = {item.id: item for item in plan.items}
    assert by_id["9.2"].depends_on == ("9.1", "7")
    assert by_id["10"].depends_on == ("7", "9.1", "9.2")  # task 9 stands for its sub-tasks
    assert plan.unread == ()


def test_taskmaster_dependencies_in_other_scripts_digits_are_reported_not_guessed(
    tmp_path: Path,
) -> None:
    from agent_harness.plan.backlog import load_plan

    path = tmp_path / "tasks.json"
    path.write_text(
        '{"tasks": [{"id": 7, "title": "Set up"},\n'
        '  {"id": 8, "title": "Store", "dependencies": ["\u0667", "\uff17", 7]}]}\n',
    )
    plan = load_plan(path)
    assert plan.items[1].depends_on == ("7",)
    assert [n.reason for n in plan.unread] == [
        "8 depends on 2 unknown items ('\u0667', '\uff17'); dependencies ignored"
    ]


def test_a_spec_kit_dependencies_section_orders_the_tasks_it_names() -> None:
    # spec-kit's ordering was read from titles alone: this section's lines were dropped unsaid.
    text = (
        "## Phase 3.2: Tests First\n- [ ] T004 [P] Contract test\n- [ ] T005 [P] Integration test\n"
        "## Phase 3.3: Core\n- [ ] T006 User model\n- [ ] T007 User service\n- [ ] T008 CLI\n"
        "## Dependencies & Execution Order\n"
        "- Tests (T004-T005) before implementation (T006-T007)\n"
        "- **T006 blocks T007, T008**\n- T008 depends on T007\n"
        "- Implementation before polish (T009-T012)\n"  # names no task of the plan
        "## Notes\n- T004 before T008 is said here, under another heading: not read\n"
    )
    plan = parse_plan(text)
    deps = {item.id: item.depends_on for item in plan.items}
    assert deps == {
        "T004": (),
        "T005": (),
        "T006": ("T004", "T005"),
        "T007": ("T004", "T005", "T006"),
        "T008": ("T006", "T007"),
    }
    assert "7 dependencies read from the section on line 8" in plan.notes


def test_only_a_section_about_order_is_read_for_it_and_only_its_own_lines() -> None:
    # `## Dependency upgrades` was read as one: a plan that parsed before became a cycle.
    upgrades = (
        "## Dependency upgrades\n- [ ] T1 Run the migration after deploy, before T2 is reviewed\n"
        "- [ ] T2 Review the migration (after T1)\n"
    )
    assert [i.depends_on for i in parse_plan(upgrades).items] == [(), ("T1",)]
    # Code, an item heading under it, and what is declared already add nothing.
    text = (
        "- [ ] T1 a\n- [ ] T2 b\n  - depends on: T1\n- [ ] T3 c\n## Dependencies\n"
        "- T2 depends on T1\n- T3 depends on T1\n```\nT2 before T3\n```\n"
        "### T9: An item\nT1 before T9\n"
    )
    plan = parse_plan(text)
    assert {i.id: i.depends_on for i in plan.items} == {
        "T1": (), "T2": ("T1",), "T3": ("T1",), "T9": (),
    }  # fmt: skip
    assert plan.notes == ("1 dependency read from the section on line 5",)
