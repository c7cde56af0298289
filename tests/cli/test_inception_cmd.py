"""`agent-harness inception` through the real entry point, against the scripted planner on
loopback (OpenAI's wire format): unattended, answered from a file, resumed, and at a terminal."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_harness.cli import main
from agent_harness.plan.markdown import parse_plan_file
from agent_harness.testing.model_server import ModelServer, ScriptedResponder
from agent_harness.testing.planner_rules import inception_rules

pytestmark = pytest.mark.integration

KEY = "sk-cli-planner-0123456789"
PARAGRAPH = (
    "Add word_count(text) in tally/words.py, tested by tests/test_words.py. "
    "Should punctuation count as a word? Leave README.md alone."
)


@pytest.fixture
def planner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    with ModelServer([ScriptedResponder(inception_rules)], api_key=KEY) as server:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield server


def inception(*args: str) -> int:
    return main(["inception", *args, "--planner", "openai:gpt-4.1", "--db", "sqlite:///h.sqlite"])


def session_id(err: str) -> str:
    return err.split("inception session ", 1)[1].split(" ", 1)[0]


def test_unattended_with_a_blocking_question_open_exits_3_and_writes_nothing(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inception(PARAGRAPH, "--no-ask") == 3
    err = capsys.readouterr().err
    assert "Q1 BLOCKING Should punctuation count as a word? — proposed: No" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: approval refused: 1 BLOCKING question is unanswered (Q1: ")
    assert f"--resume {session_id(err)}" in last
    assert not (tmp_path / "PLAN.md").exists()


def test_answers_from_a_file_end_in_a_plan_the_parser_reads_whole(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = tmp_path / "answers.toml"
    answers.write_text('Q1 = "No: words are runs of non-whitespace"\nQ2 = {defer = true}\n')
    assert inception(PARAGRAPH, "--answers", str(answers), "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "planned" and shown["out"] == "PLAN.md"
    assert [q["state"] for q in shown["questions"]] == ["answered", "deferred"]
    plan = parse_plan_file(tmp_path / "PLAN.md")
    assert plan.unread == () and [item.id for item in plan.items] == ["T1"]
    assert plan.items[0].files == ("tally/words.py", "tests/test_words.py")
    assert inception(PARAGRAPH, "--accept-defaults") == 2  # PLAN.md is there: not replaced
    assert "PLAN.md exists; pass --force" in capsys.readouterr().err


def test_a_refused_session_resumes_with_defaults_accepted(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inception(PARAGRAPH, "--no-ask") == 3
    sid = session_id(capsys.readouterr().err)
    requests = len(planner.requests)
    code = main(["inception", "--resume", sid, "--accept-defaults", "--db", "sqlite:///h.sqlite"])
    assert code == 0
    assert len(planner.requests) == requests + 1  # the scope was not asked for again
    assert "Decided (Q1): No" in (tmp_path / "PLAN.md").read_text()
    bad = main(
        ["inception", "--resume", "feedfeedfeed", "--out", "x.md", "--db", "sqlite:///h.sqlite"]
    )
    assert bad == 2
    assert "no inception session 'feedfeedfeed'" in capsys.readouterr().err


def test_at_a_terminal_it_asks_in_grade_order_and_shows_the_plan_first(
    planner: ModelServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Feedback: none; Q1 (BLOCKING): "defer" is refused, then answered; Q2 (NICE): Enter takes
    # the proposed answer; then yes, write it.
    typed = "\ndefer\nYes, punctuation is a word\n\ny\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(typed))
    assert inception(PARAGRAPH, "--ask", "--out", "plans/PLAN.md") == 0
    err = capsys.readouterr().err
    assert err.index("Q1 BLOCKING") < err.index("Q2 NICE")
    assert "Q1 is BLOCKING: answer it, or re-grade it before deferring" in err
    assert err.index("## Milestone: first delivery") < err.index("Write the plan to plans/PLAN.md?")
    text = (tmp_path / "plans" / "PLAN.md").read_text()
    assert "answered: Yes, punctuation is a word" in text and "answered: feature" in text


def test_bad_input_is_one_line_and_starts_nothing(
    planner: ModelServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "answers.json").write_text('{"Q1": {"answr": "typo"}}')
    assert inception(PARAGRAPH, "--answers", "answers.json") == 2
    assert capsys.readouterr().err.startswith("error: answers file answers.json, Q1: answr:")
    assert main(["inception", PARAGRAPH, "--planner", "openai", "--db", "sqlite:///h.sqlite"]) == 2
    assert "should look like vendor:model" in capsys.readouterr().err
    assert inception("   ") == 2
    assert planner.requests == []
