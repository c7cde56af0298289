"""`plan --add-ids`: a plain checklist's tasks get ids written into the file, and become items."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.errors import UsageError
from agent_harness.plan.ids import add_ids, add_ids_hint
from agent_harness.plan.markdown import parse_plan

CHECKLIST = """\
# Implementation plan

## Phase 1: Setup
- [ ] Create the project skeleton
- [ ] Add a CI workflow
  - [ ] lint job
  - [ ] test job

## Phase 2: Core
- [x] Parse the config file
1. [ ] Implement the `fetch` command
> - [ ] Quoted task
- [ ] t9 A near-miss id a person should correct
- [ ] T3 Already an item (depends on T12)

```
- [ ] not a task: code
```
"""


@pytest.mark.unit
def test_each_idless_checkbox_gets_the_next_free_id_and_nothing_else_changes() -> None:
    before = parse_plan(CHECKLIST, "PLAN.md")
    assert [item.id for item in before.items] == ["T3"]

    result = add_ids(CHECKLIST, "PLAN.md")

    # Numbered after every T<n> the file mentions (T12 is named by a dependency).
    assert [(a.line, a.id) for a in result.added] == [
        (4, "T13"),
        (5, "T14"),
        (10, "T15"),
        (11, "T16"),
    ]
    assert [n.line for n in result.nested] == [6, 7]
    assert [n.line for n in result.left] == [13]
    old, new = CHECKLIST.split("\n"), result.text.split("\n")
    pairs = enumerate(zip(old, new, strict=True))
    changed = {n + 1: line for n, (was, line) in pairs if was != line}
    assert changed == {
        4: "- [ ] T13 Create the project skeleton",
        5: "- [ ] T14 Add a CI workflow",
        10: "- [x] T15 Parse the config file",
        11: "1. [ ] T16 Implement the `fetch` command",
    }  # a quote holds someone's words, not tasks: its checkbox is left as it is
    items = {item.id: item for item in result.plan.items}
    assert sorted(items) == ["T13", "T14", "T15", "T16", "T3"]
    assert items["T14"].body == "- [ ] lint job\n- [ ] test job"  # the nested ones: its steps
    assert items["T15"].done and not items["T13"].done
    assert items["T16"].title == "Implement the fetch command"
    # Run again, nothing more to do.
    again = add_ids(result.text, "PLAN.md")
    assert again.added == () and again.text == result.text


@pytest.mark.unit
def test_line_endings_and_a_prefix_are_kept() -> None:
    text = "- [ ] one\r\n- [ ]\ttwo\r\n\r\n- [ ] TASK-4 four\r\n"
    result = add_ids(text, "t.md", prefix="TASK-")
    assert result.text == "- [ ] TASK-5 one\r\n- [ ] TASK-6\ttwo\r\n\r\n- [ ] TASK-4 four\r\n"
    assert [item.id for item in result.plan.items] == ["TASK-5", "TASK-6", "TASK-4"]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Every id starts with C: the new one does too, after the highest.
        ("- [ ] C1 one\n- [ ] plain\n- [ ] C3 three\n", "C4"),
        ("- [ ] TASK-2 one\n- [ ] plain\n", "TASK-3"),
        # Ids of two shapes, or none at all: T.
        ("- [ ] C1 one\n- [ ] D2 two\n- [ ] plain\n", "T1"),
        ("- [ ] plain\n", "T1"),
    ],
)
def test_without_a_prefix_the_new_ids_look_like_the_plans_own(text: str, expected: str) -> None:
    [added] = add_ids(text, "t.md").added
    assert added.id == expected


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # An id the parser reads from `T1-setup`, and a `t2` it tells a person to write as T2,
        # are both taken: the new ids come after them.
        ("- [ ] plain\n- [ ] T1-setup x\n", "- [ ] T2 plain\n- [ ] T1-setup x\n"),
        ("- [ ] t2 fix\n- [ ] plain\n", "- [ ] t2 fix\n- [ ] T3 plain\n"),
        # The spacing after the box stays as written.
        ("- [ ]   many\n- [x]\tdone\n", "- [ ] T1   many\n- [x] T2\tdone\n"),
        # A box on a nested bullet's line, and on the line after a bare bullet.
        ("* - [ ] x\n", "* - [ ] T1 x\n"),
        ("-\n  [ ] x\n", "-\n  [ ] T1 x\n"),
    ],
)
def test_odd_but_valid_checklists_get_ids_that_read_back(text: str, expected: str) -> None:
    result = add_ids(text, "t.md")
    assert result.text == expected
    assert len(result.plan.items) == len(parse_plan(expected, "t.md").items)
    assert add_ids(result.text, "t.md").added == ()


@pytest.mark.unit
def test_a_plan_of_numbered_tasks_is_left_to_its_numbers() -> None:
    # One named id would stop Kiro's numbered tasks being read by their numbers: 3 items
    # would become 1. So it is refused, and the plan's report does not point at --add-ids.
    text = "- [ ] 1. Set up\n- [ ] 2. Models\n- [ ] 2.1 Interfaces\n- [ ] Tidy README\n"
    plan = parse_plan(text, "tasks.md")
    assert [item.id for item in plan.items] == ["1", "2.1"]
    assert add_ids_hint(plan) == ""
    with pytest.raises(UsageError, match=r"numbered tasks .* \(lines 4\)"):
        add_ids(text, "tasks.md")


@pytest.mark.unit
@pytest.mark.parametrize("prefix", ["", "t", "T1", "ab-", "T 1"])
def test_a_prefix_that_makes_no_id_is_refused(prefix: str) -> None:
    with pytest.raises(UsageError, match="makes no item id"):
        add_ids("- [ ] one\n", "t.md", prefix=prefix)


@pytest.mark.unit
def test_the_cli_writes_the_ids_keeps_the_encoding_and_mode_and_reports_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "TODO.md"
    plan.write_bytes(b"\xef\xbb\xbf# Todo\n- [ ] caf\xc3\xa9 menu\n- [ ] second\n")
    os.chmod(plan, 0o640)
    link = tmp_path / "link.md"
    link.symlink_to(plan)

    assert main(["plan", str(link), "--add-ids", "--dry-run", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["written"] is False and shown["items"] == 2
    assert plan.read_bytes().startswith(b"\xef\xbb\xbf# Todo\n- [ ] caf")  # untouched

    assert main(["plan", str(link), "--add-ids", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["written"] is True
    assert [(a["line"], a["id"], a["text"]) for a in done["added"]] == [
        (2, "T1", "café menu"),
        (3, "T2", "second"),
    ]
    assert link.is_symlink()
    assert plan.read_bytes() == b"\xef\xbb\xbf# Todo\n- [ ] T1 caf\xc3\xa9 menu\n- [ ] T2 second\n"
    assert plan.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file

    assert main(["plan", str(plan), "--json"]) == 0
    assert [i["id"] for i in json.loads(capsys.readouterr().out)["items"]] == ["T1", "T2"]


@pytest.mark.unit
def test_the_plan_table_points_a_plain_checklist_at_add_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "my plan.md"
    plan.write_text("- [ ] one\n- [ ] two\n")
    assert main(["plan", str(plan)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"2 checkboxes have no id: `agent-harness plan '{plan}' --add-ids`" in out


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-", "--add-ids"], "standard input"),
        (["PLAN.json", "--add-ids"], "is JSON"),
        (["PLAN.md", "--add-ids", "--repo", "me/app"], "then sync with --repo"),
        (["PLAN.md", "--id-prefix", "TASK-"], "--id-prefix needs --add-ids"),
        (["PLAN.md", "--add-ids", "--id-prefix", "t"], "makes no item id"),
    ],
)
def test_add_ids_refusals_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    (tmp_path / "PLAN.md").write_text("- [ ] one\n")
    (tmp_path / "PLAN.json").write_text('{"items": []}\n')
    given = [str(tmp_path / a) if a.startswith("PLAN") else a for a in args]
    assert main(["plan", *given]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1, err
    assert (tmp_path / "PLAN.md").read_text() == "- [ ] one\n"


@pytest.mark.integration
def test_run_and_sync_of_a_plan_without_items_say_why_and_make_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plain checklist used to run to an empty table and exit 0, having said nothing.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "TODO.md").write_text("- [ ] one\n- [ ] two\n")
    (tmp_path / "work").mkdir()
    run = ["run", "--repo", "me/app", "--forge", "local", "--work", "work", "--plan", "TODO.md"]
    agents = ["--agent", "sh -c true {prompt_file}", "--reviewer", "openai:gpt-4.1"]
    assert main([*run, *agents]) == 3
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: TODO.md has no items; 2 checkboxes have no id: `agent-harness plan TODO.md "
        "--add-ids` writes ids into them (add --dry-run to see them first)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TODO.md", "work"]  # nothing made

    (tmp_path / "NOTES.md").write_text("# Notes\n\nJust prose.\n")
    assert main([*run[:-1], "NOTES.md", *agents]) == 3
    assert "NOTES.md has no items. Items are `### T1: ...` headings" in capsys.readouterr().err

    assert main(["plan", "TODO.md", "--repo", "me/app", "--forge", "local"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("warning: TODO.md has no items; 2 checkboxes have no id")
    assert "0 created" in captured.out

    # Lines not read are said by the sync too, which goes on without them: a label GitHub
    # would refuse was dropped without a word.
    (tmp_path / "PLAN.md").write_text(
        f"### T1: a\nlabels: {'x' * 60}\n\n- [ ] T2 b (depends on T9)\n"
    )
    assert main(["plan", "PLAN.md", "--repo", "me/app", "--forge", "local"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(
        "warning: 2 lines of PLAN.md not read, synced without them (line 2: label of 60 "
        "characters left out: GitHub takes at most 50); `agent-harness plan PLAN.md` lists them\n"
    )
    assert "2 created" in captured.out


@pytest.mark.unit
def test_a_read_only_plan_is_not_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "TODO.md"
    plan.write_text("- [ ] one\n")
    plan.chmod(0o444)
    assert main(["plan", str(plan), "--add-ids"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"error: {plan} is read-only; make it writable to have it changed"
    )
    assert plan.read_text() == "- [ ] one\n"


@pytest.mark.integration
@pytest.mark.parametrize("name", ["caf\udce9 plan.md", "it's.md", "plain.md"])
def test_the_hint_names_the_file_so_a_pasted_command_finds_it(tmp_path: Path, name: str) -> None:
    import subprocess

    path = tmp_path / name
    path.write_text("- [ ] Create the project skeleton\n")
    hint = add_ids_hint(parse_plan(path.read_text(), source=str(path)))
    command = hint.split("`")[1]
    if "\udce9" in name:  # bash's quoting of bytes, which is valid UTF-8 text to print
        assert f"$'{tmp_path}/caf\\xe9 plan.md'" in command
    # What bash makes of the pasted words is the file's own name, byte for byte.
    said = subprocess.run(
        ["bash", "-c", f"set -- {command}; printf '%s' \"$3\""], capture_output=True, check=True
    ).stdout
    assert said == os.fsencode(path)


@pytest.mark.unit
def test_a_mention_too_long_to_be_a_number_neither_crashes_nor_sets_the_next_id() -> None:
    # Python reads no integer of more than 4,300 digits: the mention is left out, not a crash.
    text = f"- [ ] T{'9' * 5000} big\n- [ ] b\n"
    result = add_ids(text, "h.md")
    assert [added.id for added in result.added] == ["T1"]
    assert result.text.endswith("- [ ] T1 b\n")


@pytest.mark.unit
def test_a_prefix_too_long_for_an_id_is_refused() -> None:
    with pytest.raises(UsageError, match="at most 32"):
        add_ids("- [ ] b\n", "h.md", "A" * 300)


@pytest.mark.unit
def test_tasks_starting_with_an_acronym_get_ids_of_their_own() -> None:
    text = "- [ ] S3 bucket policy\n- [ ] EC2 instance sizing\n- [ ] S3 lifecycle rules\n"
    result = add_ids(text, "t.md")
    assert result.text == (
        "- [ ] T1 S3 bucket policy\n- [ ] T2 EC2 instance sizing\n- [ ] T3 S3 lifecycle rules\n"
    )
    assert [(i.id, i.title) for i in result.plan.items] == [
        ("T1", "S3 bucket policy"),
        ("T2", "EC2 instance sizing"),
        ("T3", "S3 lifecycle rules"),
    ]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # spec-kit numbers T001 to T023: the next is T024 (it was T24).
        ("- [ ] T001 Set up\n- [ ] T023 Lint\n- [ ] Add the model\n", "T024"),
        ("- [ ] T1 Set up\n- [ ] T12 Lint\n- [ ] Add the model\n", "T13"),  # not padded
        ("- [ ] T01 Set up\n- [ ] T123 Lint\n- [ ] Add the model\n", "T124"),  # not alike
    ],
)
def test_new_ids_are_padded_as_the_plans_own(text: str, expected: str) -> None:
    [added] = add_ids(text, "t.md").added
    assert added.id == expected


@pytest.mark.unit
def test_a_checkbox_naming_an_issue_gets_no_id_of_its_own() -> None:
    # GitHub's task lists name issues: an item for one would make a second issue of it.
    text = (
        "- [ ] #1423\n- [ ] acme/widget-docs#88\n- [ ] https://github.com/acme/w/issues/1430\n"
        "- [ ] Update the changelog\n"
    )
    result = add_ids(text, "t.md")
    assert [(a.id, a.text) for a in result.added] == [("T1", "Update the changelog")]
    said = {n.line: n.reason for n in result.plan.unread}
    assert set(said) == {1, 2, 3}
    assert all(
        reason.startswith("checkbox names an issue or pull request") for reason in said.values()
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "word", ["S3 bucket policy for uploads", "OAUTH2 login with Google", "HTTP2 push tests"]
)
def test_a_plain_checklist_whose_one_task_starts_with_an_acronym_is_numbered_whole(
    word: str,
) -> None:
    # It was read as the one item (`S3`: "bucket policy for uploads"), and --add-ids went on
    # from it: S4 Add rate limiting, S5 Fix the typo.
    text = f"\ufeff- [ ] Add rate limiting\r\n- [ ] {word}\r\n- [ ] Fix the typo\r\n"
    assert parse_plan(text, "TODO.md").items == ()
    result = add_ids(text, "TODO.md")
    assert [(i.id, i.title) for i in result.plan.items] == [
        ("T1", "Add rate limiting"),
        ("T2", word),
        ("T3", "Fix the typo"),
    ]
    assert result.text == (
        f"\ufeff- [ ] T1 Add rate limiting\r\n- [ ] T2 {word}\r\n- [ ] T3 Fix the typo\r\n"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "ids"),
    [
        # Steps nested in items are no tasks of their own: the items stay items.
        ("- [ ] AUTH1 add the login page\n  - [ ] form\n  - [ ] validation\n"
         "- [ ] DB1 create the schema\n  - [ ] users table\n", ["AUTH1", "DB1"]),
        ("- [ ] AUTH1 add the login page\n  - [ ] form\n  - [ ] validation\n", ["AUTH1"]),
        # Two ids of their own are a plan's ids, whatever plain tasks sit beside them.
        ("- [ ] FE1 build the form\n- [ ] BE1 add the endpoint\n- [ ] Write tests\n"
         "- [ ] Deploy it\n", ["FE1", "BE1"]),
        # One task beside a single plain one: too little to say it is a word.
        ("- [ ] API1 design\n- [ ] Write tests\n", ["API1"]),
    ],
)  # fmt: skip
def test_a_lone_word_is_read_so_only_in_a_checklist_of_plain_tasks(
    text: str, ids: list[str]
) -> None:
    assert [item.id for item in parse_plan(text, "p.md").items] == ids
