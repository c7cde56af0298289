"""Lines a person would call items, in the shapes other tools and hands write them, are read or
said: never dropped without a word ("0 lines not read" while an item is missing)."""

from __future__ import annotations

import pytest

from agent_harness.plan.markdown import parse_plan

pytestmark = pytest.mark.unit


def _unread(text: str) -> dict[int, str]:
    return {notice.line: notice.reason for notice in parse_plan(text).unread}


def test_a_checkbox_in_a_state_the_plan_does_not_read_is_said() -> None:
    # Obsidian's custom states and other spellings of done made their items vanish.
    text = "- [>] T5 forwarded\n- [!] T6 important\n- [?] T7 why\n- [ ] T1 open\n"
    text += "- [ x ] T10 spaced\n- [✓] T11 ticked\n- [] T13 empty\n- [docs](x) a link\n"
    plan = parse_plan(text)
    assert [item.id for item in plan.items] == ["T1"]
    said = _unread(text)
    assert sorted(said) == [1, 2, 3, 5, 6, 7]  # the link is no checkbox
    assert said[1].startswith("checkbox marked [>]: the plan reads [ ] and [x] (done)")


def test_a_list_line_with_an_id_but_no_checkbox_is_said_outside_an_items_body() -> None:
    text = (
        "## Now\n- [ ] T1 Add the parser\n## Later\n- T3: Write docs\n- [TASK3] Release\n\n"
        "### T9: Heading item\n\n- T5: a note in its body\n"
    )
    assert [item.id for item in parse_plan(text).items] == ["T1", "T9"]
    said = _unread(text)
    assert sorted(said) == [4, 5]  # T5 is part of T9's body
    assert said[4] == "a list line with the id T3 but no checkbox (`- [ ] T3 …` is an item)"


@pytest.mark.parametrize(
    "heading",
    [
        "TODO T1: Build",
        "DONE T1: Build",
        "[ ] T1: Build",
        "🚧 T1: Build",
        "(T1) Build",
        "1. T1: Build",
        "Task T1: Build",
    ],
)
def test_a_heading_with_its_id_after_other_words_is_said(heading: str) -> None:
    text = f"### {heading}\n\nDo it.\n\n### T2: Other\n"
    assert [item.id for item in parse_plan(text).items] == ["T2"]
    assert "an item heading starts with its id (`### T1: …`)" in _unread(text)[1]


def test_a_jira_issue_key_column_is_an_id_and_a_table_without_one_is_said() -> None:
    jira = "| Issue key | Summary | Status |\n|---|---|---|\n| ENG-14 | Build | To Do |\n"
    jira += "| ENG-15 | Ship | Done |\n"
    plan = parse_plan(jira)
    assert [(i.id, i.title, i.done) for i in plan.items] == [
        ("ENG-14", "Build", False),
        ("ENG-15", "Ship", True),
    ]
    # A plain "Key" column is as often a key/value table's (F1, Esc; a setting's name): its
    # rows are no items, and a row that starts with an id says why it is not read.
    keys = "| Key | Description |\n|---|---|\n| F1 | Open help |\n| Esc | Close |\n"
    assert parse_plan(keys).items == ()
    assert _unread(keys)[1].startswith("table has no id column (its columns: Key, Description)")
    settings = "| Key | Default |\n|---|---|\n| item_cost_usd | none |\n"
    assert parse_plan(settings).items == () and _unread(settings) == {}


@pytest.mark.parametrize("status", ["Cancelled", "Canceled", "Won't do", "Dropped"])
def test_work_decided_against_is_not_work_to_do(status: str) -> None:
    plan = parse_plan(f"### T1: Old idea\n\nstatus: {status}\n\n### T2: New\n")
    assert [(item.id, item.done) for item in plan.items] == [("T1", True), ("T2", False)]


def test_front_matter_todos_that_are_not_cursors_leave_the_body_to_be_read() -> None:
    for front in ("todos: []", "todos:\n  - buy milk"):
        plan = parse_plan(f"---\n{front}\n---\n- [ ] T1 Real item\n- [ ] T2 Another\n")
        assert [item.id for item in plan.items] == ["T1", "T2"], front


