"""Cursor's plan files: the front matter's todos are the items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.errors import InputError, PlanRefused
from agent_harness.plan.backlog import load_plan
from agent_harness.plan.cursor import FRONT_MATTER_MAX
from agent_harness.plan.markdown import parse_plan

pytestmark = pytest.mark.unit
FIXTURE = Path(__file__).parent / "fixtures" / "cursor.plan.md"


def cursor_plan(todos: str, head: str = "name: P\n") -> str:
    return f"---\n{head}todos:\n{todos}---\n\n# P\n"


def test_a_cursor_plan_reads_as_its_todos() -> None:
    plan = load_plan(FIXTURE)
    rows = [(i.id, i.done, i.depends_on, i.line) for i in plan.items]
    assert rows == [
        ("bucket-store", True, (), 5),
        ("middleware", False, ("bucket-store",), 8),
        ("settings", False, (), 13),
        ("tests", False, ("middleware", "settings"), 16),
        ("docs", True, (), 20),
    ]
    settings = plan.item("settings")
    assert (
        settings.title == "Read rate and burst from settings: RATE_LIMIT_PER_MIN, RATE_LIMIT_BURST"
    )
    assert settings.body.startswith("From the plan **Rate limiter for the public API**.\n\nAdd a")
    # The prose under the front matter holds a checkbox: not an item, and not reported.
    assert plan.unread == () and plan.notes[0].startswith("read as a Cursor plan")


def test_crlf_and_a_byte_order_mark_read_the_same() -> None:
    text = FIXTURE.read_text()
    same = parse_plan("\ufeff" + text.replace("\n", "\r\n"), "p.plan.md")
    assert same.items == load_plan(FIXTURE).items


def test_odd_todos_are_reported_and_left_out() -> None:
    plan = parse_plan(
        cursor_plan(
            "  - id: good\n    content: Do it\n    dependencies: [ghost, good]\n"
            "  - id: has space\n    content: x\n"
            "  - id: true\n    content: x\n"
            "  - id: empty\n    content: ''\n"
            "  - just a string\n"
        ),
        "p.plan.md",
    )
    assert [(i.id, i.depends_on) for i in plan.items] == [("good", ())]
    reasons = [n.reason for n in plan.unread]
    assert sorted(reasons) == [
        "good depends on itself; dependency ignored",
        "good depends on unknown item ghost; dependency ignored",
        "todo 2: id 'has space' is no item id (letters, digits, . _ -); left out",
        "todo 3: id True is no item id (letters, digits, . _ -); left out",
        "todo 5 is not a mapping; left out",
        "todo empty has no content; left out",
    ]
    assert [n.line for n in plan.unread] == sorted(n.line for n in plan.unread)


@pytest.mark.parametrize(
    ("text", "error", "said"),
    [
        (cursor_plan("  - id: a\n    content: x\n  - id: a\n    content: y\n"), PlanRefused,
         "todo id a is used twice (lines 4 and 6)"),
        # Ids one branch and worktree would serve: the same on a case-blind disk (macOS), or
        # the same once the dot a branch cannot hold is a dash.
        (cursor_plan("  - id: tests\n    content: x\n  - id: Tests\n    content: y\n"), PlanRefused,
         "todo ids tests (line 4) and Tests (line 6) would share one branch and worktree"),
        (cursor_plan("  - id: api.v2\n    content: x\n  - id: api-v2\n    content: y\n"),
         PlanRefused, "todo ids api.v2 (line 4) and api-v2 (line 6) would share one branch"),
        (cursor_plan("  - id: a\n    content: x\n    dependencies: [b]\n"
                     "  - id: b\n    content: y\n    dependencies: [a]\n"), PlanRefused,
         "dependency cycle a -> b -> a"),
        ("---\ntodos: 3\n---\n", InputError, "the front matter's todos are not a list"),
        ("---\ntodos:\n  - id: [unclosed\n---\n", InputError, "the front matter is not YAML (line"),
        ("---\n- a\ntodos:\n---\n", InputError, "is not YAML"),
        ("---\ntodos:\n" + "#" * FRONT_MATTER_MAX + "\n---\n", InputError, "over 1024 KB"),
    ],
)  # fmt: skip
def test_what_cannot_be_a_plan_is_refused_in_one_line(
    text: str, error: type[Exception], said: str
) -> None:
    with pytest.raises(error) as refused:
        parse_plan(text, "p.plan.md")
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_front_matter_without_todos_is_read_as_before() -> None:
    plan = parse_plan("---\ntitle: Notes\n---\n\n### T1: Do it\n", "PLAN.md")
    assert [(i.id, i.line) for i in plan.items] == [("T1", 5)]


def test_the_cli_shows_a_cursor_plan_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(FIXTURE), "--json"]) == 0
    backlog = json.loads(capsys.readouterr().out)
    assert [item["id"] for item in backlog["items"]][:2] == ["bucket-store", "middleware"]


def test_one_aliased_list_of_dependencies_for_every_todo_is_bounded() -> None:
    # YAML aliases hand one list to every todo at no cost in the file's size.
    many = "[" + ", ".join(f"d{n}" for n in range(5000)) + "]"
    todos = "".join(f"  - id: t{n}\n    content: x\n    dependencies: *many\n" for n in range(500))
    plan = parse_plan(f"---\nmany: &many {many}\ntodos:\n{todos}---\n", "p.plan.md")
    assert len(plan.items) == 500 and all(item.depends_on == () for item in plan.items)
    assert plan.unread[0].reason == "t0 names 5000 dependencies, over 1000; ignored"


def test_nested_aliases_a_few_hundred_bytes_long_are_named_by_kind_not_spelled_out() -> None:
    # Ten levels of ten aliases each: 10**10 leaves in 500 bytes. Spelling one out in a notice
    # (or a bad id) never ended.
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, 10):
        levels.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 10) + "]")
    todos = "  - id: t1\n    content: x\n    dependencies: [*a9]\n  - id: *a9\n    content: y\n"
    plan = parse_plan("---\n" + "\n".join(levels) + f"\ntodos:\n{todos}---\n", "p.plan.md")
    assert [(item.id, item.depends_on) for item in plan.items] == [("t1", ())]
    assert sorted(notice.reason for notice in plan.unread) == [
        "t1 depends on unknown item a list; dependency ignored",
        "todo 2: id a list is no item id (letters, digits, . _ -); left out",
    ]


def test_a_todo_without_an_id_is_said_so_at_its_own_line() -> None:
    # It was "id None is no item id", at the `todos:` line.
    text = (
        "---\nname: Fix it\ntodos:\n  - id: a1\n    content: First\n"
        "  - content: no id at all\n    status: pending\n  - id: a2\n    content: Second\n---\n"
    )
    plan = parse_plan(text)
    assert [item.id for item in plan.items] == ["a1", "a2"]
    assert [(n.line, n.reason) for n in plan.unread] == [(6, "todo 2 has no id; left out")]
    assert [item.line for item in plan.items] == [4, 8]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (cursor_plan("  - id: bucket\n    content: Store data\n  - id: bucket-store\n"
                     "    content: Data\n"),
         "item bucket's title 'Store data' would name its branch "
         "agent-harness/bucket-store-data, which reads as bucket-store's (line 6)"),
        ("### T1: 2 factor auth\n### T1-2: Other\n",
         "item T1's title '2 factor auth' would name its branch agent-harness/T1-2-factor-auth, "
         "which reads as T1-2's (line 2)"),
    ],
)  # fmt: skip
def test_a_title_that_names_another_items_branch_is_refused(text: str, said: str) -> None:
    # One's work could be taken for the other's: `bucket-store` found `bucket`'s branch by its
    # own prefix and worked on it.
    with pytest.raises(PlanRefused) as refused:
        parse_plan(text, "p.plan.md")
    assert said in str(refused.value)
    # Done, it makes no branch: nothing to refuse.
    done = text.replace("content: Store data", "content: Store data\n    status: completed")
    if done != text:
        assert [i.id for i in parse_plan(done, "p.plan.md").items if not i.done] == ["bucket-store"]
