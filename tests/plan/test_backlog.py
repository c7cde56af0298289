"""backlog.json: lossless round trip, refusal of foreign files, and the repo's own roadmap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_harness.errors import HarnessError, InputError
from agent_harness.plan import backlog
from agent_harness.plan.markdown import parse_plan, parse_plan_file
from agent_harness.plan.model import WorkItem

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_round_trip_is_lossless(tmp_path: Path) -> None:
    plan = parse_plan_file(ROOT / "examples" / "PLAN.md")
    target = tmp_path / "out" / "backlog.json"
    backlog.write_backlog(plan, target)
    again = backlog.load_plan(target)
    assert again == plan
    assert [i.content_hash for i in again.items] == [i.content_hash for i in plan.items]
    data = json.loads(target.read_text())
    assert data["format"] == "agent-harness/backlog" and data["version"] == 1
    assert data["items"][0]["hash"] == plan.items[0].content_hash


def test_a_note_on_the_plan_survives_the_round_trip_and_is_absent_when_empty(
    tmp_path: Path,
) -> None:
    prose = parse_plan("# Vision\n\nA faster build.\n", source="PRD.md")
    target = tmp_path / "backlog.json"
    backlog.write_backlog(prose, target)
    assert json.loads(target.read_text())["notes"] == list(prose.notes)
    assert backlog.load_plan(target) == prose and prose.notes
    assert "notes" not in json.loads(backlog.dumps(parse_plan("- [ ] T1 a\n")))


def test_a_plan_named_in_another_encoding_writes_a_backlog_that_is_utf8(tmp_path: Path) -> None:
    # Before, the odd byte of the name failed mid-write: exit 70, and a .tmp file left behind.
    plan = parse_plan_file(ROOT / "examples" / "PLAN.md").model_copy(
        update={"source": "caf\udce9.md"}
    )
    target = tmp_path / "backlog.json"
    backlog.write_backlog(plan, target)
    assert json.loads(target.read_bytes().decode("utf-8"))["source"] == "caf\\xe9.md"
    assert [p.name for p in tmp_path.iterdir()] == ["backlog.json"]
    assert backlog.load_plan(target).items == plan.items


@pytest.mark.parametrize("where", ["", ".", "/", "out"])
def test_a_directory_as_the_backlog_is_refused_and_nothing_is_made(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    plan = parse_plan_file(ROOT / "examples" / "PLAN.md")
    with pytest.raises(InputError, match="it is a directory; name a file"):
        backlog.write_backlog(plan, Path(where))
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        # 100,000 brackets deep: the decoder's recursion limit, refused like any bad backlog.
        ('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ('{"items": []}', "not an agent-harness backlog"),
        (
            '{"format": "agent-harness/backlog", "version": 9, "source": "x", "items": []}',
            "backlog version 9",
        ),
        (
            '{"format": "agent-harness/backlog", "version": 1, "source": "x", '
            '"items": [{"id": 1}]}',
            "items.0",
        ),
    ],
)
def test_bad_backlogs_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        backlog.load_plan(path)


def _item(item_id: str, deps: list[str], line: int) -> dict[str, object]:
    item = WorkItem(
        id=item_id, title=item_id, body="", depends_on=tuple(deps), line=line, form="heading"
    )
    return {**item.model_dump(mode="json"), "hash": item.content_hash}


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([_item("A1", ["A1"], 1)], "dependency cycle A1 -> A1"),
        ([_item("A2", ["A3"], 2), _item("A3", ["A2"], 3)], "dependency cycle A2 -> A3 -> A2"),
        ([_item("A4", ["A9"], 4)], "item A4 depends on A9, which no item of the backlog is"),
    ],
)
def test_a_backlog_whose_item_could_never_start_is_refused(
    tmp_path: Path, items: list[dict[str, object]], message: str
) -> None:
    # Edited by hand or written by another tool: queued as it is, the item would stay pending
    # for ever, as would every item after it.
    path = tmp_path / "b.json"
    doc = {"format": "agent-harness/backlog", "version": 1, "source": "x", "items": items}
    path.write_text(json.dumps(doc))
    with pytest.raises(HarnessError, match=message) as refused:
        backlog.load_plan(path)
    assert refused.value.exit_code in (2, 3)  # a usage error or a refused plan, never a crash


def test_roadmap_backlog_has_not_drifted() -> None:
    """The top-level backlog.json is generated from docs/ROADMAP.md by the tool itself.

    Regenerate with: agent-harness plan docs/ROADMAP.md --backlog backlog.json
    """
    roadmap = backlog.load_plan(ROOT / "docs" / "ROADMAP.md")
    committed = (ROOT / "backlog.json").read_text(encoding="utf-8")
    assert committed == backlog.dumps(roadmap.model_copy(update={"source": "docs/ROADMAP.md"}))