def test_a_label_longer_than_github_takes_is_left_out_and_said() -> None:
    long = "x" * 60
    plan = parse_plan(f"### T1: Add it\n\nlabels: ok, {long}\n")
    assert plan.items[0].labels == ("ok",)
    assert _unread(f"### T1: Add it\n\nlabels: ok, {long}\n") == {
        3: "label of 60 characters left out: GitHub takes at most 50"
    }


def test_a_field_left_empty_takes_the_list_or_fenced_command_right_under_it() -> None:
    # `check:` over a fenced command, `Files:` and `Dependencies:` over a list lost their
    # values (and their lines left the body headless), all without a word.
    text = (
        "### T1: Add parser\ncheck:\n```bash\npytest tests/test_parser.py -q\n```\n\n"
        "### T2: Add CLI\n**Acceptance criteria:**\n- `mycli --help` exits 0\nFiles:\n"
        "- `src/cli.py`\n- src/main.py\n\nDependencies:\n- T1\n\nSome body.\n"
    )
    plan = parse_plan(text)
    one, two = plan.items
    assert one.success_check == "`pytest tests/test_parser.py -q`" and one.body == ""
    # A list under a field ends at the next checkbox: the next item is never its value.
    assert two.success_check == "`mycli --help` exits 0"
    assert (two.files, two.depends_on, two.body) == (
        ("src/cli.py", "src/main.py"),
        ("T1",),
        "Some body.",
    )
    assert plan.unread == ()


def test_a_dependency_in_other_words_at_a_titles_end_is_one_when_it_names_items() -> None:
    text = (
        "- [ ] T1 One\n- [ ] T2 Two (after T1)\n- [ ] T4 Four (needs T1)\n"
        "- [ ] T5 Five — depends on T1\n- [ ] T6 Six [depends: T1]\n"
        "- [ ] T8 Eight (requires T1 and T2)\n- [ ] T9 Nine (requires TLS13)\n"
        "- [ ] T10 Ten [depends on T1]\n- [ ] T11 Eleven [blocked by T2]\n"
    )
    read = {item.id: (item.title, item.depends_on) for item in parse_plan(text).items}
    assert read == {
        "T1": ("One", ()),
        "T2": ("Two", ("T1",)),
        "T4": ("Four", ("T1",)),
        "T5": ("Five", ("T1",)),
        "T6": ("Six", ("T1",)),
        "T8": ("Eight", ("T1", "T2")),
        "T9": ("Nine (requires TLS13)", ()),  # names no item: the title's own words
        "T10": ("Ten", ("T1",)),  # stayed in the title, unread
        "T11": ("Eleven", ("T2",)),
    }


def test_a_brace_glob_in_files_is_kept_whole_and_quotes_come_off() -> None:
    plan = parse_plan('### T1: x\n\nfiles: `src/{a,b}.ts`, "docs/my file.md", lib/*.py\n')
    assert plan.items[0].files == ("src/{a,b}.ts", "docs/my file.md", "lib/*.py")


def test_add_ids_gives_no_second_id_to_a_checkbox_whose_id_comes_late() -> None:
    from agent_harness.plan.ids import add_ids

    text = "- [ ] (T6) Paren\n- [ ] TODO: T13 prefix\n- [ ] 🔴 T14 emoji\n- [ ] Review T1 output\n"
    done = add_ids(text, "PLAN.md")
    assert [(a.line, a.id) for a in done.added] == [(4, "T15")]
    assert done.text.splitlines()[:3] == text.splitlines()[:3]
    assert "checkbox has its id T6 after '('" in _unread(text)[1]


def test_a_list_under_a_field_never_takes_the_next_items_checkbox() -> None:
    text = "- [ ] T1 Build\n  check:\n  - pytest -q\n- [ ] T2 Next\n  Dependencies:\n  - T1\n"
    text += "- [ ] T3 Third\n"
    read = {i.id: (i.success_check, i.depends_on) for i in parse_plan(text).items}
    assert read == {"T1": ("pytest -q", ()), "T2": (None, ("T1",)), "T3": (None, ())}


def test_a_fenced_check_of_several_commands_runs_each() -> None:
    plan = parse_plan("### T1: x\ncheck:\n```\npytest -q\nmake lint\n```\n")
    assert plan.items[0].success_check == "`pytest -q && make lint`"
