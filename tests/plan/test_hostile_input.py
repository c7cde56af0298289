"""Hostile and odd plan inputs: bounded reads, no blocking, and nothing dropped without a word."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from agent_harness.errors import InputError
from agent_harness.plan import source
from agent_harness.plan.markdown import parse_plan
from agent_harness.plan.source import read_plan_text

pytestmark = pytest.mark.unit


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_a_device_that_never_ends_is_refused_without_reading_it() -> None:
    with pytest.raises(InputError, match="is not a regular file"):
        read_plan_text(Path("/dev/zero"))


def test_a_named_pipe_is_refused_instead_of_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a named pipe"):
        read_plan_text(fifo)


def test_a_symlink_loop_is_named_as_a_loop(tmp_path: Path) -> None:
    (tmp_path / "a.md").symlink_to(tmp_path / "b.md")
    (tmp_path / "b.md").symlink_to(tmp_path / "a.md")
    with pytest.raises(InputError, match="loop of symbolic links"):
        read_plan_text(tmp_path / "a.md")
    with pytest.raises(InputError, match="not found"):
        read_plan_text(tmp_path / "missing.md")


def test_standard_input_is_read_up_to_the_limit_and_no_further(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(source, "MAX_PLAN_BYTES", 1000)

    class Endless(io.RawIOBase):
        """A pipe that never ends (like `yes |`); it counts what was asked of it."""

        asked = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
            Endless.asked += len(buffer)
            buffer[:] = b"x" * len(buffer)
            return len(buffer)

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Endless())))
    with pytest.raises(InputError, match="standard input is over"):
        read_plan_text(Path("-"))
    assert Endless.asked < 100_000  # it stopped, rather than reading for ever


def test_a_file_larger_than_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "MAX_PLAN_BYTES", 100)
    big = tmp_path / "big.md"
    big.write_text("### T1: x\n" * 50)
    with pytest.raises(InputError, match=r"MB; plans over 0 MB are refused"):
        read_plan_text(big)


def test_ids_with_a_dot_in_them_are_reported_never_read_as_another_item() -> None:
    # `### T1.1: dotted` was read as item T1 titled "1: dotted", and two siblings T1.1 and
    # T1.2 as "item id T1 is used twice": work quietly misnamed, or the plan refused.
    plan = parse_plan("### T1.1: dotted\n\n### T1.2: next\n\n- [ ] T2.10 a box\n\n### T3: ok\n")
    assert [item.id for item in plan.items] == ["T3"]
    reasons = {notice.line: notice.reason for notice in plan.unread}
    assert reasons[1] == (
        "'T1.1' has a dot in its id: ids hold upper-case letters, digits, '-' and '_' "
        "(write T1-1); not read as an item"
    )
    assert "'T1.2' has a dot" in reasons[3] and "'T2.10' has a dot" in reasons[5]


def test_ids_with_lower_case_letters_are_reported_never_dropped_silently() -> None:
    plan = parse_plan("### Ab1: lower\n\n### Auth-1: mixed\n\n- [ ] t2 a box\n\n### T3: ok\n")
    assert [item.id for item in plan.items] == ["T3"]
    reasons = {notice.line: notice.reason for notice in plan.unread}
    assert (
        reasons[1] == "'Ab1' is not an item id (ids are upper case, like AB1); not read as an item"
    )
    assert "'Auth-1' is not an item id" in reasons[3]
    assert reasons[5] == ("checkbox has no item id: 't2' is not one (ids are upper case, like T2)")


def test_headings_that_only_look_like_ids_stay_quiet() -> None:
    plan = parse_plan("## Python: notes\n\n## Step 1: install\n\n### T1: work\n")
    assert [item.id for item in plan.items] == ["T1"] and list(plan.unread) == []


def test_checkboxes_nested_past_what_markdown_reads_are_reported() -> None:
    text = "".join("  " * depth + f"- [ ] T{depth + 1} depth {depth}\n" for depth in range(12))
    plan = parse_plan(text)
    assert [item.id for item in plan.items] == [f"T{n}" for n in range(1, 10)]
    assert [(notice.line, notice.reason) for notice in plan.unread] == [
        (line, "a list nested more than 9 deep; not read") for line in (10, 11, 12)
    ]


def test_a_line_naming_thousands_of_unknown_ids_gives_one_short_notice() -> None:
    # Before: one notice per unknown id, each quoting the whole 69 kB line (690 MB of --json).
    ids = ", ".join(f"T{n}" for n in range(2, 10_002))
    plan = parse_plan(f"### T1: one\ndepends on: {ids}\n")
    assert len(plan.unread) == 1
    notice = plan.unread[0]
    assert notice.line == 2
    assert notice.reason.startswith("T1 depends on 10000 unknown items (T2, T3,")
    assert "and 9990 more" in notice.reason
    assert len(notice.text) <= 200 and notice.text.endswith("…")
    assert plan.item("T1").depends_on == ()


def test_the_plan_table_draws_a_bounded_part_of_a_huge_plan() -> None:
    from rich.console import Console

    from agent_harness.cli.plan_view import TABLE_ROWS_MAX, render_plan

    count = TABLE_ROWS_MAX + 37
    text = "".join(f"### T{n}: {'z' * 5000 if n == 1 else 'item'}\n\n" for n in range(1, count + 1))
    out = Console(record=True, width=100, file=io.StringIO())
    render_plan(out, parse_plan(text))
    shown = out.export_text()
    assert "… and 37 more items (not drawn; --json lists every one)" in shown
    assert f"T{TABLE_ROWS_MAX}" in shown and f"T{count} " not in shown
    assert "z" * 300 not in shown.replace("\n", "").replace("│", "").replace(" ", "")
    assert f"{count} items (0 done)" in shown
    assert "T20 and 517 more" in shown


def test_twenty_thousand_numbered_sub_tasks_are_each_read_once() -> None:
    # Finding which tasks have sub-tasks looks at each task's own number, never every pair.
    text = "- [ ] 1. The group\n" + "".join(f"- [ ] 1.{n} task {n}\n" for n in range(1, 20_001))
    plan = parse_plan(text)
    assert [item.id for item in plan.items[:2]] == ["1.1", "1.2"]
    assert len(plan.items) == 20_000 and plan.items[-1].id == "1.20000"
    assert all(item.body == "Part of task 1: The group" for item in plan.items)
    assert plan.unread == ()


def test_escape_sequences_in_a_plan_are_shown_not_sent_to_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_harness.cli import main

    plan = tmp_path / "plan.md"
    plan.write_text("- [ ] T1 Hello\x1b[2J\x1b]0;owned\x07 #\x9bred\n")
    assert main(["plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "Hello\\x1b[2J\\x1b]0;owned\\x07" in out and "\\x9b" in out
    assert not any(char in out for char in "\x1b\x07\x9b")


@pytest.mark.unit
def test_an_item_id_too_long_for_a_branch_or_the_queue_is_a_line_not_read() -> None:
    # Read as an item, it synced to an issue and then failed `run` at the worktree.
    plan = parse_plan(f"### {'A' * 300}1: x\n### T2: y\n")
    assert [item.id for item in plan.items] == ["T2"]
    [notice] = plan.unread
    assert (notice.line, notice.reason) == (1, "item id of 301 characters; at most 64")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("line", "hidden"),
    [("### T2\u200b: x", "U+200B"), ("### T\u200b3: x", "U+200B"), ("### \u202eT4: x", "U+202E")],
)
def test_a_heading_made_no_item_by_invisible_characters_is_said_not_dropped(
    line: str, hidden: str
) -> None:
    # Before: neither an item nor a line not read, though the plan's reader saw an item.
    plan = parse_plan(f"### T1: a\n{line}\n")
    assert [item.id for item in plan.items] == ["T1"]
    [notice] = plan.unread
    assert notice.line == 2
    assert notice.reason == f"heading holds invisible characters ({hidden}); not read as an item"
